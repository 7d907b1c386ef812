"""Ctrl-C and SIGTERM (issue 36 item 12): exit 130 with one `aborted` line, which for `up` says what exists and
what it costs; never silent (typer turns a KeyboardInterrupt into a bare exit 130), never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


def _interrupt(*_: object, **__: object) -> None:
    raise KeyboardInterrupt  # what SIGINT (and, through console.entry, SIGTERM) raises in the main thread


def test_ctrl_c_during_wait_ready_says_the_vm_exists_and_what_it_bills(cli, clouds, monkeypatch) -> None:
    monkeypatch.setattr(clouds["gcp"], "console", _interrupt)
    r = cli("up", T4, "--yes", "--wait-ready")
    assert r.code == 130, r.err
    [name] = clouds["gcp"].vms
    last = r.err.strip().splitlines()[-1]
    assert last.startswith(f"aborted: {name} exists on gcp us-central1-a and bills $0.751/h")
    assert f"trainvm down {name} --yes" in last and "Traceback" not in r.err
    doc = cli("up", T4, "--yes", "--wait-ready", "--json")  # the same VM, found: the same line, in the error document
    assert doc.code == 130 and doc.json()["error"]["message"].startswith(f"aborted: {name} exists on gcp")
    assert doc.json()["error"]["exit_code"] == 130


def test_ctrl_c_during_the_create_says_what_may_exist(cli, clouds, monkeypatch) -> None:
    monkeypatch.setattr(clouds["gcp"], "create", _interrupt)
    r = cli("up", T4, "--yes")
    assert r.code == 130
    last = r.err.strip().splitlines()[-1]
    assert last.startswith("aborted while creating trainvm-bert-finetune-") and "n1-standard-8, $0.73/h compute" in last
    assert "may exist and bill" in last and "--yes" in last


def test_ctrl_c_in_another_command_is_aborted_not_silent(cli, clouds, monkeypatch) -> None:
    name = cli("up", T4, "--yes", "--json").json()["name"]
    monkeypatch.setattr(clouds["gcp"], "console", _interrupt)
    r = cli("logs", name, "--follow")
    assert r.code == 130 and r.err.strip().splitlines()[-1] == "aborted"


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_sigterm_before_anything_is_created_is_one_aborted_line(tmp_path: Path, json_out: bool) -> None:
    """SIGTERM lands while the command line is importing (a `typer` first on the path sends it to its own
    process when imported): one line and exit 130, where it used to kill the process without a word."""
    fake = tmp_path / "fake"
    (fake / "typer").mkdir(parents=True)
    (fake / "typer" / "__init__.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\n"
                                               "time.sleep(5)\n")
    env = {**os.environ, "PYTHONPATH": str(fake)}
    r = subprocess.run([sys.executable, "-m", "provisioner", "up", T4, "--yes", *(["--json"] if json_out else [])],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert r.stderr == "aborted\n"
