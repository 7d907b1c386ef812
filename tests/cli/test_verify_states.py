"""`verify NAME`: every state, its exit code and JSON, and the empty-"match" hole (a report judged
against no profile) closed. Fake providers; the real ones decode through provisioner.verify.report
(tests/render/test_report_contract.py) and run against the emulators in tests/e2e."""

from __future__ import annotations

import json

import pytest

from tests.fakes import FakeProvider
from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
REPORT = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())
MATCHING = dict(REPORT, packages={**REPORT["packages"], "datasets": "2.21.0", "accelerate": "0.34.2"},
                cpu={"model": "x", "count": 8})


@pytest.fixture
def vm(cli, monkeypatch, install_providers):
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    fakes = {"gcp": FakeProvider("gcp"), "azure": FakeProvider("azure")}
    install_providers(fakes)
    name = cli("up", T4, "--yes", "--json").json()["name"]
    return fakes["gcp"], name


def test_match(cli, vm) -> None:
    fake, name = vm
    fake.reports[name] = MATCHING
    r = cli("verify", name)
    assert r.code == 0 and r.out.rstrip().endswith(f"{name}: match"), r.out


def test_drift(cli, vm) -> None:
    fake, name = vm
    fake.reports[name] = dict(MATCHING, driver="535.216.03")
    r = cli("verify", name, "--json")
    assert r.code == 1 and r.json()["status"] == "drift"
    assert [f["field"] for f in r.json()["fields"] if not f["ok"]] == ["stack.driver"]


def test_provisioning_without_a_report(cli, vm) -> None:
    _, name = vm
    r = cli("verify", name)
    assert r.code == 5 and "provisioning (no report from the startup script yet)" in r.out
    assert "DRIFT" not in r.out, r.out


def test_provisioning_names_the_phase(cli, vm) -> None:
    fake, name = vm
    fake.reports[name] = dict(MATCHING, status="running:packages")
    r = cli("verify", name)
    assert r.code == 5 and r.out.rstrip().endswith(f"{name}: provisioning (phase packages)")
    assert "DRIFT" not in r.out and "verdict" not in r.out, r.out  # issue 36 item 21: nothing is judged yet, no table
    doc = cli("verify", name, "--json").json()
    assert (doc["status"], doc["phase"]) == ("provisioning", "packages")


def test_failed_says_phase_line_and_message(cli, vm) -> None:
    fake, name = vm
    fake.reports[name] = dict(MATCHING, status="failed:driver:212", error="expected driver 550.127.05, got [none]")
    r = cli("verify", name)
    assert r.code == 1
    assert f"{name}: failed (phase driver, line 212: expected driver 550.127.05, got [none])" in r.out
    doc = cli("verify", name, "--json").json()
    assert (doc["status"], doc["phase"], doc["line"]) == ("failed", "driver", 212)
    assert doc["message"] == "expected driver 550.127.05, got [none]"


def test_unreadable_stored_profile_is_an_error_not_a_match(cli, vm) -> None:
    """The review's reproduction: driver 470.00.00 and no packages used to come back "match"."""
    fake, name = vm
    fake.reports[name] = dict(MATCHING, driver="470.00.00", packages={})
    fake.profiles.pop(name)
    r = cli("verify", name)
    assert r.code == 3 and "match" not in r.out
    assert "profile stored on" in r.err and "could not be read" in r.err and "--profile" in r.err
    doc = cli("verify", name, "--json")
    assert doc.code == 3 and "could not be read" in doc.json()["error"]["message"]
    # with the profile given explicitly every field is compared again
    given = cli("verify", name, "--profile", T4, "--json")
    assert given.code == 1 and given.json()["status"] == "drift"
    assert {"stack.driver", "stack.packages.torch"} <= {f["field"] for f in given.json()["fields"] if not f["ok"]}


def test_a_missing_vm_is_the_same_code_everywhere_down_included(cli, vm) -> None:
    codes = {cmd: cli(cmd, "no-such-vm").code for cmd in ("status", "verify", "ssh", "logs")}
    assert codes == {"status": 4, "verify": 4, "ssh": 4, "logs": 4}
    for cmd in ("status", "verify", "ssh", "logs"):
        assert "no trainvm VM named no-such-vm" in cli(cmd, "no-such-vm").err
    down = cli("down", "no-such-vm", "--yes")  # never created: not "already gone" (issue 36 item 1)
    assert down.code == 4 and "no VM named no-such-vm" in down.err


@pytest.mark.parametrize("why", ["payload hash mismatch", "payload missing", "identity without read access",
                                 "store unreachable"])
