"""The agent as the VM runs it: the bundle alone (``bundle_files()`` unpacked into a folder), under
``python -I -S`` (no site-packages: nothing of trainvm's environment), judging and reporting exactly as
the workstation's ``verify`` / ``verify --local`` do."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provisioner.agent.bundle import bundle_files
from provisioner.agent.compare import compare as agent_compare
from provisioner.probe.report import probe
from provisioner.verify.compare import compare
from provisioner.verify.expect import expectation

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/probe"
SYSTEM_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
RUN = "import sys; sys.path[:0] = [sys.argv.pop(1)]; from provisioner.agent.__main__ import main; sys.exit(main(['agent'] + sys.argv[1:]))"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("agent")
    for rel, data in bundle_files().items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


def agent(bundle: Path, root: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """python -I -S: no PYTHONPATH, no site-packages, no user site; only the bundle."""
    return subprocess.run([sys.executable, "-I", "-S", "-c", RUN, str(bundle), *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "TRAINVM_ROOT": str(root), **env}, cwd="/")


def machine_root(tmp_path: Path, expected: dict[str, Any]) -> Path:
    """A $TRAINVM_ROOT whose machine files are this machine's (os-release, cpuinfo, meminfo)."""
    root = tmp_path / "root"
    (root / "var/lib/trainvm/phases").mkdir(parents=True)
    for rel in ("etc/os-release", "proc/cpuinfo", "proc/meminfo"):
        if os.path.exists("/" + rel):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).symlink_to("/" + rel)
    (root / "var/lib/trainvm/expected.json").write_text(json.dumps(expected))
    return root


def cudnn_profile(cudnn: str) -> dict[str, Any]:
    return {"name": "p", "hardware": {"gpu": "T4", "gpu_count": 1},
            "stack": {"os": "ubuntu-22.04", "driver": "550.127.05", "cuda": "12.4", "cudnn": cudnn, "python": "3.11.9",
                      "packages": ["torch==2.4.1+cu124", "transformers==4.44.2"]}, "data": []}


def test_bundle_is_deterministic_and_holds_the_agent_and_packaging() -> None:
    files = bundle_files()
    assert files == bundle_files() and list(files) == sorted(files)
    assert {"provisioner/__init__.py", "provisioner/agent/__main__.py", "provisioner/agent/compare.py",
            "packaging/__init__.py", "packaging/version.py", "packaging/specifiers.py"} <= set(files)
    assert not [p for p in files if "__pycache__" in p or p.endswith(".pyc")]


