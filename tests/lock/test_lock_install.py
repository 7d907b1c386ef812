"""What a lock does downstream: the VM installs it with --require-hashes (real uv, offline, against
the local index), the startup script embeds it, the stored profile and verify cover the closure,
and `capture -o` writes one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.lock.model import read_lock
from provisioner.lock.resolve import uv_bin


def _venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([uv_bin(), "venv", "-q", "--no-python-downloads", "-p", sys.executable, str(venv)], check=True, timeout=120)
    return venv


def _install(venv: Path, req: Path) -> subprocess.CompletedProcess[str]:
    # the index URLs lead nowhere: every wheel comes from the URL the lock names, checked against its hash
    argv = [uv_bin(), "pip", "install", "--python", str(venv / "bin/python"), "--only-binary", ":all:", "--no-config",
            "--index-url", "http://127.0.0.1:9/simple", "--require-hashes", "-r", str(req)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def locked(write_yaml, lock_cli, profile_doc) -> Path:
    path = write_yaml(profile_doc(["torch==2.4.1+cu124", "alpha==1.0"]))
    assert lock_cli(path).code == 0
    return path


def test_the_lock_installs_with_require_hashes(locked: Path, tmp_path: Path) -> None:
    lock = read_lock(locked.with_suffix(".lock"))
    req = tmp_path / "requirements.lock"
    req.write_text(lock.requirements_text())
    venv = _venv(tmp_path)
    done = _install(venv, req)
    assert done.returncode == 0, done.stderr
    listing = subprocess.run([uv_bin(), "pip", "list", "--format", "json", "--python", str(venv / "bin/python")], capture_output=True, text=True, check=True, timeout=60)
    installed = {d["name"]: d["version"] for d in json.loads(listing.stdout)}
    assert installed == lock.versions()


def test_a_tampered_hash_is_refused_at_install(locked: Path, tmp_path: Path) -> None:
    lock = read_lock(locked.with_suffix(".lock"))
    beta = next(p for p in lock.packages if p.name == "beta")
    req = tmp_path / "requirements.lock"
    req.write_text(lock.requirements_text().replace(beta.sha256, "f" * 64))
    done = _install(_venv(tmp_path), req)
    assert done.returncode != 0 and "hash" in done.stderr.lower()


def test_the_startup_script_embeds_the_lock_and_checks_the_closure(locked: Path) -> None:
    import hashlib
    import shlex

    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    loaded = load_profile(locked)
    script = render_script(loaded, RenderTarget("gcp", "n1-standard-8", "T4", 1, "us-central1", "us-central1-a")).startup_sh
    text = loaded.lock.requirements_text()
    assert f"TV_LOCK_SHA256={shlex.quote(hashlib.sha256(text.encode()).hexdigest())}" in script or f"TV_LOCK_SHA256='{hashlib.sha256(text.encode()).hexdigest()}'" in script
    assert f"TV_LOCK={shlex.quote(text)}" in script
    assert '["beta","1.2"]' in script  # the VM's stack check expects every locked package (expected.json "lock")


def test_a_stale_lock_is_not_rendered(locked: Path, write_yaml, profile_doc) -> None:
    from provisioner.errors import RenderError
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    write_yaml(profile_doc(["torch==2.4.1+cu124", "alpha==1.0", "multi==1.0"]))
    loaded = load_profile(locked)
    assert loaded.lock_state == "stale"
    with pytest.raises(RenderError, match="stale"):
        render_script(loaded, RenderTarget("gcp", "n1-standard-8", "T4", 1, "us-central1", "us-central1-a"))


def test_verify_judges_every_locked_package(locked: Path) -> None:
    from provisioner.profile import load_profile
    from provisioner.provision.launch import resolved_profile_json
    from provisioner.verify.compare import compare

    stored = json.loads(resolved_profile_json(load_profile(locked)))
    assert stored["lock"]["packages"]["beta"] == "1.2"
    report = {"status": "ready", "python": "3.11.9", "driver": "550.127.05", "os": {"id": "ubuntu", "version": "22.04"},
              "packages": {"torch": "2.4.1+cu124", "alpha": "1.0", "beta": "1.2", "nvidia-cublas-cu12": "12.4.5.8"},
              "framework": {"name": "torch", "version": "2.4.1+cu124", "cuda": "12.4", "cuda_available": True},
              "gpus": [{"name": "Tesla T4", "memory_mib": 15360}]}
    ok = compare(stored, report)
    assert ok.status == "match", [f.field for f in ok.drifted]
    report["packages"]["beta"] = "1.0"  # a transitive dependency drifted: the top-level pins alone would not see it
    drift = compare(stored, report)
    assert drift.status == "drift" and [f.field for f in drift.drifted] == ["lock.packages.beta"]


def test_capture_writes_a_lock(tmp_path: Path, write_yaml, profile_doc, indexes, monkeypatch) -> None:
    from provisioner.commands.lock import lock_captured
    from provisioner.output import stderr_console

    monkeypatch.setenv("TRAINVM_CAPTURE_LOCK", "1")
    monkeypatch.setenv("TRAINVM_INDEX_URL", indexes.pypi)
    path = write_yaml(profile_doc(["alpha==1.0", "beta==1.2"]), name="ws.yaml")
    lock_captured(path, stderr_console())
    assert read_lock(path.with_suffix(".lock")).versions() == {"alpha": "1.0", "beta": "1.2"}
    bad = write_yaml(profile_doc(["promise==2.3"]), name="bad.yaml")
    lock_captured(bad, stderr_console())  # a warning, not an error: the profile stays useful
    assert not bad.with_suffix(".lock").exists()
