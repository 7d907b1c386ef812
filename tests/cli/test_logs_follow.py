"""issue 30: `logs --follow` printed nothing for 25 s and had no timeout. Against the GCE emulator (its serial
console grows by one chunk per read, ``play_serial``: a real console grows with time, not with reads), with
TRAINVM_LOGS_POLL_SECONDS=0: it says at once what it waits for (stderr), prints the console as it comes (stdout),
and ends with ready (exit 0), failed (exit 1) or --timeout (exit 5, naming the phase)."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, gce_cli_env

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
NAME = "logs-vm"


@pytest.fixture
def gce(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINVM_LOGS_POLL_SECONDS", "0")
    yield from gce_cli_env(monkeypatch, tmp_path)


def chunks(*statuses: str) -> list[str]:
    return [f"startup-script: step {i}\nTRAINVM_STATUS={s}\n" for i, s in enumerate(statuses)]


def up(cli) -> None:
    r = cli("up", T4, "--yes", "--name", NAME, "--cloud", "gcp", "--json")
    assert r.code == 0, r.err


def test_follow_says_what_it_waits_for_prints_each_chunk_and_ends_at_ready(cli, gce) -> None:
    up(cli)
    gce.play_serial(NAME, chunks("running:preflight", "running:driver", "running:packages", "ready"))
    r = cli("logs", NAME, "--follow")
    assert r.code == 0, r.err
    first = r.err.splitlines()[0]
    assert first.startswith(f"waiting for the console of {NAME} (gcp us-") and "at most 1800 s (--timeout)" in first
    steps = [r.out.index(f"TRAINVM_STATUS={s}") for s in ("running:preflight", "running:driver", "running:packages", "ready")]
    assert steps == sorted(steps)
    assert f"{NAME}: startup script ready" in r.err


def test_follow_stops_at_the_timeout_naming_the_phase(cli, gce) -> None:
    up(cli)
    gce.play_serial(NAME, chunks("running:preflight", "running:packages"))  # then the VM writes nothing more
    r = cli("logs", NAME, "--follow", "--timeout", "0.3")
    assert r.code == 5, (r.out, r.err)
    assert "TRAINVM_STATUS=running:packages" in r.out
    assert f"(--timeout 0.3): {NAME} has not reported ready or failed, in phase packages" in r.err
    assert f"`trainvm logs {NAME} --follow` goes on" in r.err


def test_follow_timeout_before_any_console(cli, gce) -> None:
    up(cli)
    r = cli("logs", NAME, "--follow", "--timeout", "0", "--json")
    assert r.code == 5 and r.err == ""  # --json: nothing but the document
    doc = r.json()
    assert doc["timed_out"] is True and doc["status"] is None


def test_follow_ends_at_failed_with_exit_1(cli, gce) -> None:
    up(cli)
    gce.play_serial(NAME, chunks("running:preflight", "running:driver", "failed:driver:57"))
    r = cli("logs", NAME, "--follow")
    assert r.code == 1, (r.out, r.err)
    assert f"{NAME}: startup script failed:driver:57 (phase driver)" in r.err
    assert cli("logs", NAME).code == 0  # without --follow: the log was read, exit 0 as before
