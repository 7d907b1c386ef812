"""Issue 19 on GCE, through the real SDK against the emulator: a create is a transaction with an owner
(``down`` during a pending create is not undone; cleanup is verified; no attempt starts while an earlier one
may still exist), a wrong project is not "not found", and a silent endpoint fails within the call budget."""

from __future__ import annotations

import pytest

from provisioner.providers.base import AuthError, RetryExhaustedError, VanishedError
from provisioner.provision.failover import ProvisionCloudError, ProvisionError, provision

ZONES = ["us-central1-a", "us-central1-b", "us-east1-c", "us-east4-a"]


def delete_on_first_poll(emu, key):
    """What a concurrent `trainvm down` does to a pending insert: the VM is deleted; the insert then ends DONE."""
    project, zone, _ = key
    target = emu._op_state[key]["target"]
    if emu.operations[key]["operationType"] == "insert" and target in emu.instances:
        del emu.instances[target]


def test_down_during_pending_create_is_not_undone(gce, provider, spec, offer):
    gce.polls_to_done = 2
    gce.on_poll = delete_on_first_poll
    s = spec()
    with pytest.raises(VanishedError, match="deleted while its create was in progress") as e:
        provider.create(s, offer())
    assert e.value.cleanup == "verified"
    assert len(gce.calls("instances.insert")) == 1 and not gce.instances  # never re-sent


def test_down_during_pending_create_stops_failover(gce, provider, spec, offer):
    gce.polls_to_done = 2
    gce.on_poll = delete_on_first_poll
    with pytest.raises(ProvisionCloudError, match="was deleted while `up` waited for it") as e:
        provision([offer(z) for z in ZONES], lambda o: spec(), {"gcp": provider}.__getitem__)
    assert e.value.exit_code == 3 and [a.outcome for a in e.value.attempts] == ["deleted"]
    assert len(gce.calls("instances.insert")) == 1 and not gce.instances


def test_vm_deleted_after_its_insert_finished_is_not_reported_created(gce, provider, spec, offer):
    """The cloud finishes the insert, then a delete starts: `up` must not print "created ... STOPPING"."""
    def stop_when_done(emu, key):
        target = emu._op_state[key]["target"]
        if emu._op_state[key]["polls"] == 1 and target in emu.instances:  # this poll finishes the insert
            emu.instances[target]["status"] = "PROVISIONING"
            emu._op_state[key]["then"] = "STOPPING"
    gce.polls_to_done = 1
    gce.on_poll = None
    s = spec()
    op = provider.submit(s, offer())  # as an `up` that was killed after the insert
    gce.set_status(s.name, "STOPPING")  # and a `down` began
    with pytest.raises(VanishedError, match="STOPPING"):
        provider._until_running(provider.gce.get("us-central1-a", s.name), "us-central1-a", 1e18)
    assert op is not None


def test_503_storm_on_operations_wait_leaves_one_vm_and_stops(gce, provider, spec, offer):
    gce.inject("unavailable_503", method="zoneOperations.wait", times=None)
    s = spec()
    with pytest.raises(ProvisionCloudError, match="may have left") as e:
        provision([offer(z) for z in ZONES], lambda o: s, {"gcp": provider}.__getitem__)
    err = e.value
    assert err.exit_code == 3 and f"trainvm down {s.name}" in (err.hint or "")
    assert "nothing was left behind" not in str(err)
    assert len(gce.calls("instances.insert")) == 1 and len(gce.instances) <= 1  # no second VM of that name


def test_delete_that_fails_n_times_then_succeeds_is_verified(gce, provider, spec, offer):
    gce.inject("stockout_op", zone="us-central1-a")
    gce.inject("unavailable_503", method="instances.delete", times=2)  # retried inside the call
    done = provision([offer(z) for z in ZONES[:2]], lambda o: spec(), {"gcp": provider}.__getitem__)
    record, attempts = done.record, done.attempts
    assert record.zone == "us-central1-b" and [a.outcome for a in attempts] == ["capacity", "created"]


def test_failed_delete_is_recorded_as_left_behind(gce, provider, spec, offer):
    gce.inject("op_never_done", zone="us-central1-a")
    gce.inject("unavailable_503", method="instances.delete", times=None)
    s = spec()
    provider.op_timeout = 0.3
    with pytest.raises(ProvisionCloudError) as e:
        provision([offer(z) for z in ZONES], lambda o: s, {"gcp": provider}.__getitem__)
    assert f"may have left {s.name} (us-central1-a)" in str(e.value)
    assert len(gce.calls("instances.insert")) == 1  # the next zone was not tried under the same name


def test_every_failed_attempt_checked_says_nothing_left(gce, provider, spec, offer):
    for z in ZONES:
        gce.inject("stockout_op", zone=z)
    with pytest.raises(ProvisionError, match="nothing was left behind \\(checked after every attempt\\)"):
        provision([offer(z) for z in ZONES], lambda o: spec(), {"gcp": provider}.__getitem__)
    assert not gce.instances


def test_wrong_project_is_an_error_not_not_found(gce, make_provider, spec):
    gce.projects = {"test-proj"}
    wrong = make_provider(project="tset-proj")
    with pytest.raises(AuthError, match="'tset-proj' does not exist or these credentials cannot see it") as e:
        wrong.find(spec().name)
    assert e.value.exit_code == 3
    with pytest.raises(AuthError, match="tset-proj"):
        wrong.delete(spec().name)


def test_right_project_still_finds_nothing(gce, make_provider, spec):
    gce.projects = {"test-proj"}
    assert make_provider().find(spec().name) is None and make_provider().delete(spec().name) is False


def test_silent_endpoint_fails_within_the_call_budget(gce, make_provider, spec):
    gce.inject("silent", method="aggregatedList", times=None, seconds=3)
    provider = make_provider(call_timeout=1.0)
    with pytest.raises(RetryExhaustedError, match="TRAINVM_API_TIMEOUT|after"):
        provider.find(spec().name)
    assert len(gce.calls("aggregatedList")) <= 2


def test_gce_wide_stockout_reaches_the_next_cloud_within_the_default_budget(gce, provider, spec, offer):
    from tests.fakes import FakeProvider

    zones = [f"us-west{i}-a" for i in range(1, 10)] + [f"europe-west{i}-b" for i in range(1, 10)] + \
            [f"asia-east{i}-c" for i in range(1, 20)]
    for z in zones:
        gce.inject("stockout_op", zone=z)
    gcp_offers = [offer(z) for z in zones]
    az = gcp_offers[0]
    az = type(az)(**{**{f: getattr(az, f) for f in az.__slots__}, "cloud": "azure", "region": "eastus", "zone": None,
                     "instance_type": "Standard_NC4as_T4_v3"})
    azure = FakeProvider("azure")
    done = provision(gcp_offers + [az], lambda o: spec(), {"gcp": provider, "azure": azure}.__getitem__, max_attempts=30)
    record, attempts = done.record, done.attempts
    assert record.cloud == "azure" and len(attempts) < 30
    assert [a.outcome for a in attempts[:-1]] == ["capacity"] * (len(attempts) - 1) and not gce.instances
