"""Issue 19 on Azure, through the real azure-mgmt SDKs against the ARM emulator: `down` during a pending
create is not undone, a failed group delete is recorded and stops failover, two concurrent `up` of one
profile end with exactly one VM, and a wrong subscription is an error, never "already gone"."""

from __future__ import annotations

import threading

import pytest

from provisioner.providers.azure.provider import AzureProvider
from provisioner.providers.azure.request import names
from provisioner.providers.base import AuthError, VanishedError
from provisioner.provision.failover import ProvisionCloudError, provision

T4 = "Standard_NC4as_T4_v3"
REGIONS = ("eastus", "eastus2", "westus2")


def run(provider, spec, offers):
    return provision(offers, lambda o: spec, lambda cloud: provider)


def test_down_during_pending_create_is_not_undone(emu, provider, t4_spec, offers):
    rg = names(t4_spec.name).rg
    emu.polls = 2

    def down(emu_, op):  # `trainvm down` deletes the group while the VM's create is pending
        if op.ns == "Microsoft.Compute" and rg.lower() in emu_.state.groups:
            emu_.state.delete_group_now(rg)
    emu.on_poll = down
    with pytest.raises(ProvisionCloudError, match="was deleted while `up` waited for it") as err:
        run(provider, t4_spec, [offers[(r, T4)] for r in REGIONS])
    assert [a.outcome for a in err.value.attempts] == ["deleted"] and err.value.exit_code == 3
    assert len(emu.calls("PUT", "/virtualMachines/")) == 1  # no failover to another region or a larger size
    assert emu.resource_groups() == []


def test_vanished_error_alone(emu, provider, t4_spec, offers):
    rg = names(t4_spec.name).rg
    emu.polls = 2
    emu.on_poll = lambda e, op: e.state.delete_group_now(rg) if op.ns == "Microsoft.Compute" else None
    with pytest.raises(VanishedError) as err:
        provider.create(t4_spec, offers[("eastus", T4)])
    assert err.value.cleanup == "verified"


def test_failed_group_delete_is_left_behind_and_stops(emu, t4_spec, offers):
    emu.inject("allocation_failed_lro", location="eastus")
    emu.inject("unavailable_503", method="DELETE", path="/resourcegroups/", times=None)
    provider = AzureProvider(retry_total=1)
    with pytest.raises(ProvisionCloudError) as err:
        run(provider, t4_spec, [offers[(r, T4)] for r in REGIONS])
    rg = names(t4_spec.name).rg
    assert f"may have left resource group {rg} behind" in str(err.value)
    assert f"trainvm down {t4_spec.name}" in err.value.hint and "nothing was left behind" not in str(err.value)
    assert len(emu.calls("PUT", "/virtualMachines/")) == 1  # the other regions were not tried under that name


