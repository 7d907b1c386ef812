"""Two `up` of one name on GCE, through google-cloud-compute against the emulator: an `up` that finds the VM (or
a cluster's nodes) being created by another `up` never fails over to another zone, where GCE would accept a
second VM of the same name (instance names are unique per zone only). It waits, bounded, and then stops with
AttemptInProgressError (exit 5), leaving the other `up`'s VM alone.

The other `up` is an insert whose operation never finishes (``op_never_done``): the same thing, as GCE shows it,
as an `up` still waiting for its VM. Not modelled: two processes; GCE's own PROVISIONING duration.
"""

from __future__ import annotations

import pytest

from provisioner.errors import EXIT_NOT_READY, TrainvmError
from provisioner.provision.failover import provision

ZONES = ["us-central1-a", "us-central1-b"]


def test_loser_that_times_out_on_a_vm_being_created_stops_instead_of_failing_over(gce, make_provider, spec, offer):
    s = spec()
    gce.inject("op_never_done", zone=ZONES[0], times=None)
    make_provider().submit(s, offer(ZONES[0]))  # the other `up`: its insert was accepted, the VM is PROVISIONING
    assert [i["status"] for i in gce.instances.values()] == ["PROVISIONING"]
    attempts = []
    try:
        with pytest.raises(TrainvmError) as err:  # before the fix: a second VM of that name in us-central1-b
            provision([offer(z) for z in ZONES], lambda o: s, {"gcp": make_provider(op_timeout=0.3)}.__getitem__,
                      attempts.append)
    finally:
        print("failover log:", *(f"  {i}. {a.render()}" for i, a in enumerate(attempts, 1)), sep="\n")
    e = err.value
    assert e.exit_code == EXIT_NOT_READY
    assert "still PROVISIONING" in str(e) and "another `trainvm up`" in str(e) and "not trying other offers" in str(e)
    assert f"trainvm status {s.name}" in e.hint and f"trainvm down {s.name}" in e.hint
    assert [a.outcome for a in attempts] == ["in-progress"]
    assert [i["zone"].rsplit("/", 1)[-1] for i in gce.instances.values()] == [ZONES[0]]  # one VM, the other `up`'s
    assert not gce.calls("instances.delete")  # never deleted under the other `up`


def test_rerun_that_times_out_on_its_own_pending_vm_stops_with_exit_5(gce, make_provider, spec, offer):
    """A re-run of an interrupted `up` (no live owner on GCE can be told apart from one) that times out waiting:
    the VM stays, the error says what to do; it is not "the cloud refused the request"."""
    s = spec()
    gce.inject("op_never_done", zone=ZONES[0], times=None)
    make_provider().submit(s, offer(ZONES[0]))
    from provisioner.providers.base import AttemptInProgressError

    with pytest.raises(AttemptInProgressError) as err:
        make_provider(op_timeout=0.3).create(s, offer(ZONES[0]))
    assert err.value.exit_code == EXIT_NOT_READY and err.value.cleanup == "verified"
    assert len(gce.instances) == 1 and not gce.calls("instances.delete")
