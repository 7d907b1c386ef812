"""The provider contract (provisioner/providers/base.py ``Provider``), one suite for every cloud: the libcloud
``TestCaseMixin`` idea. Each test runs on the fake, on GCE against its emulator and on Azure against its
emulator (through the real SDKs), and on any cloud added to CLOUDS in conftest.py."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from provisioner.errors import ReportUnreadableError
from provisioner.providers.base import ConflictError, InstanceRecord, ProviderError
from provisioner.verify.report import decode_report
from tests.contract.harness import REPORT, CloudHarness

OTHER_HASH = "cd" * 32


def names(records: list[InstanceRecord]) -> list[str]:
    return [r.name for r in records]


def test_create_find_list(cloud: CloudHarness) -> None:
    spec, offer = cloud.spec(), cloud.offers[0]
    assert cloud.provider.find(spec.name) is None
    rec = cloud.provider.create(spec, offer)
    assert (rec.name, rec.state, rec.profile, rec.hash) == (spec.name, "RUNNING", spec.profile_name, spec.labels["trainvm-hash"])
    assert (rec.cloud, rec.region, rec.instance_type) == (offer.cloud, offer.region, offer.instance_type)
    assert not rec.adopted
    found = cloud.twin().find(spec.name)
    assert found is not None and (found.name, found.state, found.hash, found.region) == (rec.name, "RUNNING", rec.hash, rec.region)
    assert names(cloud.twin().list()) == [spec.name]


def test_create_again_with_the_same_hash_adopts(cloud: CloudHarness) -> None:
    spec = cloud.spec()
    first = cloud.provider.create(spec, cloud.offers[0])
    again = cloud.twin().create(spec, cloud.offers[0])  # a re-run of `up`, in another process
    assert (again.name, again.state, again.hash, again.region) == (first.name, "RUNNING", first.hash, first.region)
    assert again.adopted is True
    assert names(cloud.provider.list()) == [spec.name]


def test_another_hash_conflicts_and_touches_nothing(cloud: CloudHarness) -> None:
    spec = cloud.spec()
    cloud.provider.create(spec, cloud.offers[0])
    before = cloud.leftovers()
    with pytest.raises(ConflictError, match="another version"):
        cloud.twin().create(cloud.spec(name=spec.name, profile_hash=OTHER_HASH), cloud.offers[0])
    found = cloud.provider.find(spec.name)
    assert found is not None and found.hash == spec.labels["trainvm-hash"]
    assert cloud.leftovers() == before


def test_unmanaged_vm_conflicts_is_invisible_and_never_deleted(cloud: CloudHarness) -> None:
    spec = cloud.spec(name="trainvm-theirs")
    cloud.plant_unmanaged(spec.name, cloud.offers[0])
    planted = cloud.leftovers()
    assert planted
    with pytest.raises(ConflictError, match="not managed by trainvm"):
        cloud.provider.create(spec, cloud.offers[0])
    assert cloud.provider.find(spec.name) is None
    assert cloud.provider.list() == []
    with pytest.raises(ConflictError):
        cloud.provider.delete(spec.name)
    assert cloud.leftovers() == planted


def test_list_shows_only_trainvm_vms(cloud: CloudHarness) -> None:
    cloud.plant_unmanaged("trainvm-theirs", cloud.offers[1])
    ours = cloud.provider.create(cloud.spec(), cloud.offers[0])
    listed = cloud.twin().list()
    assert names(listed) == [ours.name]
    assert all(r.profile == ours.profile and r.hash == ours.hash for r in listed)


def test_delete_twice(cloud: CloudHarness) -> None:
    spec = cloud.spec()
    cloud.provider.create(spec, cloud.offers[0])
    assert cloud.provider.delete(spec.name) is True
    assert cloud.provider.find(spec.name) is None and cloud.leftovers() == []
    assert cloud.twin().delete(spec.name) is False
    assert cloud.provider.list() == []


def test_a_failure_leaves_nothing(cloud: CloudHarness) -> None:
    spec, offer = cloud.spec(), cloud.offers[0]
    cloud.fail_after_create_starts(offer)
    with pytest.raises(ProviderError) as err:
        cloud.provider.create(spec, offer)
    assert err.value.cleanup == "verified" and err.value.left_behind == ()
    assert cloud.leftovers() == [] and cloud.provider.find(spec.name) is None
    rec = cloud.provider.create(spec, offer)  # the failure was this attempt's, not the name's: a re-run works
    assert rec.state == "RUNNING" and not rec.adopted


def test_read_report(cloud: CloudHarness) -> None:
    spec = cloud.spec()
    rec = cloud.provider.create(spec, cloud.offers[0])
    report, profile = cloud.provider.read_report(spec.name)
    assert report is None and profile == json.loads(spec.profile_json)
    cloud.put_report(rec, REPORT)
    report, profile = cloud.twin().read_report(spec.name)
    assert report == decode_report(REPORT) and report is not None and report.driver == "550.127.05"
    assert profile == json.loads(spec.profile_json)
    assert cloud.provider.read_report("trainvm-nope-00000000") == (None, None)


def test_a_malformed_report_is_named_not_missing(cloud: CloudHarness) -> None:
    """Issue 37: a report that is there but fails schema 1 (an older agent, a hand edit) is ReportUnreadableError
    naming the VM's channel and the field, through each cloud's real channel (GCE guest attribute, Azure Run
    Command, EC2 console output); it used to read as None, "no report yet"."""
    spec = cloud.spec()
    rec = cloud.provider.create(spec, cloud.offers[0])
    cloud.put_report(rec, dict(REPORT, gpus=[{"name": "Tesla T4", "memory_mib": "lots"}]))
    with pytest.raises(ReportUnreadableError, match=r"gpus\.0\.memory_mib: Input should be a valid integer") as err:
        cloud.twin().read_report(spec.name)
    assert err.value.exit_code == 3


def test_stop_then_start(cloud: CloudHarness) -> None:
    spec = cloud.spec()
    cloud.provider.create(spec, cloud.offers[0])
    stopped = cloud.provider.stop(spec.name)
    assert stopped is not None and stopped.state in cloud.stopped_states
    found = cloud.twin().find(spec.name)
    assert found is not None and found.state == stopped.state
    started = cloud.provider.start(spec.name)
    assert started is not None and started.state == "RUNNING"
    assert cloud.provider.stop("trainvm-nope-00000000") is None


def _in_threads(*jobs: Any) -> list[Any]:
    """Run each job in its own thread, released together; each result, or the exception it raised."""
    results: list[Any] = [None] * len(jobs)
    gate = threading.Barrier(len(jobs))

    def run(i: int) -> None:
        gate.wait()
        try:
            results[i] = jobs[i]()
        except Exception as exc:  # noqa: BLE001 - returned to the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    return results


def test_two_creates_in_parallel_on_one_provider(cloud: CloudHarness) -> None:
    a, b = cloud.spec(name="trainvm-par-a"), cloud.spec(name="trainvm-par-b")
    results = _in_threads(lambda: cloud.provider.create(a, cloud.offers[0]),
                          lambda: cloud.provider.create(b, cloud.offers[1]))
    assert [type(r).__name__ for r in results] == ["InstanceRecord", "InstanceRecord"], results
    assert [(r.name, r.region, r.state) for r in results] == [
        (a.name, cloud.offers[0].region, "RUNNING"), (b.name, cloud.offers[1].region, "RUNNING")]
    assert names(cloud.twin().list()) == [a.name, b.name]
    assert all(cloud.provider.delete(n) for n in (a.name, b.name)) and cloud.leftovers() == []


def test_parallel_creates_one_fails_and_cleans_only_its_own(cloud: CloudHarness) -> None:
    """Per-attempt state lives with the attempt: a failing create cleans up exactly what it made, while a
    create of another VM on the same provider instance goes on and is kept. (The armed failure strikes the
    create in offers[0]; a cloud whose fault cannot target an offer may fail either one.)"""
    a, b = cloud.spec(name="trainvm-par-a"), cloud.spec(name="trainvm-par-b")
    cloud.fail_after_create_starts(cloud.offers[0])
    results = _in_threads(lambda: cloud.provider.create(a, cloud.offers[0]),
                          lambda: cloud.provider.create(b, cloud.offers[1]))
    failed = [(spec, r) for spec, r in zip((a, b), results) if isinstance(r, Exception)]
    made = [(spec, r) for spec, r in zip((a, b), results) if isinstance(r, InstanceRecord)]
    assert len(failed) == 1 and len(made) == 1, results
    (lost, err), (kept, rec) = failed[0], made[0]
    assert isinstance(err, ProviderError) and err.cleanup == "verified", err
    assert rec.name == kept.name and rec.state == "RUNNING"
    assert [x for x in cloud.leftovers() if lost.name in x] == []
    assert [x for x in cloud.leftovers() if kept.name in x] != []
    assert names(cloud.twin().list()) == [kept.name]
