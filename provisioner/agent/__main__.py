"""``python3 -m provisioner.agent COMMAND``: the VM's ready gate and report (paths under $TRAINVM_ROOT;
the expectation is /var/lib/trainvm/expected.json, written by the startup script).

  gpu-check                 the driver and GPUs against the expectation; exit 0 ok, 3 the kernel module
                            is not (yet) the installed driver or no GPU answers (a reboot may help),
                            4 a real mismatch
  stack-check [--python PY] the training interpreter (default: the VM's venv) against the expectation
                            (Python, pins, framework build and GPU access, CUDA, cuDNN, toolkit); exit 0/1.
                            Its probe is kept as stack.json for the report
  report STATUS [--python PY]  the report JSON (schema 1, source "vm") on stdout: the probe of this
                            machine (the same ``probe`` as ``trainvm verify --local``), with the phases,
                            data, the startup script's $TV_ERROR (redacted by the caller) and perf.json
  stack-probe               (inside a container image, standard library only) TRAINVM_STACK=<the probe of
                            this interpreter>
  container-check DIGESTS   (host) stack-probe's line on stdin, judged against the expectation's
                            container; kept as stack.json (with the image and its digest) for the report
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

# Standard library only, like this module: all that `stack-probe` has inside a container image (the bundle there
# holds __main__, pyenv and gpu; tests/agent checks it). compare and report are imported where they are used.
from provisioner.agent.gpu import probe_gpus
from provisioner.agent.pyenv import PythonEnv, probe_payloads, probe_python, python_env

ROOT = os.environ.get("TRAINVM_ROOT", "")
STATE = ROOT + "/var/lib/trainvm"
VENV_PYTHON = ROOT + "/opt/trainvm/venv/bin/python"


def load(name: str) -> Any:
    try:
        with open(os.path.join(STATE, name), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def save(name: str, data: Any) -> None:
    path = os.path.join(STATE, name)
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(data, fh, sort_keys=True)
    os.replace(path + ".tmp", path)


def _root() -> Path:
    return Path(ROOT or "/")


def _option(argv: List[str], name: str, default: Optional[str]) -> Optional[str]:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else default


def _say(fields: List[Any], report: Dict[str, Any]) -> List[str]:
    """A MISMATCH line for each drifted field (what the startup script prints and fails with)."""
    from provisioner.agent.compare import show  # lazy: stack-probe has only stdlib

    fw = report.get("framework") or {}
    out = []
    for f in fields:
        if not f.drifted:
            continue
        if f.field in ("stack.framework.gpu", "stack.container.gpu"):
            where = " inside the container" if f.field == "stack.container.gpu" else ""
            out.append("MISMATCH %s: %s %s sees no GPU%s (cuda available: false)" % (f.field, fw.get("name"), fw.get("version"), where))
        else:
            out.append("MISMATCH %s: expected %s, found %s" % (f.field, show(f.expected), show(f.observed)))
    return out


def machine(exp: Dict[str, Any], env: Any = None, status: str = "ready") -> Dict[str, Any]:
    """This machine as a report (the one probe), with ``env`` (a PythonEnv) as its Python stack."""
    from provisioner.agent.report import probe  # lazy: stack-probe has only stdlib

    return probe(data_path=exp.get("disk_path") or "/", data_dests=[d["dest"] for d in exp.get("data") or []],
                 root=_root(), env=env if env is not None else PythonEnv(None), source="vm", status=status)


def gpu_check(exp: Dict[str, Any]) -> int:
    from provisioner.agent.compare import judge  # lazy: stack-probe has only stdlib

    gpu = probe_gpus(root=ROOT)
    want = (exp.get("stack") or {}).get("driver")
    if not gpu.gpus:
        print("nvidia-smi: %s" % ("; ".join(gpu.notes) or "no GPU listed"))
        return 3
    if gpu.kernel_module and gpu.kernel_module != gpu.driver:
        print("kernel module %s, libraries %s (NVML mismatch)" % (gpu.kernel_module, gpu.driver))
        return 3 if gpu.driver == want else 4
    doc = {"source": "vm", "gpus": [g.as_report() for g in gpu.gpus], "driver": gpu.driver}
    problems = _say(judge(exp, doc, ("gpu",)), doc)
    if gpu.kernel_module is None:
        problems.append("MISMATCH /proc/driver/nvidia/version is missing (no NVIDIA kernel module loaded)")
    for line in problems:
        print(line)
    if not problems:
        print("driver %s, %d x %s, CUDA <= %s" % (gpu.driver, len(gpu.gpus), gpu.gpus[0].name, gpu.cuda_driver_max))
    return 4 if problems else 0


def stack_check(exp: Dict[str, Any], python: str) -> int:
    from provisioner.agent.compare import judge  # lazy: stack-probe has only stdlib

    payloads = probe_payloads(python)
    save("stack.json", payloads)
    env = python_env(payloads)
    report = machine(exp, env)
    problems = _say(judge(exp, report, ("stack",)), report)
    for note in env.notes:
        print("note: %s" % note)
    for line in problems:
        print(line)
    if not problems:
        fw = report.get("framework")
        print("python %s, %d packages%s" % (env.python, len(env.distributions), ", %s %s" % (fw["name"], fw["version"]) if fw else ""))
    return 1 if problems else 0


def stack_probe() -> int:

    print("TRAINVM_STACK=" + json.dumps(probe_payloads(sys.executable), sort_keys=True))
    return 0


def container_check(exp: Dict[str, Any], digests: str) -> int:
    from provisioner.agent.compare import judge  # lazy: stack-probe has only stdlib

    text = sys.stdin.read().strip()
    try:
        payloads = json.loads(text.split("TRAINVM_STACK=", 1)[-1]) if text else None
    except ValueError:
        payloads = None
    if not isinstance(payloads, dict):
        print("MISMATCH the check run printed no stack probe (does the image have python3?)")
        return 1
    want = (exp.get("stack") or {}).get("container") or {}
    digest = want.get("digest")
    pulled = digest if digest and any(d.endswith("@" + digest) for d in digests.split()) else None
    payloads["container"] = {"image": want.get("image"), "digest": pulled, "repo_digests": digests.split()}
    save("stack.json", payloads)
    env = python_env(payloads)
    report = dict(machine(exp, env), container=payloads["container"])
    problems = _say(judge(exp, report, ("container",)), report)
    if not env.framework:
        problems.insert(0, "MISMATCH no CUDA framework (torch, tensorflow, jax) imports in the image%s"
                        % (": " + "; ".join(env.notes) if env.notes else ""))
    for line in problems:
        print(line)
    if not problems:
        fw = report["framework"]
        print("container %s: %s %s, CUDA %s, cuDNN %s" % (want.get("image"), fw["name"], fw["version"], fw["cuda"], report["cudnn"]))
    return 1 if problems else 0


def report(exp: Dict[str, Any], status: str, python: str) -> int:

    kept = load("stack.json")
    if isinstance(kept, dict):
        env = python_env(kept)
    elif os.path.exists(python):
        env = probe_python(python)
    else:
        env = None
    doc = machine(exp, env, status)
    phases = {}
    folder = os.path.join(STATE, "phases")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as fh:
            f = fh.read().split()
        if len(f) == 2:
            phases[name] = {"status": f[0], "seconds": float(f[1])}
    doc.update(phases=phases, profile_hash=exp.get("hash"), error=os.environ.get("TV_ERROR") or None)
    if isinstance(kept, dict) and kept.get("container"):
        doc["container"] = kept["container"]
    perf = load("perf.json")
    if perf:
        doc["perf"] = perf
    json.dump(doc, sys.stdout, sort_keys=True)
    print()
    return 0


USAGE = "usage: python3 -m provisioner.agent gpu-check | stack-check [--python PY] | report STATUS [--python PY] | stack-probe | container-check DIGESTS"


def main(argv: List[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "stack-probe":
        return stack_probe()
    exp = load("expected.json")
    if exp is None:
        print("trainvm agent: %s/expected.json is missing" % STATE, file=sys.stderr)
        return 2
    python = _option(argv, "--python", VENV_PYTHON) or VENV_PYTHON
    if cmd == "gpu-check":
        return gpu_check(exp)
    if cmd == "stack-check":
        return stack_check(exp, python)
    if cmd == "report" and len(argv) > 2:
        return report(exp, argv[2], python)
    if cmd == "container-check":
        return container_check(exp, argv[2] if len(argv) > 2 else "")
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