def test_the_agent_imports_nothing_but_the_standard_library_and_packaging() -> None:
    for path in sorted((REPO / "provisioner/agent").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        outside = {n for n in names if n.split(".")[0] not in ("provisioner", "packaging", "__future__") and n.split(".")[0] not in sys.stdlib_module_names}
        assert not outside, (path.name, outside)
        assert not {n for n in names if n.startswith("provisioner.") and not n.startswith("provisioner.agent")}, path.name


def test_gpu_check_without_a_gpu_says_so_and_asks_for_a_reboot(bundle: Path, tmp_path: Path) -> None:
    root = machine_root(tmp_path, expectation(cudnn_profile("9.1.0")))
    done = agent(bundle, root, "gpu-check")
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith("nvidia-smi: nvidia-smi not found")


def test_missing_expectation_is_exit_2(bundle: Path, tmp_path: Path) -> None:
    done = agent(bundle, tmp_path, "stack-check")
    assert done.returncode == 2 and "expected.json is missing" in done.stderr


def test_the_vm_report_is_verify_locals_report_of_the_same_machine(bundle: Path, tmp_path: Path) -> None:
    exp = {**expectation(cudnn_profile("9.1.0")), "hash": "h", "data": [], "disk_path": "/"}
    root = machine_root(tmp_path, exp)
    done = agent(bundle, root, "report", "ready", "--python", SYSTEM_PYTHON)
    assert done.returncode == 0, done.stderr
    vm = json.loads(done.stdout)
    local = probe(python=SYSTEM_PYTHON, data_path="/", root=root)
    assert (vm["source"], local["source"]) == ("vm", "local")
    vm_only = {"source", "phases", "profile_hash", "error", "disk"}
    assert {k: v for k, v in vm.items() if k not in vm_only} == {k: v for k, v in local.items() if k not in vm_only}
    assert {**vm["disk"], "free_gib": None} == {**local["disk"], "free_gib": None}  # free space moves between two looks
    # no GPU here: both say so alike, and neither counts the driver as verified
    assert vm["gpus"] == local["gpus"] == [] and vm["driver"] is local["driver"] is None
    exp_doc = expectation(cudnn_profile("9.1.0"))
    vm_driver = next(f for f in agent_compare(exp_doc, vm).fields if f.field == "stack.driver")
    local_driver = next(f for f in agent_compare(exp_doc, local).fields if f.field == "stack.driver")
    assert not vm_driver.ok and not vm_driver.skipped  # a VM without a GPU: drift
    assert not local_driver.ok and local_driver.skipped  # a workstation without one: skipped, not verified


@pytest.mark.parametrize(("pin", "extra", "verdict", "observed"), [
    ("9.1.0.70", {}, False, "9.1.0"),  # torch's 90100 cannot prove a four-part pin
    ("9.1.0", {}, True, "9.1.0"),
    ("9.1.0.70", {"nvidia-cudnn-cu12": "9.1.0.70"}, True, "9.1.0.70"),  # the wheel torch loads proves it
    ("9.1.0.70", {"nvidia-cudnn-cu12": "9.3.0.75"}, False, "9.1.0"),  # a disagreeing library proves nothing
])
def test_cudnn_verdict_is_the_same_on_the_vm_and_in_verify(bundle: Path, tmp_path: Path, pin: str, extra: dict[str, str],
                                                         verdict: bool, observed: str) -> None:
    profile = cudnn_profile(pin)
    report = json.loads((FIXTURES / "report-vm-t4.json").read_text())
    report["packages"].update(extra)
    host = next(f for f in compare(profile, report).fields if f.field == "stack.cudnn")
    assert (host.ok, host.observed) == (verdict, observed)
    # the VM's gate: the same expectation, the same report, through the bundled agent alone
    root = machine_root(tmp_path, expectation(profile))
    script = ("import json, sys; from provisioner.agent.compare import judge; "
              "f = [f for f in judge(json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), ('stack',)) if f.field == 'stack.cudnn'][0]; "
              "print(json.dumps([f.ok, f.observed]))")
    (tmp_path / "report.json").write_text(json.dumps(report))
    done = subprocess.run([sys.executable, "-I", "-S", "-c", "import sys; sys.path[:0] = [sys.argv[1]]; exec(sys.argv[4])",
                           str(bundle), str(root / "var/lib/trainvm/expected.json"), str(tmp_path / "report.json"), script],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [verdict, observed]


def test_stack_probe_needs_only_the_standard_library(tmp_path: Path) -> None:
    """Inside a container image only pyenv/gpu run: copy just those (no packaging) and probe."""
    files = {k: v for k, v in bundle_files().items() if k in ("provisioner/__init__.py", "provisioner/agent/__init__.py",
                                                              "provisioner/agent/__main__.py", "provisioner/agent/pyenv.py",
                                                              "provisioner/agent/gpu.py")}
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    done = agent(tmp_path, tmp_path, "stack-probe")
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("TRAINVM_STACK="))
    payloads = json.loads(line[len("TRAINVM_STACK="):])
    assert payloads["env"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert payloads["executable"] == sys.executable  # the interpreter it ran in, probed in a subprocess of its own


def test_compute_capability_table_agrees_with_the_compat_facts() -> None:
    from provisioner.agent.gpu import COMPUTE_CAPABILITY
    from provisioner.compat.facts import load_facts
    from provisioner.probe.gpu import canonical_gpu_name, known_gpus

    facts = load_facts()
    for name, gpu in facts.gpus.items():
        if gpu.cc_str and gpu.vendor == "nvidia":
            assert COMPUTE_CAPABILITY.get(canonical_gpu_name(name.replace("-", " ")) if name.startswith("RTX") else name) == gpu.cc_str, name
    for name, spec in known_gpus().items():
        assert COMPUTE_CAPABILITY.get(name) == spec.compute_capability, name


def test_a_rehearsals_report_says_its_gpu_facts_were_not_checked(bundle: Path, tmp_path: Path) -> None:
    """Issue 38: ``report rehearsed`` (a machine without a GPU, CloudSpec.rehearsal): the GPU facts are null and named
    under ``not_checked``, never an empty GPU list or a false that reads as an observation; verify says rehearsed."""
    exp = {**expectation(cudnn_profile("9.1.0")), "hash": "h", "data": [], "disk_path": "/", "rehearsal": True}
    root = machine_root(tmp_path, exp)
    done = agent(bundle, root, "report", "rehearsed", "--python", SYSTEM_PYTHON)
    assert done.returncode == 0, done.stderr
    vm = json.loads(done.stdout)
    assert vm["status"] == "rehearsed" and vm["gpus"] is None and vm["driver"] is None and vm["cuda_driver_max"] is None
    assert {k: v for k, v in vm["not_checked"].items() if k != "framework.cuda_available"} == {
        "gpus": "rehearsal: no GPU", "driver": "rehearsal: no GPU", "cuda_driver_max": "rehearsal: no GPU"}
    assert ("framework.cuda_available" in vm["not_checked"]) == (vm["framework"] is not None)
    assert vm["python"] and vm["os"]  # the rest is this machine's, as in any report
    result = compare(cudnn_profile("9.1.0"), vm)
    assert result.status != "match" and all(f.not_checked for f in result.fields if f.field in ("stack.driver", "hardware.gpu"))