def test_a_bootstrap_failure_is_named_by_verify(cli, vm, tmp_path, monkeypatch, why) -> None:
    """The bootstrap's own failure report (the report line it prints, made by running the real bootstrap against a
    loopback store in tests/render/test_bootstrap_run.py) reaches `verify` as failed in phase bootstrap, with its
    reason: each failure mode says what is wrong, not "no report yet"."""
    import subprocess

    from provisioner.providers.store import PayloadRef, payload_key
    from provisioner.render import bootstrap as B
    from provisioner.verify.report import last_console_report

    fake, name = vm
    monkeypatch.setattr(B, "fetch_code", lambda cloud: "tv_fetch() { return %d; }" % {
        "payload missing": 4, "identity without read access": 3, "store unreachable": 2}.get(why, 0))
    ref = PayloadRef(cloud="gcp", region="us-central1", store="b", key=payload_key("a" * 64),
                     url="https://store.example/p", sha256="a" * 64, size=1, access="objectViewer")
    boot = B.render_bootstrap(ref, "f" * 64, "debian-12").text
    if why == "payload hash mismatch":  # the fetch "succeeds" with other bytes
        boot = boot.replace("tv_fetch() { return 0; }", 'tv_fetch() { echo other >"$2"; }')
    env = {"PATH": "/usr/bin:/bin", "TRAINVM_ROOT": str(tmp_path), "TRAINVM_RETRY_SLEEP": "0",
           "TRAINVM_FETCH_SECONDS": "0", "TRAINVM_MISSING_TRIES": "1"}
    out = subprocess.run(["bash", "-c", boot], capture_output=True, text=True, env=env, timeout=60).stdout
    report = last_console_report(out)
    assert report is not None and report.status.startswith("failed:bootstrap:")
    fake.reports[name] = report.model_dump(mode="json", by_alias=True, exclude_none=True)
    r = cli("verify", name, "--json")
    doc = r.json()
    assert r.code == 1 and (doc["status"], doc["phase"]) == ("failed", "bootstrap") and why in doc["message"]


def test_rehearsed_is_exit_6_with_the_gpu_fields_not_checked(cli, vm) -> None:
    """Issue 38: a profile rehearsed on a machine without a GPU (CloudSpec.rehearsal) is never a match."""
    fake, name = vm
    fake.reports[name] = dict(MATCHING, status="rehearsed", gpus=None, driver=None, cuda_driver_max=None,
                              framework=dict(MATCHING["framework"], cuda_available=None),
                              not_checked={"gpus": "rehearsal: no GPU", "driver": "rehearsal: no GPU"})
    r = cli("verify", name)
    assert r.code == 6, r.out
    assert r.out.rstrip().endswith(f"{name}: rehearsed (rehearsal: no GPU: 4 fields not checked; never a match)"), r.out
    assert "not checked (rehearsal: no GPU)" in r.out and "match\n" not in r.out and "DRIFT" not in r.out
    doc = cli("verify", name, "--json")
    assert doc.code == 6 and doc.json()["status"] == "rehearsed"
    unseen = {f["field"] for f in doc.json()["fields"] if f.get("not_checked")}
    assert {"status", "stack.driver", "hardware.gpu_count", "hardware.gpu", "stack.framework.gpu"} <= unseen


@pytest.mark.parametrize("json_out", [False, True])
def test_a_malformed_report_is_an_error_naming_the_field_not_provisioning(cli, vm, json_out) -> None:
    """Issue 37: a report that is there but fails schema 1 (an older agent, a hand edit) is exit 3 naming the field
    and pydantic's reason; it used to decode to None and read as "provisioning" (exit 5) for ever."""
    fake, name = vm
    fake.reports[name] = dict(MATCHING, gpus=[{"name": "Tesla T4", "memory_mib": "lots"}])
    r = cli("verify", name, *(["--json"] if json_out else []))
    assert r.code == 3, r.out + r.err
    assert "provisioning" not in r.out + r.err and "Traceback" not in r.err
    assert "gpus.0.memory_mib: Input should be a valid integer" in r.err, r.err
    if json_out:
        doc = r.json()["error"]
        assert doc["exit_code"] == 3 and doc["type"] == "ReportUnreadableError" and "trainvm logs" in doc["hint"]


def test_a_truncated_report_is_an_error_naming_the_json_position(cli, vm) -> None:
    fake, name = vm
    fake.reports[name] = json.dumps(MATCHING)[:300]  # a truncated write
    r = cli("verify", name)
    assert r.code == 3 and "not JSON (" in r.err and "line 1 column" in r.err, r.err
    assert "provisioning" not in r.out + r.err and "Traceback" not in r.err
