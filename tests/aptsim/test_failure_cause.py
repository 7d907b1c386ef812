"""A failed download carries its cause into report.json and ``trainvm verify``, and a cause that cannot heal is
not retried (issue #30, "On the VM").

Real tools, unprivileged: the rendered debian-12 script's own ``tv_apt``/``tv_retry``/``tv_fail``/``tv_report`` and
the agent (the payload's bundle) run against

- real ``apt-get update`` on the fake NVIDIA repository (fakerepo.py) whose ``Packages`` was changed after its
  ``Release`` listed its hash (a tampered mirror: "Hash Sum mismatch"), and on a source nobody listens on
  (127.0.0.1:1, "Connection refused");
- real ``uv pip install --require-hashes`` against a PEP 503 index on 127.0.0.1 (tests/lock/wheelhouse.py) that
  serves a wheel whose sha256 is not the lock's ("Hash mismatch").

The report the script prints is then what ``trainvm verify NAME`` reads (a fake provider hands it over, as in
tests/cli/test_verify_states.py). Stubbed: the cloud channel (``tv_publish``) and nothing else on the failure
path. Not modelled: a signed InRelease (the fake repository is ``trusted=yes``; a signature failure's message is
apt's ``NO_PUBKEY``/``BADSIG``, classified by the same table, not exercised here).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.agent.bundle import bundle_files
from tests.helpers import load_by_path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


fakerepo = load_by_path("trainvm_fakerepo", HERE / "fakerepo.py")
support = load_by_path("trainvm_render_support", REPO / "tests/render/support.py")
wheelhouse = load_by_path("trainvm_wheelhouse", REPO / "tests/lock/wheelhouse.py")

PROGRAM = r"""
TV_PHASE=driver
mkdir -p "$TV_STATE/lib" "$TV_STATE/phases" "$TV_LOGDIR"
tv_write_helper
printf '%s\n' "$TV_EXPECTED" >"$TV_STATE/expected.json"
tv_publish() { :; }
trap 'tv_fail "$TV_PHASE" "$LINENO" "command failed (exit $?): $BASH_COMMAND"' ERR
TV_PHASE=$1
shift
tv_retry "$@"
echo TRAINVM_UNREACHED
"""


@pytest.fixture
def world(tmp_path):
    if shutil.which("apt-get") is None:
        if os.environ.get("TRAINVM_NO_APT") == "1":
            pytest.skip("TRAINVM_NO_APT=1: apt-get is not on this machine")
        pytest.fail("apt-get is not installed (see tests/aptsim/test_driver_resolution.py)")
    w = fakerepo.AptWorld(tmp_path / "apt", ["550.127.05"])
    # apt's own back-off between its retries (Acquire::Retries) would make the refused case slow, not different
    with open(w.tmp / "apt.conf", "a") as fh:
        fh.write('Acquire::Retries::Delay "false";\n')
    return w


def _script(tmp_path: Path) -> Path:
    lp = support.from_dict(support.minimal_profile(os="debian-12", driver="550.127.05"))
    body, last = support.render(lp, "gcp").startup_sh.rstrip("\n").rsplit("\n", 1)
    assert last.startswith("tv_main"), last
    path = tmp_path / "retry.sh"
    path.write_text(body + "\n" + PROGRAM)
    return path


def _run(tmp_path: Path, env: dict[str, str], phase: str, *cmd: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    root = Path(env["TRAINVM_ROOT"])
    for rel, data in bundle_files().items():  # the payload's agent, where tv_agent runs it
        (root / "opt/trainvm/current/agent" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "opt/trainvm/current/agent" / rel).write_bytes(data)
    (root / "etc").mkdir(parents=True, exist_ok=True)
    if not (root / "etc/os-release").exists():
        (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    proc = subprocess.run(["bash", str(_script(tmp_path)), phase, *cmd], env={**env, "TRAINVM_RETRY_SLEEP": "0"},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, cwd=tmp_path)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("TRAINVM_REPORT=")]
    assert proc.returncode == 1 and "TRAINVM_UNREACHED" not in proc.stdout and lines, proc.stdout[-4000:]
    report = json.loads(base64.b64decode(lines[-1].split("=", 1)[1]))
    assert report == json.loads((root / "var/lib/trainvm/report.json").read_text())
    return proc, report


def _attempts(output: str) -> int:
    return len(re.findall(r"trainvm \S+: attempt \d+ (?:of 3 )?failed", output))


def _verify(cli, monkeypatch, install_providers, report: dict) -> tuple[int, dict, str]:
    from tests.fakes import FakeProvider

    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    fakes = {"gcp": FakeProvider("gcp"), "azure": FakeProvider("azure")}
    install_providers(fakes)
    name = cli("up", str(REPO / "profiles/examples/bert-finetune-t4.yaml"), "--yes", "--json").json()["name"]
    fakes["gcp"].reports[name] = report
    text = cli("verify", name)
    r = cli("verify", name, "--json")
    return r.code, r.json(), text.out


def _apt_env(world) -> dict[str, str]:
    return {**world.env, "TRAINVM_ROOT": str(world.root), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def test_tampered_repository_fails_at_once_with_its_cause_in_the_report_and_verify(world, tmp_path, cli, monkeypatch, install_providers):
    packages = world.tmp / "repo/nvidia/Packages"
    shutil.rmtree(world.tmp / "state/lists")
    (world.tmp / "state/lists/partial").mkdir(parents=True)
    packages.write_bytes(packages.read_bytes().replace(b"Package: cuda-keyring", b"Package: cuda-keyrinq"))
    proc, report = _run(tmp_path, _apt_env(world), "driver", "env", "DEBIAN_FRONTEND=noninteractive",
                        "apt-get", "-y", "-q", "-o", "Acquire::Retries=5", "update")
    assert _attempts(proc.stdout) == 1, proc.stdout[-3000:]  # not retried: the same bytes would come again
    assert re.fullmatch(r"failed:driver:\d+", report["status"])
    error = report["error"]
    assert "not retried (a hash mismatch does not heal by retrying)" in error and "apt-get" in error
    cause = error.split("; cause: ", 1)[1]
    assert cause.startswith("E: Failed to fetch file:") and cause.endswith("Hash Sum mismatch"), error
    code, doc, text = _verify(cli, monkeypatch, install_providers, report)
    assert code == 1 and (doc["status"], doc["phase"]) == ("failed", "driver") and "Hash Sum mismatch" in doc["message"]
    assert "cause: E: Failed to fetch" in text and "Hash Sum mismatch" in text


def test_refused_connection_is_retried_and_named(world, tmp_path):
    (world.tmp / "etc/sources.list").write_text("deb [trusted=yes] http://127.0.0.1:1/nvidia ./\n")
    shutil.rmtree(world.tmp / "state/lists")
    (world.tmp / "state/lists/partial").mkdir(parents=True)
    proc, report = _run(tmp_path, _apt_env(world), "driver", "apt-get", "-q", "-o", "Acquire::Retries=0",
                        "-o", "APT::Update::Error-Mode=any", "update")
    assert _attempts(proc.stdout) == 3, proc.stdout[-3000:]
    assert report["error"].startswith("failed 3 times: apt-get")
    assert "Connection refused" in report["error"].split("; cause: ", 1)[1], report["error"]


def test_uv_hash_mismatch_with_the_lock_is_not_retried(tmp_path):
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.fail("uv is not installed (it is a dev extra: make install-dev)")
    index = wheelhouse.make_index(tmp_path / "index", [("tinypkg", "1.0", (), "py3-none-any")])
    wheel = next((index / "files").iterdir())
    locked = hashlib.sha256(wheel.read_bytes()).hexdigest()
    # the index now serves other (valid) bytes under the same name: the lock's hash no longer matches
    other = wheelhouse.build_wheel(tmp_path, "tinypkg", "1.0", ("six; python_version < '3'",))
    shutil.copy(other, wheel)
    wheelhouse.write_simple_index(index / "files", index)
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"tinypkg==1.0 --hash=sha256:{locked}\n")
    root = tmp_path / "root"
    subprocess.run([uv, "venv", "-q", str(tmp_path / "venv")], check=True, env={**os.environ, "UV_NO_CONFIG": "1"})
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TRAINVM_ROOT": str(root),
           "UV_CACHE_DIR": str(tmp_path / "uvcache")}
    with wheelhouse.serve(index) as url:
        proc, report = _run(tmp_path, env, "packages", uv, "pip", "install", "--python", str(tmp_path / "venv/bin/python"),
                            "--index-url", url + "/simple", "--require-hashes", "-r", str(lock))
    assert _attempts(proc.stdout) == 1, proc.stdout[-3000:]
    assert re.fullmatch(r"failed:packages:\d+", report["status"])
    cause = report["error"].split("; cause: ", 1)[1]
    assert "Hash mismatch for `tinypkg==1.0`" in cause and len(cause) <= 200, report["error"]
