"""One error contract for every command (docs/spec.md "Errors and exit codes"): the exit code, one
paragraph on stderr, and with --json exactly one {"error": {...}} document on stdout; --debug before
or after the command; --version."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


ERRORS = [  # (argv, exit code, text in the message)
    (["plan", "missing.yaml"], 2, "missing.yaml"),
    (["render", "missing.yaml", "--cloud", "gcp"], 2, "missing.yaml"),
    (["up", "missing.yaml", "--yes"], 2, "missing.yaml"),
    (["up", T4, "--name", "Bad_Name", "--yes"], 2, "--name"),
    (["up", T4], 2, "--yes"),  # stdin is not a terminal: no silent creation
    (["plan", T4, "--cloud", "moon"], 2, "unknown cloud"),
    (["catalog", "show", "--cloud", "moon"], 2, "unknown cloud"),
    (["status", "no-such-vm"], 4, "no trainvm VM named no-such-vm"),
    (["verify", "no-such-vm"], 4, "no trainvm VM named no-such-vm"),
    (["logs", "no-such-vm"], 4, "no trainvm VM named no-such-vm"),
    (["stop", "no-such-vm", "--yes"], 4, "no trainvm VM named no-such-vm"),
    (["start", "no-such-vm"], 4, "no trainvm VM named no-such-vm"),
    (["validate", "missing.yaml"], 2, "missing.yaml"),
    (["lock", "missing.yaml"], 2, "missing.yaml"),
    (["parity", "missing-a.json", "missing-b.json"], 2, "missing-a.json"),
    (["down", "a/b", "--yes"], 2, "not a trainvm VM name"),
    (["status", "a/b"], 2, "not a trainvm VM name"),  # a bad name never reaches a cloud API
    (["verify", "Bad_Name"], 2, "not a trainvm VM name"),
    (["logs", "x" * 10_000], 2, "not a trainvm VM name"),
    (["stop", "../x", "--yes"], 2, "not a trainvm VM name"),
    (["stop", "x", "--cloud", "moon", "--yes"], 2, "unknown cloud"),
    (["verify", "missing.yaml", "--local"], 2, "missing.yaml"),
    (["diff", "missing-a.yaml", "missing-b.yaml"], 2, "missing-a.yaml"),
    (["capture", "--python", "/no/such/python"], 2, "--python"),
    (["plan"], 2, "Missing argument"),  # a usage error
    (["frobnicate"], 2, "No such command"),
]


@pytest.mark.parametrize(("argv", "code", "text"), ERRORS, ids=[" ".join(a[:2])[:40] for a, _, _ in ERRORS])
def test_every_command_error_is_one_json_document_and_a_paragraph(cli, clouds, argv, code, text) -> None:
    r = cli(*argv, "--json")
    assert r.code == code, r.err
    doc = json.loads(r.out)  # exactly one document: json.loads refuses trailing data
    assert set(doc) == {"error"}
    err = doc["error"]
    assert err["exit_code"] == code and text in err["message"] and "hint" in err and err["type"]
    assert text in r.err and "Traceback" not in r.err
    plain = cli(*argv)
    assert plain.code == code and plain.out == "" and text in plain.err


def test_profile_errors_carry_every_located_message(cli, write_yaml) -> None:
    p = write_yaml("name: x\nhardware: {gpu: T4}\nstack: {python: 3.11}\nbogus: 1\n")
    doc = cli("up", str(p), "--yes", "--json").json()["error"]
    assert doc["exit_code"] == 1 and any(m["path"] == "bogus" and m["line"] == 4 for m in doc["messages"])


def test_debug_is_accepted_before_or_after_the_command(cli) -> None:
    before, after = cli("--debug", "plan", "missing.yaml"), cli("plan", "missing.yaml", "--debug")
    assert before.code == after.code == 2
    assert "Traceback" in before.err and "Traceback" in after.err


def test_arguments_after_double_dash_are_not_global_flags(cli, clouds) -> None:
    r = cli("ssh", "no-such-vm", "--", "ls", "--debug", "--json")
    assert r.code == 4 and r.out == "" and "Traceback" not in r.err  # --json after -- is the remote command's


def test_version(cli) -> None:
    from provisioner import __version__

    for argv in (["--version"], ["plan", "--version"]):
        r = cli(*argv)
        assert r.code == 0 and r.out == f"trainvm {__version__}\n"


def test_an_internal_error_is_exit_70_with_a_json_document(cli, monkeypatch) -> None:
    monkeypatch.setattr("provisioner.commands.validate.run_validate", lambda *a: 1 / 0)
    r = cli("validate", T4, "--json")
    assert r.code == 70 and r.json()["error"]["type"] == "internal" and "ZeroDivisionError" in r.err


def test_shell_completion_script_is_generated() -> None:
    out = subprocess.run([sys.executable, "-m", "provisioner"], capture_output=True, text=True, timeout=60,
                         env={"_TRAINVM_COMPLETE": "source_bash", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and "_TRAINVM_COMPLETE" in out.stdout and "complete" in out.stdout
