"""`up` of a VM that already exists (issue 36 item 2): `--wait-ready` waits for it and verifies it as it would a
new VM (same exit codes), and a stopped VM is said to be stopped, with what it keeps costing and what starting it
costs, exit 1 unless `--start` (which starts it)."""

from __future__ import annotations

import json
from dataclasses import replace

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


# Azure "Stopped" (PowerState/stopped: a poweroff from inside the guest, or a stop without deallocation) keeps the VM
# allocated and billing compute; only "Deallocated" ends it (learn.microsoft.com/azure/virtual-machines/states-billing).
# A stopped EC2 instance ("stopped") bills no compute (docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-lifecycle.html).


@pytest.fixture
def anywhere(tmp_path) -> str:
    """The T4 example without its gs:// data (which keeps it on GCE), so that every cloud can place it."""
    text = (REPO / "profiles" / "examples" / "bert-finetune-t4.yaml").read_text()
    text = text.replace("extends: base/torch-2.4-cu124", f"extends: {REPO / 'profiles' / 'base' / 'torch-2.4-cu124.yaml'}")
    path = tmp_path / "t4-anywhere.yaml"
    path.write_text("\n".join(ln for ln in text.splitlines() if "gs://" not in ln and ln != "data:") + "\n")
    return str(path)


@pytest.fixture
def powered_off(cli, clouds, anywhere):
    """An Azure VM of the T4 profile that the guest powered off: state STOPPED, still allocated."""
    name = cli("up", anywhere, "--yes", "--json", "--cloud", "azure").json()["name"]
    fake = clouds["azure"]
    fake.vms[name] = replace(fake.vms[name], state="STOPPED")
    return fake, name


def test_up_on_an_allocated_stopped_vm_says_compute_still_bills(cli, powered_off, anywhere) -> None:
    fake, name = powered_off
    r = cli("up", anywhere, "--yes", "--cloud", "azure")
    assert r.code == 1, r.out + r.err
    assert "still allocated" in r.err and "keeps billing $" in r.err and "compute" in r.err
    assert f"trainvm stop {name}` deallocates" in r.err and "keeps costing" not in r.err  # not the disks-only words


def test_status_counts_an_allocated_stopped_vm_as_billing_compute(cli, powered_off) -> None:
    _, name = powered_off
    row = next(v for v in cli("list", "--json").json()["vms"] if v["name"] == name)
    assert row["billing_compute"] is True and row["allocated_while_stopped"] is True
    assert row["billing_now_hourly"] == row["running_hourly"] is not None and row["running_hourly"] > row["stopped_hourly"]
    text = cli("status", name)
    assert "still allocated: compute keeps billing" in text.out and "compute billing has ended" not in text.out


def test_a_stopped_ec2_instance_bills_no_compute(cli, clouds, anywhere) -> None:
    name = cli("up", anywhere, "--yes", "--json", "--cloud", "aws").json()["name"]
    clouds["aws"].vms[name] = replace(clouds["aws"].vms[name], state="stopped")
    row = next(v for v in cli("list", "--json").json()["vms"] if v["name"] == name)
    assert row["billing_compute"] is False and row["billing_now_hourly"] == row["stopped_hourly"]
