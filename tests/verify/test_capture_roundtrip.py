"""`capture` probes the user's environment ($VIRTUAL_ENV, then $CONDA_PREFIX, then python3 on PATH;
never trainvm's own interpreter silently), and a machine matches its own capture: `capture` then
`verify --local` on this machine (no GPU here) exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.errors import InputError
from provisioner.probe.python_env import user_python


def _venv(root: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    return root


def test_the_user_environment_is_chosen_in_order(tmp_path: Path) -> None:
    venv, conda, bindir = tmp_path / "venv", tmp_path / "conda", tmp_path / "bin"
    for d in (venv / "bin", conda / "bin", bindir):
        d.mkdir(parents=True)
    (bindir / "python3").write_text("#!/bin/sh\n")
    (bindir / "python3").chmod(0o755)
    env = {"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": str(conda), "PATH": str(bindir)}
    assert user_python(None, env, own_prefix="/elsewhere") == (str(venv / "bin" / "python"), f"$VIRTUAL_ENV={venv}")
    del env["VIRTUAL_ENV"]
    assert user_python(None, env, own_prefix="/elsewhere")[0] == str(conda / "bin" / "python")
    del env["CONDA_PREFIX"]
    assert user_python(None, env, own_prefix="/elsewhere") == (str(bindir / "python3"), "python3 on PATH")
    assert user_python(sys.executable, env)[1] == "--python"  # explicit wins, even trainvm's own


def test_trainvm_own_interpreter_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="trainvm's own") as exc:
        user_python(None, {"VIRTUAL_ENV": sys.prefix, "PATH": ""})
    assert "--python" in (exc.value.hint or "")
    with pytest.raises(InputError, match="no Python environment found"):
        user_python(None, {"PATH": str(tmp_path)})


def test_capture_refuses_trainvm_own_environment(cli, monkeypatch) -> None:
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    r = cli("capture")
    assert r.code == 2 and "trainvm's own" in r.err and "--python" in r.err


def test_capture_then_verify_local_on_this_machine_matches(cli, monkeypatch, tmp_path: Path) -> None:
    venv = _venv(tmp_path / "train-env")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.setenv("TRAINVM_CAPTURE_LOCK", "0")
    out = tmp_path / "ws.yaml"
    cap = cli("capture", "-o", str(out), "--name", "ws")
    assert cap.code == 0, cap.err
    assert f"capturing the Python environment of {venv / 'bin' / 'python'}" in cap.err
    ver = cli("verify", "--local", str(out), "--json")
    assert ver.code == 0, [f for f in ver.json()["fields"] if not f["ok"]]
    doc = ver.json()
    assert doc["status"] == "match"
    python = next(f for f in doc["fields"] if f["field"] == "stack.python")
    assert python["ok"] and python["observed"] == python["expected"]
    if not os.path.exists("/dev/nvidia0"):  # GPU-less: the driver and GPU count are skipped, visibly
        skipped = {f["field"] for f in doc["fields"] if f.get("skipped")}
        assert skipped == {"stack.driver", "hardware.gpu_count"}
