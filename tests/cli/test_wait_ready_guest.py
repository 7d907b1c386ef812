"""``up --wait-ready`` on GCE reads the startup script's status from the ``trainvm/status`` guest attribute
(instances.getGuestAttributes) as well as from the serial console: a phase the console has not shown yet
appears from the attribute, and a timeout names it. Against the GCE emulator through the real SDK; the
emulator answers getGuestAttributes in the real API's shape (``variableKey``/``variableValue``, 404 for an
attribute not written yet, 400 when guest attributes are not enabled). The console-only path (no attribute
written) is tests/render/test_wait_ready_e2e.py."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import REPO, gce_cli_env

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
REPORT = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())
MATCHING = dict(REPORT, packages={**REPORT["packages"], "datasets": "2.21.0", "accelerate": "0.34.2"})


@pytest.fixture
def gce(monkeypatch, tmp_path):
    yield from gce_cli_env(monkeypatch, tmp_path)


def test_phases_arrive_from_guest_attributes_when_the_console_is_silent(cli, gce) -> None:
    writes = [{"status": "running:driver"}] * 2 + [{"status": "running:packages"}] * 2 + [
        {"status": "ready", "report": json.dumps(MATCHING)}]
    gce.play_guest_attributes("guest-vm", writes)
    r = cli("up", T4, "--yes", "--name", "guest-vm", "--cloud", "gcp", "--wait-ready")
    assert r.code == 0, r.err[-3000:]
    starts = re.findall(r"^phase (\w+) \.\.\.$", r.err, re.M)
    assert starts == ["driver", "packages"], r.err
    assert re.search(r"^phase driver \(\d+s\)$", r.err, re.M)  # ended when the next phase began
    assert r.out.rstrip().endswith("guest-vm: match")
    # read through the real API: the status attribute, by its variable key
    keys = {c.query.get("variableKey") for c in gce.calls("instances.getGuestAttributes")}
    assert "trainvm/status" in keys and "trainvm/report" in keys


def test_a_timeout_names_the_phase_the_guest_attribute_reported(cli, gce) -> None:
    gce.play_guest_attributes("guest-vm", [{"status": "running:cuda"}])
    r = cli("up", T4, "--yes", "--name", "guest-vm", "--cloud", "gcp", "--wait-ready", "--ready-timeout", "1")
    assert r.code == 5, r.err[-3000:]
    assert "gave up waiting after 1 s, in phase cuda" in r.err
    assert re.search(r"^phase cuda \.\.\.$", r.err, re.M)


def test_a_value_that_is_not_a_status_is_ignored(cli, gce) -> None:
    gce.play_guest_attributes("guest-vm", [{"status": "running:$(reboot)\x1b[2J"}, {"status": "bogus"},
                                           {"status": "ready", "report": json.dumps(MATCHING)}])
    r = cli("up", T4, "--yes", "--name", "guest-vm", "--cloud", "gcp", "--wait-ready")
    assert r.code == 0, r.err[-3000:]
    assert "phase " not in r.err and "\x1b" not in r.err
