"""``up --wait-ready`` and ``logs`` against the GCE emulator, with the console a real startup script
writes: the rendered script runs under the stub harness, and the emulator plays its output back a few
lines per read (google_metadata_script_runner prefixes included), as a VM's serial port grows."""

from __future__ import annotations

import dataclasses
import re

import pytest
import trainvm_render_support as S

from provisioner.render import render_script
from tests.helpers import gce_cli_env

T4 = str(S.REPO / "profiles/examples/bert-finetune-t4.yaml")
PREFIX = "Nov 24 02:00:00 wait-vm google_metadata_script_runner[812]: startup-script: "


@pytest.fixture
def gce_env(monkeypatch, tmp_path):
    yield from gce_cli_env(monkeypatch, tmp_path)


def _console(make_harness, rehearsal: bool = False, **knobs) -> list[str]:
    lp = S.loaded(S.GOLDEN_PROFILE)
    target = dataclasses.replace(S.target_for("gcp", lp), rehearsal=rehearsal)  # no cloud rehearses on this branch
    run = make_harness(render_script(lp, target).startup_sh, **knobs).run()
    lines = [PREFIX + ln + "\n" for ln in run.output.splitlines()]
    return ["".join(lines[i:i + 4]) for i in range(0, len(lines), 4)]


def test_up_wait_ready_shows_each_phase_then_verifies(cli, gce_env, make_harness) -> None:
    gce_env.play_serial("wait-vm", _console(make_harness))
    r = cli("up", T4, "--yes", "--name", "wait-vm", "--cloud", "gcp", "--wait-ready")
    assert r.code == 0, r.err[-3000:]
    for phase in ("preflight", "driver", "cuda", "python", "packages", "env", "data"):
        assert re.search(rf"^phase {phase} \.\.\.$", r.err, re.M), r.err
        assert re.search(rf"^phase {phase}: (done|verified|skipped) \(\d+s\)$", r.err, re.M), r.err
    assert "startup script: ready" in r.err
    assert r.out.rstrip().endswith("wait-vm: match")
    # the order the phases arrived in is the script's order
    starts = re.findall(r"^phase (\w+) \.\.\.$", r.err, re.M)
    assert starts[:4] == ["watchdog", "preflight", "driver", "cuda"]  # the watchdog first: a failed VM stops when idle


def test_up_wait_ready_failed_phase_says_where(cli, gce_env, make_harness) -> None:
    gce_env.play_serial("wait-vm", _console(make_harness, STUB_LOADED_DRIVER="550.90.07"))
    r = cli("up", T4, "--yes", "--name", "wait-vm", "--cloud", "gcp", "--wait-ready", "--json")
    assert r.code == 1 and r.err == ""  # --json: nothing but the document
    doc = r.json()
    assert doc["status"] == "failed" and doc["verify"]["phase"] == "driver" and doc["verify"]["line"]
    assert "expected driver 550.127.05" in doc["verify"]["message"]


def test_up_wait_ready_timeout_names_the_phase(cli, gce_env, make_harness, monkeypatch) -> None:
    chunks = _console(make_harness)
    upto = next(i for i, c in enumerate(chunks) if "TRAINVM_STATUS=running:packages" in c)
    gce_env.play_serial("wait-vm", ["".join(chunks[: upto + 1])])  # the VM stops writing in the packages phase
    r = cli("up", T4, "--yes", "--name", "wait-vm", "--cloud", "gcp", "--wait-ready", "--ready-timeout", "0")
    assert r.code == 5, r.err
    assert "gave up waiting after 0 s, in phase packages" in r.err


def test_logs_prints_the_console_and_phase_timings(cli, gce_env, make_harness) -> None:
    chunks = _console(make_harness)
    cli("up", T4, "--yes", "--name", "wait-vm", "--cloud", "gcp", "--json")
    gce_env.set_serial("wait-vm", "".join(chunks))
    r = cli("logs", "wait-vm")
    assert r.code == 0, r.err
    assert "TRAINVM_STATUS=ready" in r.out and "trainvm driver: phase start" in r.out
    doc = cli("logs", "wait-vm", "--json").json()
    assert doc["status"] == "ready"
    assert [p["phase"] for p in doc["phases"]][:4] == ["watchdog", "preflight", "driver", "cuda"]
    assert all(p["result"] in ("done", "verified", "skipped") for p in doc["phases"])
    assert cli("logs", "no-such-vm").code == 4


def test_up_wait_ready_of_a_rehearsal_says_rehearsed_never_ready_or_match(cli, gce_env, make_harness) -> None:
    """Issue 38: the console of a script rendered with ``rehearsal`` (a machine without a GPU): the wait shows the
    final status ``rehearsed`` and verify's judgement of it, exit 6 (docs/spec.md), with the GPU rows not checked."""
    gce_env.play_serial("wait-vm", _console(make_harness, rehearsal=True))
    r = cli("up", T4, "--yes", "--name", "wait-vm", "--cloud", "gcp", "--wait-ready")
    assert r.code == 6, r.err[-3000:]
    assert "startup script: rehearsed" in r.err and "startup script: ready" not in r.err
    assert re.search(r"wait-vm: rehearsed \(rehearsal: no GPU: \d fields not checked; never a match\)$", r.out.rstrip()), r.out
    assert "not checked (rehearsal: no GPU)" in r.out and "DRIFT" not in r.out
    doc = cli("up", T4, "--yes", "--name", "wait-vm", "--cloud", "gcp", "--wait-ready", "--json")
    assert doc.code == 6 and doc.json()["status"] == "rehearsed" and doc.json()["verify"]["status"] == "rehearsed"
