"""`up` of a VM that already exists (issue 36 item 2): `--wait-ready` waits for it and verifies it as it would a
new VM (same exit codes), and a stopped VM is said to be stopped, with what it keeps costing and what starting it
costs, exit 1 unless `--start` (which starts it)."""

from __future__ import annotations

import json

import pytest

from tests.fakes import STOPPED
from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
REPORT = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())
MATCHING = dict(REPORT, packages={**REPORT["packages"], "datasets": "2.21.0", "accelerate": "0.34.2"},
                cpu={"model": "x", "count": 8})


@pytest.fixture
def existing(cli, clouds):
    name = cli("up", T4, "--yes", "--json").json()["name"]
    return clouds["gcp"], name


def test_wait_ready_on_an_existing_vm_waits_and_verifies(cli, existing) -> None:
    fake, name = existing
    fake.reports[name] = dict(MATCHING, driver="535.216.03")  # the VM's stack drifted
    r = cli("up", T4, "--yes", "--wait-ready", "--json")
    assert r.code == 1, r.out + r.err
    doc = r.json()
    assert doc["existing"] is True and doc["status"] == "drift" and doc["verify"]["target"] == name
    fake.reports[name] = MATCHING
    ok = cli("up", T4, "--yes", "--wait-ready")
    assert ok.code == 0 and f"{name}: match" in ok.out and "already exists" in ok.err


def test_wait_ready_on_an_existing_vm_times_out_like_a_new_one(cli, existing) -> None:
    _, name = existing  # no report from the startup script yet
    r = cli("up", T4, "--yes", "--wait-ready", "--ready-timeout", "0")
    assert r.code == 5 and "gave up waiting" in r.err and "still running (and billing)" in r.err


def test_a_stopped_vm_is_exit_1_with_what_starting_it_costs(cli, existing) -> None:
    fake, name = existing
    assert cli("stop", name, "--yes").code == 0 and fake.vms[name].state == STOPPED
    r = cli("up", T4, "--yes")
    assert r.code == 1 and f"stopped ({STOPPED})" in r.err and "starting it bills $" in r.err
    assert "keeps costing $" in r.err and "--start" in r.err and fake.vms[name].state == STOPPED
    doc = cli("up", T4, "--yes", "--json")
    assert doc.code == 1 and doc.json()["error"]["exit_code"] == 1


def test_up_start_starts_a_stopped_vm_and_waits_for_it(cli, existing) -> None:
    fake, name = existing
    cli("stop", name, "--yes")
    fake.reports[name] = MATCHING
    r = cli("up", T4, "--yes", "--start", "--wait-ready")
    assert r.code == 0, r.err
    assert fake.vms[name].state == "RUNNING" and "starting it" in r.err and f"{name}: match" in r.out


def test_name_says_it_creates_a_second_vm_of_the_profile(cli, existing) -> None:
    """Issue 36 item 25: `--name` is never a silent duplicate of a VM of the same profile."""
    fake, name = existing
    r = cli("up", T4, "--yes", "--name", "trainvm-second")
    assert r.code == 0 and "trainvm-second" in fake.vms
    line = next(ln for ln in r.err.splitlines() if "second VM" in ln)
    assert "--name trainvm-second creates a second VM of this profile" in line and name in line
    assert r.err.index("second VM") < r.err.index("attempt 1")  # said before creating
    doc = cli("up", T4, "--yes", "--json", "--name", "trainvm-third").json()
    assert any("creates a second VM" in w and name in w and "trainvm-second" in w for w in doc["warnings"])
