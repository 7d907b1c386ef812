"""CLI: up / status / list / down / verify NAME against fake providers (the real providers are
tested through their SDKs against loopback emulators in tests/gce and tests/azure)."""

from __future__ import annotations

import json
import re

import pytest

from provisioner.providers.base import CapacityError, InstanceRecord
from tests.helpers import EXAMPLES, REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
REPORT = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())


def test_up_creates_on_cheapest_offer_and_prints_json(cli, clouds) -> None:
    r = cli("up", T4, "--yes", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["name"].startswith("trainvm-bert-finetune-") and len(doc["name"]) == len("trainvm-bert-finetune-") + 8
    assert doc["cloud"] == "gcp" and doc["zone"] == "us-central1-a" and doc["instance_type"] == "n1-standard-8"
    assert doc["price_hourly"] == pytest.approx(0.73) and doc["state"] == "RUNNING" and doc["ip"]
    assert [a["outcome"] for a in doc["attempts"]] == ["created"]
    stored = clouds["gcp"].profiles[doc["name"]]
    assert stored["name"] == "bert-finetune" and stored["stack"]["driver"] == "550.127.05"


def test_up_fails_over_and_prints_each_attempt(cli, clouds) -> None:
    clouds["gcp"].fail("us-central1-a", CapacityError("ZONE_RESOURCE_POOL_EXHAUSTED", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    r = cli("up", T4, "--yes")
    assert r.code == 0, r.err
    assert "attempt 1: gcp us-central1-a n1-standard-8: capacity [ZONE_RESOURCE_POOL_EXHAUSTED]" in r.err
    assert re.search(r"attempt 2: gcp us-central1-b n1-standard-8: created .* \(\d+s\)", r.err)
    assert "created" in r.err and "us-central1-b" in r.out


def test_up_everything_exhausted_exit_1_lists_attempts(cli, clouds) -> None:
    for fake in clouds.values():
        fake.create = lambda spec, offer, _f=fake: (_ for _ in ()).throw(CapacityError(f"stockout {offer.location}", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    r = cli("up", T4, "--yes", "--region", "us-central1", "--region", "eastus")
    assert r.code == 1
    assert "no VM could be created" in r.err and "1. gcp us-central1-a" in r.err
    assert not clouds["gcp"].vms and not clouds["azure"].vms


def test_up_twice_reports_existing_vm(cli, clouds) -> None:
    first = cli("up", T4, "--yes", "--json").json()
    second = cli("up", T4, "--yes", "--json")
    assert second.code == 0 and second.json()["existing"] is True and second.json()["name"] == first["name"]
    assert len(clouds["gcp"].vms) == 1


def test_up_same_name_other_hash_is_an_error(cli, clouds) -> None:
    cli("up", T4, "--yes", "--name", "shared-box")
    r = cli("up", str(EXAMPLES[1]), "--yes", "--name", "shared-box")
    assert r.code == 1 and "another version of the profile" in r.err


def test_up_needs_yes_when_not_interactive(cli, clouds) -> None:
    r = cli("up", T4)
    assert r.code == 2 and "--yes" in r.err and not clouds["gcp"].vms


def test_up_bad_name_and_cidr(cli, clouds) -> None:
    assert cli("up", T4, "--yes", "--name", "Bad_Name").code == 2
    assert cli("up", T4, "--yes", "--ssh-from", "0.0.0.0/0").code == 2


def test_status_and_list(cli, clouds) -> None:
    clouds["azure"].vms["trainvm-x-1"] = InstanceRecord("trainvm-x-1", "azure", "eastus", None, "Standard_NC4as_T4_v3", "running", "x", "abc", None,
                                                        "2026-11-21T00:00:00Z", spot=False, last_start="2026-11-21T00:00:00Z")
    cli("up", T4, "--yes")
    doc = cli("list", "--json").json()
    assert {v["cloud"] for v in doc["vms"]} == {"gcp", "azure"} and doc["skipped"] == []
    azure = next(v for v in doc["vms"] if v["cloud"] == "azure")
    assert azure["price_hourly"] and azure["price_hourly"] > 0 and azure["price_source"] == "catalog"  # no trainvm-price label
    one = cli("status", "trainvm-x-1", "--json").json()
    assert [v["name"] for v in one["vms"]] == ["trainvm-x-1"] and one["vms"][0]["cost_so_far"] > 0
    missing = cli("status", "nope", "--json")
    assert missing.code == 4 and missing.json()["error"]["exit_code"] == 4
    text = cli("list")
    assert "trainvm-x-1" in text.out and "cost so far" in text.out


def test_down_is_idempotent(cli, clouds) -> None:
    name = cli("up", T4, "--yes", "--json").json()["name"]
    first = cli("down", name, "--yes", "--json")
    assert first.code == 0 and first.json()["deleted"] is True
    second = cli("down", name, "--yes", "--json")
    assert second.code == 0 and second.json()["already_gone"] is True


def test_verify_remote_match_drift_provisioning(cli, clouds) -> None:
    name = cli("up", T4, "--yes", "--json").json()["name"]
    nr = cli("verify", name, "--json")
    assert nr.code == 5 and nr.json()["status"] == "provisioning"
    report = dict(REPORT, packages={**REPORT["packages"], "datasets": "2.21.0", "accelerate": "0.34.2"})
    report["cpu"] = {"model": "x", "count": 8}
    clouds["gcp"].reports[name] = report
    ok = cli("verify", name, "--json")
    assert ok.json()["status"] == "match", [f for f in ok.json()["fields"] if not f["ok"]]
    assert ok.code == 0
    clouds["gcp"].reports[name] = dict(report, driver="535.216.03", packages={**report["packages"], "torch": "2.4.1+cu121"})
    drift = cli("verify", name)
    assert drift.code == 1 and "DRIFT" in drift.out and "535.216.03" in drift.out and "2.4.1+cu121" in drift.out


def test_up_wait_ready_verifies(cli, clouds) -> None:
    fake = clouds["gcp"]
    original = fake.create

    def create(spec, offer):
        rec = original(spec, offer)
        fake.reports[spec.name] = dict(REPORT, packages={**REPORT["packages"], "datasets": "2.21.0", "accelerate": "0.34.2"})
        return rec

    fake.create = create
    r = cli("up", T4, "--yes", "--wait-ready", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["status"] == "match"


def test_up_wait_ready_names_a_malformed_report_instead_of_waiting_it_out(cli, clouds) -> None:
    """Issue 37: a report that is there but malformed ends the wait at once with exit 3 naming the field; it used to
    read as "no report yet" until the timeout (exit 5, "provisioning")."""
    fake = clouds["gcp"]
    original = fake.create

    def create(spec, offer):
        rec = original(spec, offer)
        fake.reports[spec.name] = dict(REPORT, driver=550)  # an older agent's number where schema 1 has a string
        return rec

    fake.create = create
    r = cli("up", T4, "--yes", "--wait-ready", "--ready-timeout", "2")
    assert r.code == 3, r.out + r.err
    assert "driver: Input should be a string" in r.err and "Traceback" not in r.err, r.err
    assert "timed out" not in r.out + r.err and "gave up waiting" not in r.err


def test_up_wait_ready_looks_again_while_the_script_runs(cli, clouds) -> None:
    """A report still "running" is not the end: the wait looks again until the script has finished."""
    fake = clouds["gcp"]
    done = dict(REPORT, packages={**REPORT["packages"], "datasets": "2.21.0", "accelerate": "0.34.2"})
    looks = []
    original = fake.read_report

    def read_report(name):
        looks.append(name)
        fake.reports[name] = done if len(looks) >= 3 else dict(REPORT, status="running:packages")
        return original(name)

    fake.read_report = read_report
    r = cli("up", T4, "--yes", "--wait-ready", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["status"] == "match" and not r.json()["timed_out"] and len(looks) == 3


def test_up_wait_ready_error_while_waiting_is_not_a_timeout(cli, clouds) -> None:
    from provisioner.errors import CloudError

    fake = clouds["gcp"]
    looks = []

    def read_report(name):
        looks.append(name)
        if len(looks) == 2:
            raise CloudError("the console read failed (fake)")
        return None, None

    fake.read_report = read_report
    r = cli("up", T4, "--yes", "--wait-ready", "--json")
    assert r.code == 3, r.out + r.err
    assert "the console read failed (fake)" in r.json()["error"]["message"] and len(looks) == 2


def test_cloud_without_credentials_is_skipped(cli, install_providers) -> None:
    from provisioner.errors import CloudError

    def refuse(cloud):
        return lambda **_: (_ for _ in ()).throw(CloudError(f"no credentials for {cloud}"))

    install_providers({}, {c: refuse(c) for c in ("gcp", "azure", "aws")})
    doc = cli("list", "--json")  # no cloud could be asked: a cloud/credentials error, not an empty list
    assert doc.code == 3 and {s["cloud"] for s in doc.json()["error"]["skipped"]} == {"gcp", "azure", "aws"}
    assert "GOOGLE_CLOUD_PROJECT" in doc.json()["error"]["hint"]  # no provider hint: the cloud's own
    r = cli("up", T4, "--yes")
    assert r.code == 3 and "no cloud with usable credentials" in r.err


def test_bad_poll_interval_is_an_input_error(cli, clouds, monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "soon")
    r = cli("up", T4, "--yes", "--wait-ready")
    assert r.code == 2 and "TRAINVM_READY_POLL_SECONDS" in r.err and "Traceback" not in r.err
    assert not clouds["gcp"].vms and not clouds["azure"].vms  # refused before anything was created


def test_up_reports_profile_warnings(cli, clouds, write_yaml) -> None:
    p = write_yaml("name: w\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\nstack: {driver: '535.216.03'}\n")
    doc = cli("up", str(p), "--yes", "--json").json()
    assert any("550.54.14" in w for w in doc["warnings"])
    r = cli("up", str(p), "--yes", "--name", "w-text")
    assert "warning" in r.err and "550.54.14" in r.err


def test_up_max_attempts_flag(cli, clouds) -> None:
    for fake in clouds.values():
        fake.create = lambda spec, offer: (_ for _ in ()).throw(CapacityError(f"stockout {offer.location}", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    r = cli("up", T4, "--yes", "--max-attempts", "3")
    assert r.code == 1 and "gave up after 3 attempt(s)" in r.err
    assert cli("up", T4, "--yes", "--max-attempts", "0").code == 2


def test_a_perf_profile_goes_to_the_cheapest_cloud_aws_included(cli, clouds, write_yaml) -> None:
    """The cheapest H100 is on AWS; a perf profile (the probe rides in the payload) plans and is created there: user
    data is the bootstrap, the payload is staged once in AWS's store (a re-run uploads nothing), the VM carries the
    payload label, and `down` removes the payload object once no other VM uses it."""
    from provisioner.render.payload import unpack

    path = write_yaml("name: perf-h100\nhardware: {gpu: H100}\nstack: {os: ubuntu-22.04, driver: '550.127.05', "
                      "python: '3.11.9', packages: ['torch==2.4.1+cu124']}\nperf: {}\n")
    planned = cli("plan", str(path), "--json").json()
    assert planned["chosen"]["cloud"] == "aws" and not any("does not fit" in w or "aws left out" in w for w in planned["warnings"])
    assert planned["payload"]["store"] == "S3" and planned["payload"]["size_bytes"] > 0
    text = cli("plan", str(path))
    assert text.code == 0 and "payload: private S3 trainvm-ACCOUNT-" in text.out
    r = cli("up", str(path), "--yes", "--json")
    assert r.code == 0, r.out + r.err
    doc = r.json()
    assert doc["cloud"] == "aws" and doc["summary"]["payload"]["store"] == "S3"
    store = clouds["aws"].store
    [(region, sha)] = store.uploads
    assert region == doc["region"] and "perfprobe" in unpack(store.objects[(region, sha)])["startup.sh"].decode()
    [vm] = clouds["aws"].vms.values()
    assert vm.payload == sha[:16]
    again = cli("up", str(path), "--yes", "--json")  # the VM exists: nothing staged again
    assert again.code == 0 and again.json()["existing"] and len(store.uploads) == 1
    down = cli("down", vm.name, "--yes", "--json")
    assert down.code == 0 and down.json()["payload"]["state"] == "released" and store.objects == {}


def test_down_keeps_a_payload_another_vm_uses(cli, clouds) -> None:
    """Two VMs of the same profile on the same shape share one content-addressed payload object: `down` of one keeps
    it (and says so), `down` of the other removes it."""
    first = cli("up", T4, "--yes", "--json", "--name", "trainvm-one")
    assert first.code == 0, first.err
    second = cli("up", T4, "--yes", "--json", "--name", "trainvm-two", "--region", first.json()["region"])
    assert second.code == 0, second.err
    store = clouds[first.json()["cloud"]].store
    assert len(store.objects) == 1 and len(store.uploads) == 1  # the second up found the object: nothing uploaded
    one = cli("down", "trainvm-one", "--yes", "--json").json()
    assert one["payload"]["state"] == "kept" and one["payload"]["users"] == ["trainvm-two"] and len(store.objects) == 1
    two = cli("down", "trainvm-two", "--yes")
    assert two.code == 0 and "removed from the store" in two.out and store.objects == {}


def test_a_payload_store_refusal_stops_up_and_leaves_nothing(cli, clouds) -> None:
    """The store refuses the upload (the caller may not create or write it): that is the attempt's AuthError, `up`
    stops without creating any VM."""
    from provisioner.errors import AuthError

    for fake in clouds.values():
        fake.store.refuse.append(AuthError("AccessDenied: s3:CreateBucket", code="AccessDenied"))
    r = cli("up", T4, "--yes", "--json")
    assert r.code == 3 and "AccessDenied" in r.err + r.out
    assert not any(f.vms for f in clouds.values()) and not any(f.store.objects for f in clouds.values())


def test_up_with_credentials_for_one_cloud_names_the_clouds_not_checked(cli, clouds, monkeypatch, write_yaml,
                                                                         install_providers) -> None:
    """Only AWS has credentials: `up` cannot see a VM of that name on GCE or Azure, so before creating it says
    which clouds it did not check (text and --json), and creates on AWS only."""
    from provisioner.errors import CloudError

    def no_credentials(cloud: str):
        def make(**_candidates):
            raise CloudError(f"no {cloud} credentials (fake)")
        return make

    install_providers({"aws": clouds["aws"]}, {c: no_credentials(c) for c in ("gcp", "azure")})
    profile = str(write_yaml(f"extends: {T4}\nname: bert-finetune\n"
                             "data:\n  - {source: 'https://example.com/glue.tar', dest: /mnt/data/glue}\n"))
    r = cli("up", profile, "--yes", "--cloud", "aws")
    assert r.code == 0, r.err
    name = next(iter(clouds["aws"].vms))
    line = next(ln for ln in r.err.splitlines() if "not checked" in ln)
    assert "gcp" in line and "azure" in line and name in line and "may already exist" in line
    assert r.err.index("not checked") < r.err.index("attempt 1")  # said before creating
    clouds["aws"].vms.clear()
    doc = cli("up", profile, "--yes", "--json", "--cloud", "aws").json()
    assert [c["cloud"] for c in doc["summary"]["clouds_not_checked"]] == ["gcp", "azure"]
    assert "no gcp credentials (fake)" in doc["summary"]["clouds_not_checked"][0]["reason"]
    assert any("not checked" in w and "gcp" in w for w in doc["warnings"])
    assert not clouds["gcp"].vms and not clouds["azure"].vms


def test_up_with_every_cloud_checked_names_none(cli, clouds) -> None:
    doc = cli("up", T4, "--yes", "--json").json()
    assert doc["summary"]["clouds_not_checked"] == [] and not any("not checked" in w for w in doc["warnings"])


def test_plan_warns_when_failover_can_pick_a_region_without_the_aws_secret(cli, write_yaml) -> None:
    """secret://aws/NAME is read in the VM's region: with AWS offers in several regions `plan` says the secret must
    exist in each (or be named by its ARN); an ARN reference is read in its own region and needs no warning."""
    def plan(ref: str) -> list[str]:
        profile = write_yaml(f"extends: {T4}\nname: bert-finetune\nstack: {{env: {{HF_TOKEN: '{ref}'}}}}\n"
                             "data:\n  - {source: 'https://example.com/glue.tar', dest: /mnt/data/glue}\n")
        r = cli("plan", str(profile), "--json", "--cloud", "aws", "--region", "us-east-1", "--region", "us-west-2")
        assert r.code == 0, r.err
        return [w for w in r.json()["warnings"] if "HF_TOKEN" in w]

    [warning] = plan("secret://aws/hf/token")
    assert "read in the VM's own region" in warning and "us-east-1, us-west-2" in warning
    assert "secret://aws/arn:aws:secretsmanager:REGION:ACCOUNT:secret:hf/token" in warning
    assert plan("secret://aws/arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token") == []


def test_a_failed_up_never_releases_a_refreshed_payload_a_live_vm_uses(cli, clouds) -> None:
    """Issue 36 item 3: the object is older than REFRESH_DAYS, so the second `up` uploads it again; that attempt
    fails (its create left nothing), and the object stays: trainvm-one carries its label, and a refresh is not an
    upload this attempt may take back. trainvm-one's `down` then removes it."""
    first = cli("up", T4, "--yes", "--json", "--name", "trainvm-one").json()
    fake = clouds[first["cloud"]]
    [obj] = fake.store.objects
    fake.store.aged.add(obj)
    fake.fail(first["zone"], CapacityError("no room", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    second = cli("up", T4, "--yes", "--json", "--name", "trainvm-two", "--region", first["region"], "--max-attempts", "1")
    assert second.code != 0 and "trainvm-two" not in fake.vms
    assert fake.store.uploads == [obj, obj]  # refreshed by the failed attempt ...
    assert obj in fake.store.objects  # ... and kept
    down = cli("down", "trainvm-one", "--yes", "--json").json()
    assert down["payload"]["state"] == "released" and fake.store.objects == {}


def test_a_failed_up_keeps_a_payload_uploaded_again_while_a_live_vm_carries_its_label(cli, clouds) -> None:
    """The lifecycle rule removed trainvm-one's object (the VM is older than EXPIRE_DAYS); the next `up` of the same
    payload uploads it as a new object and fails: the object stays, since a live VM carries its label."""
    first = cli("up", T4, "--yes", "--json", "--name", "trainvm-one").json()
    fake = clouds[first["cloud"]]
    [obj] = fake.store.objects
    fake.store.objects.clear()
    fake.fail(first["zone"], CapacityError("no room", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    second = cli("up", T4, "--yes", "--json", "--name", "trainvm-two", "--region", first["region"], "--max-attempts", "1")
    assert second.code != 0 and list(fake.store.objects) == [obj]


def test_a_failed_up_releases_the_new_object_no_vm_uses(cli, clouds) -> None:
    fake = clouds["gcp"]
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"):
        fake.fail(zone, CapacityError("no room", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    r = cli("up", T4, "--yes", "--json", "--cloud", "gcp", "--region", "us-central1", "--max-attempts", "1")
    assert r.code != 0 and fake.store.uploads and fake.store.objects == {}