def test_two_concurrent_up_end_with_one_vm(emu, t4_spec, offers):
    """Two `up` started together, interleaved by chance (the forced interleavings are in test_concurrent_up.py).
    Failed 1 of 5 fresh-clone CI runs before the VM named its creator (one `up` refused with 409 on its VM PUT)."""
    emu.polls = 3
    chain = [offers[(r, T4)] for r in REGIONS]
    results: dict[int, object] = {}
    started = threading.Barrier(2)

    def up(i):
        started.wait()
        try:
            results[i] = run(AzureProvider(), t4_spec, chain).record
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            results[i] = exc
    threads = [threading.Thread(target=up, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 2 and all(not isinstance(r, Exception) for r in results.values()), results
    assert {r.name for r in results.values()} == {t4_spec.name}
    vms = [r for r in emu.state.res.values() if r["type"] == "Microsoft.Compute/virtualMachines"]
    assert len(vms) == 1 and emu.resource_groups() == [names(t4_spec.name).rg]


# With a stock-out in the first region the lease holder's cleanup deletes the group (its own failed VM) while the
# other `up` waits on it: that one is lost (AttemptLost / OtherAttemptFailed), not "deleted by a `down`". It stops
# there (exit 5, naming the holder), instead of failing over beside the holder, which goes on to the next region.
@pytest.mark.parametrize("polls,stockout", [(1, False), (3, False), (1, True), (3, True)])
def test_two_up_that_both_create_the_group_end_with_one_vm(emu, t4_spec, offers, polls, stockout):
    """The window ARM leaves open (no conditional create of a resource group): both `up` read "no group", then
    both PUT it with their own lease. The emulator holds each of the two group PUTs until both have arrived, so
    the race happens every time, not by chance. Exactly one VM, both runs return it, nothing else is left."""
    import threading as th

    emu.polls = polls
    if stockout:  # the lease holder's VM fails in the first region: it cleans up, both go on to the next one
        emu.inject("allocation_failed_lro", location=REGIONS[0])
    rg = names(t4_spec.name).rg
    both_here, guard, held = th.Barrier(2, timeout=30), th.Lock(), []

    def before(method, path, body=None):
        if method == "PUT" and path.lower().endswith(f"/resourcegroups/{rg}".lower()):
            with guard:
                hold = len(held) < 2
                held.append(path)
            if hold:
                both_here.wait()
    emu.before_request = before
    chain = [offers[(r, T4)] for r in REGIONS]
    results: dict[int, object] = {}

    def up(i):
        try:
            results[i] = run(AzureProvider(), t4_spec, chain).record
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            results[i] = exc
    threads = [th.Thread(target=up, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(held) >= 2  # the race was forced: both PUT the group after both read "no group"
    assert len(results) == 2, results
    records = [r for r in results.values() if not isinstance(r, Exception)]
    stopped = [r for r in results.values() if isinstance(r, Exception)]
    if stockout:  # the holder failed over and made the VM; the other one stopped, naming it, and wrote no VM
        assert len(records) == 1 and len(stopped) == 1, results
        assert stopped[0].exit_code == 5 and "another `trainvm up`" in str(stopped[0]), stopped
        assert [a.outcome for a in stopped[0].attempts] == ["in-progress"]
        assert records[0].region == REGIONS[1]
    else:
        assert not stopped, results
    assert {r.name for r in records} == {t4_spec.name}
    vms = [r for r in emu.state.res.values() if r["type"] == "Microsoft.Compute/virtualMachines"]
    assert len(vms) == 1 and emu.resource_groups() == [rg]


def test_live_lease_of_another_process_is_never_deleted(emu, provider, t4_spec, offers):
    """A group another live `up` holds: this create waits for that VM instead of deleting the group."""
    import time
    rg = names(t4_spec.name).rg
    other = AzureProvider()
    emu.inject("lro_never_done", location="eastus")  # the other process's VM stays Creating
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", _try(other.create, t4_spec, offers[("eastus", T4)])))
    t.start()
    deadline = time.monotonic() + 10
    while not emu.calls("PUT", "/virtualMachines/") and time.monotonic() < deadline:
        time.sleep(0.02)
    mine = AzureProvider(op_timeout=0.5)
    with pytest.raises(Exception, match="other `trainvm up`"):
        mine.create(t4_spec, offers[("eastus", T4)])
    assert rg in emu.resource_groups()  # untouched
    emu.finish_operations(stuck=True)
    t.join(30)
    assert not isinstance(box["r"], Exception), box


def _try(fn, *a):
    try:
        return fn(*a)
    except Exception as exc:  # noqa: BLE001
        return exc


def test_wrong_subscription_is_an_error_naming_it(emu, monkeypatch, t4_spec, offers):
    wrong = "11111111-2222-3333-4444-555555555555"
    provider = AzureProvider(subscription_id=wrong)
    for call in (lambda: provider.find(t4_spec.name), lambda: provider.delete(t4_spec.name),
                 lambda: provider.create(t4_spec, offers[("eastus", T4)])):
        with pytest.raises(AuthError, match=wrong) as err:
            call()
        assert err.value.exit_code == 3 and err.value.code == "SubscriptionNotFound"
    assert emu.resource_groups() == []


def test_wrong_subscription_up_stops_at_once(emu, t4_spec, offers):
    provider = AzureProvider(subscription_id="11111111-2222-3333-4444-555555555555")
    with pytest.raises(ProvisionCloudError) as err:
        run(provider, t4_spec, [offers[(r, T4)] for r in REGIONS])
    assert len(err.value.attempts) == 1 and err.value.attempts[0].outcome == "auth"


def test_silent_endpoint_fails_within_the_call_budget(emu, monkeypatch, t4_spec):
    """Requests that get no answer: each read times out after half of TRAINVM_API_TIMEOUT, and the SDK's retries
    stop once the call has used TRAINVM_API_TIMEOUT (an error, exit 3; not minutes of waiting)."""
    from provisioner.providers.base import ProviderError

    monkeypatch.setenv("TRAINVM_API_TIMEOUT", "1")
    emu.silent = ("/resourcegroups/", 2)
    with pytest.raises(ProviderError) as err:
        AzureProvider(retry_total=10).find(t4_spec.name)
    assert err.value.exit_code == 3 and err.value.outcome == "retry-exhausted"
    assert len(emu.calls("GET", "/resourcegroups/")) <= 3
