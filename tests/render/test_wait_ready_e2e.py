"""``up --wait-ready`` and ``logs`` against the GCE emulator, with the console a real startup script
writes: the rendered script runs under the stub harness, and the emulator plays its output back a few
lines per read (google_metadata_script_runner prefixes included), as a VM's serial port grows."""

from __future__ import annotations

import re

import pytest
import trainvm_render_support as S

from tests.helpers import gce_cli_env

T4 = str(S.REPO / "profiles/examples/bert-finetune-t4.yaml")
PREFIX = "Nov 24 02:00:00 wait-vm google_metadata_script_runner[812]: startup-script: "


@pytest.fixture
def gce_env(monkeypatch, tmp_path):
    yield from gce_cli_env(monkeypatch, tmp_path)


def _console(make_harness, **knobs) -> list[str]:
    run = make_harness(S.render(S.loaded(S.GOLDEN_PROFILE), "gcp").startup_sh, **knobs).run()
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
    assert starts[:3] == ["preflight", "driver", "cuda"]


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
    assert [p["phase"] for p in doc["phases"]][:3] == ["preflight", "driver", "cuda"]
    assert all(p["result"] in ("done", "verified", "skipped") for p in doc["phases"])
    assert cli("logs", "no-such-vm").code == 4
