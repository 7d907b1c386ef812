"""Two concurrent `up` of one profile on Azure (issue 19), with the interleavings forced by the ARM emulator's
request hooks (before_request holds a request until another has arrived or been answered), so that each race
happens every time instead of 1 run in 5 under load.

The group's lease tag is last-writer-wins (ARM has no conditional write), so both attempts can pass their lease
check. What decides is the VM PUT: ARM refuses a PUT on a VM whose create is still running (409 Conflict, the
emulator's answer; it does not model Compute's other answer, accepting the second PUT and failing the first
operation with OperationPreempted). Not modelled either: two separate processes (both attempts run in threads
of one process, so a lease's pid check always finds its owner alive, as it would for two live processes).
"""

from __future__ import annotations

import threading

import pytest

from provisioner.providers.azure.provider import AzureProvider
from provisioner.providers.azure.request import names
from provisioner.provision.failover import provision
from tests.azure.conftest import named

T4 = "Standard_NC4as_T4_v3"
A100 = "Standard_ND96asr_v4"
VMSS = "/providers/Microsoft.Compute/virtualMachineScaleSets/"
REGIONS = ("eastus", "eastus2", "westus2")
HOLD = 30  # seconds a held request waits at most (a broken interleaving fails the test, it does not hang)


class Gate:
    """One step of an interleaving: set() releases whoever waits on it; wait() records whether that happened."""

    def __init__(self) -> None:
        self.event, self.timed_out = threading.Event(), False

    def set(self) -> None:
        self.event.set()

    def wait(self) -> None:
        if not self.event.wait(HOLD):
            self.timed_out = True


def _is_group_put(method, path, rg):
    return method == "PUT" and path.lower().endswith(f"/resourcegroups/{rg}".lower())


def _is_vm_put(method, path):
    return method == "PUT" and "/virtualmachines/" in path.lower() and path.lower().count("/") == 8


def _up(provider, spec, offers, results, i):
    """`trainvm up` (the failover walk over three regions) in a thread; its record or error lands in results[i]."""
    chain = [offers[(r, T4)] for r in REGIONS]

    def up():
        try:
            results[i] = provision(chain, lambda o: spec, lambda cloud: provider).record
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            results[i] = exc
    t = threading.Thread(target=up)
    t.start()
    return t


def _vms(emu):
    return [r for r in emu.state.res.values() if r["type"] == "Microsoft.Compute/virtualMachines"]


def test_vm_put_refused_by_a_racing_up_adopts_its_vm(emu, t4_spec, offers):
    """The interleaving that failed 1 CI run in 5: both `up` read "no group"; A writes the group and passes its
    lease check; B then writes the group (its lease now) and its VM PUT reaches ARM first; A's VM PUT gets 409
    Conflict. Before the fix A failed ("azure refused the request", exit 3) although B's VM was being created;
    now A joins B's VM: both exit 0 with the one VM, A's record says adopted."""
    rg = names(t4_spec.name).rg
    emu.polls = 3
    second_group_put, a_vm_put, b_vm_answered = Gate(), Gate(), Gate()
    seen: dict[str, list] = {"group": [], "vm": []}
    lock = threading.Lock()

    def before(method, path, body=None):
        if _is_group_put(method, path, rg):
            with lock:
                seen["group"].append((body.get("tags") or {}).get("trainvm-attempt"))
                first = len(seen["group"]) == 1
                second = len(seen["group"]) == 2
            if first:  # A: waits until B has read "no group" too (B's group PUT is here)
                second_group_put.wait()
            elif second:  # B: its group PUT waits until A has passed its lease check and sent its VM PUT
                second_group_put.set()
                a_vm_put.wait()
        elif _is_vm_put(method, path):
            with lock:
                seen["vm"].append(path)
                first = len(seen["vm"]) == 1
            if first:  # A's VM PUT: held until ARM has accepted B's
                a_vm_put.set()
                b_vm_answered.wait()

    def after(method, path, body, status):
        with lock:
            b = _is_vm_put(method, path) and len(seen["vm"]) >= 2
        if b and status in (200, 201):
            b_vm_answered.set()
    emu.before_request, emu.after_request = before, after
    results: dict[int, object] = {}
    for t in [_up(AzureProvider(), t4_spec, offers, results, i) for i in range(2)]:
        t.join(120)
    assert not any(g.timed_out for g in (second_group_put, a_vm_put, b_vm_answered))  # the interleaving happened
    vm_puts = emu.calls("PUT", "/virtualMachines/")
    assert [c.status for c in vm_puts][:2] == [201, 409]  # B's accepted, A's refused: the race was real
    assert len(results) == 2 and all(not isinstance(r, Exception) for r in results.values()), results
    assert sorted(r.adopted for r in results.values()) == [False, True]
    adopted = next(r for r in results.values() if r.adopted)
    assert any("created by another `trainvm up`" in note for note in adopted.notes)
    assert len(_vms(emu)) == 1 and emu.resource_groups() == [rg]
    assert not emu.calls("DELETE", "/resourcegroups/")


def test_loser_cleanup_never_deletes_the_winners_group(emu, t4_spec, offers):
    """Both `up` read "no group"; B writes the group first and its VM PUT is accepted (and stays Creating); only
    then does A write the group, so A holds the lease. A gives up waiting (its operation timeout). Before the fix
    A, as the lease holder, retried its VM PUT into the 409 until its deadline and then its cleanup deleted the
    group with B's VM in it (B's create then failed as if someone ran `down`: zero VMs). Now A's cleanup sees
    that the VM names B as its creator and leaves the group: B's VM finishes, one VM, no group deletion."""
    rg = names(t4_spec.name).rg
    emu.inject("lro_never_done", location="eastus")  # B's VM (the first PUT ARM accepts) stays Creating
    b_group_put, second_group_put, b_vm_answered = Gate(), Gate(), Gate()
    seen: list = []
    lock = threading.Lock()

    def before(method, path, body=None):
        if _is_group_put(method, path, rg):
            with lock:
                seen.append(path)
                n = len(seen)
            if n == 1:  # B: waits until A (started only now) has read "no group" too
                b_group_put.set()
                second_group_put.wait()
            elif n == 2:  # A: its group PUT (the last write: A's lease) only once B's VM PUT was accepted
                second_group_put.set()
                b_vm_answered.wait()

    def after(method, path, body, status):
        if _is_vm_put(method, path) and status in (200, 201):
            b_vm_answered.set()
    emu.before_request, emu.after_request = before, after
    results: dict[str, object] = {}
    b = _up(AzureProvider(), t4_spec, offers, results, "B")
    b_group_put.wait()
    a = _up(AzureProvider(op_timeout=1.5), t4_spec, offers, results, "A")
    a.join(120)  # A ends first (it gives up while B's VM is still Creating)
    assert not any(g.timed_out for g in (b_group_put, second_group_put, b_vm_answered))
    group_tags = emu.state.group(rg)["tags"]
    vm_tags = _vms(emu)[0]["body"]["tags"]
    assert group_tags["trainvm-attempt"] != vm_tags["trainvm-attempt"]  # A holds the lease, B created the VM
    assert not emu.calls("DELETE", "/resourcegroups/"), "A's cleanup deleted B's group"
    emu.finish_operations(stuck=True)  # B's VM finishes
    b.join(120)
    assert not isinstance(results["B"], Exception), results  # B: the VM
    assert results["B"].state == "RUNNING" and not results["B"].adopted
    assert len(_vms(emu)) == 1 and emu.resource_groups() == [rg]


# ------------------------------------------------------------------ a loser never fails over beside a live winner
def _gce_t4_offer():
    from provisioner.catalog.storage import load_catalog

    return next(o for o in load_catalog().offers if o.cloud == "gcp" and o.instance_type == "n1-standard-8"
                and o.gpu_name == "T4" and o.gpu_count == 1 and o.zone == "us-central1-a")


def _log(attempts):
    print("failover log:", *(f"  {i}. {a.render()}" for i, a in enumerate(attempts, 1)), sep="\n")


def _winner_in_thread(results, spec, chain, provider=None):
    """The other `up` (the failover walk over ``chain``) in a thread: its record or error lands in results["A"]."""
    def up():
        try:
            results["A"] = provision(chain, lambda o: spec, lambda cloud: provider or AzureProvider()).record
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            results["A"] = exc
    t = threading.Thread(target=up)
    t.start()
    return t


@pytest.mark.parametrize("winner_at", ["vm-creating", "lease-only"])
def test_loser_that_times_out_on_a_live_winner_stops_instead_of_failing_over(emu, t4_spec, offers, winner_at):
    """A live `up` (A) is creating the VM in eastus: its VM stays Creating ("vm-creating"), or A holds the group's
    lease and its VM PUT has not reached ARM yet ("lease-only": held by the emulator). The loser (B) walks
    eastus, then a GCE zone. B waits its operation timeout for A and must then stop (exit 5, naming A, saying what
    to do). Before the fix B failed over to GCE and created a second, billed VM of the same name there."""
    from provisioner.errors import EXIT_NOT_READY, TrainvmError
    from provisioner.providers.gcp.provider import GcpProvider
    from tests.emulators.gce import GceEmulator

    rg = names(t4_spec.name).rg
    a_vm_put, b_done = Gate(), Gate()
    if winner_at == "vm-creating":
        emu.inject("lro_never_done", location="eastus")

    def before(method, path, body=None):
        if winner_at == "lease-only" and _is_vm_put(method, path):
            a_vm_put.set()
            b_done.wait()  # A's VM PUT reaches ARM only once B has given up

    def after(method, path, body, status):
        if winner_at == "vm-creating" and _is_vm_put(method, path) and status in (200, 201):
            a_vm_put.set()
    emu.before_request, emu.after_request = before, after
    results: dict[str, object] = {}
    a = _winner_in_thread(results, t4_spec, [offers[("eastus", T4)]])
    attempts: list = []
    with GceEmulator(seed=7) as gce:
        try:
            a_vm_put.wait()
            gcp = GcpProvider(endpoint=gce.url, project="test-proj", retry_base_delay=0, poll_interval=0, op_timeout=5)
            clouds = {"azure": AzureProvider(op_timeout=1.0), "gcp": gcp}
            with pytest.raises(TrainvmError) as err:  # before the fix: B's VM on GCE, no error
                provision([offers[("eastus", T4)], _gce_t4_offer()], lambda o: t4_spec, clouds.__getitem__,
                          attempts.append)
        finally:
            b_done.set()
            _log(attempts)
            emu.finish_operations(stuck=True)
            a.join(120)
        assert not gce.instances, "a second VM of that name was created on GCE"
    e = err.value
    assert e.exit_code == EXIT_NOT_READY and not a_vm_put.timed_out
    other = emu.state.group(rg)["tags"]["trainvm-attempt"]
    assert f"another `trainvm up` ({other}) is still creating {t4_spec.name}" in str(e)
    assert "not trying other offers" in str(e) and f"trainvm down {t4_spec.name}" in e.hint
    assert [x.outcome for x in attempts] == ["in-progress"]
    assert not isinstance(results["A"], Exception), results  # A's VM: untouched by B
    assert len(_vms(emu)) == 1 and emu.resource_groups() == [rg] and not emu.calls("DELETE", "/resourcegroups/")


def test_winner_that_fails_after_the_loser_joined_it_is_reported_not_adopted(emu, t4_spec, offers):
    """A's VM PUT in eastus is accepted; B (started now) finds A's VM Creating and joins it; only then does A's VM
    fail (AllocationFailed: the emulator holds A's operation polls until B has read the VM). A cleans up and goes
    on to eastus2. B must report A's failure (exit 5, naming A), never a VM, and write nothing: no group, no
    network, no VM of its own, in eastus or elsewhere. Exactly one VM remains: A's, in eastus2."""
    from provisioner.errors import EXIT_NOT_READY, TrainvmError

    rg = names(t4_spec.name).rg
    emu.polls = 2
    emu.inject("allocation_failed_lro", location="eastus")
    a_vm_put, b_joined = Gate(), Gate()
    writers: list = []
    lock = threading.Lock()

    def before(method, path, body=None):
        if method == "PUT" and isinstance(body, dict):
            with lock:
                writers.append((path, (body.get("tags") or {}).get("trainvm-attempt")))
        if method == "GET" and "/operations/" in path.lower() and a_vm_put.event.is_set():
            b_joined.wait()  # A's VM operation advances only once B has joined (read A's VM, Creating)

    def after(method, path, body, status):
        if _is_vm_put(method, path) and status in (200, 201):
            a_vm_put.set()
        if method == "GET" and "/virtualmachines/" in path.lower() and path.count("/") == 8 and status == 200:
            b_joined.set()
    emu.before_request, emu.after_request = before, after
    results: dict[str, object] = {}
    chain = [offers[(r, T4)] for r in REGIONS]
    a = _winner_in_thread(results, t4_spec, chain)
    a_vm_put.wait()
    attempts: list = []
    try:
        with pytest.raises(TrainvmError) as err:  # before the fix: B created its own VM in eastus, or adopted A's
            provision(chain, lambda o: t4_spec, lambda cloud: AzureProvider(), attempts.append)
    finally:
        _log(attempts)
        b_joined.set()
        a.join(120)
    assert not a_vm_put.timed_out and not b_joined.timed_out
    e = err.value
    vm_writers = [t for p, t in writers if "/virtualmachines/" in p.lower()]
    group_writers = {t for p, t in writers if p.lower().endswith(f"/resourcegroups/{rg}".lower())}
    a_attempt = vm_writers[0]
    assert e.exit_code == EXIT_NOT_READY, e
    assert f"another `trainvm up` ({a_attempt}) was creating {t4_spec.name}" in str(e) and "Failed" in str(e)
    assert [x.outcome for x in attempts] == ["in-progress"]
    # B wrote nothing anywhere: the VM PUTs are A's two (eastus, eastus2), and every group write is theirs
    assert len(vm_writers) == 2 and group_writers == set(vm_writers), writers
    assert not isinstance(results["A"], Exception), results
    assert results["A"].region == "eastus2" and not results["A"].adopted
    vms = _vms(emu)
    assert len(vms) == 1 and emu.resource_groups() == [rg] and emu.state.group(rg)["location"] == "eastus2"


# ------------------------------------------------------------------ a second cluster `up` under a live lease joins
def _hold_scale_set_put(emu, rg, release):
    """Hold the first scale-set PUT (the winner's) until ``release`` is set; returns the gate set when it arrives."""
    arrived = Gate()

    def before(method, path, body=None):
        if method == "PUT" and VMSS in path and path.count("/") == 8 and not arrived.event.is_set():
            arrived.set()
            release.wait()
    emu.before_request = before
    return arrived


def test_second_cluster_up_under_a_live_lease_joins_the_cluster(emu, t4_spec, offers):
    """A (a live `up` of a 2-node cluster) holds the group's lease; its scale-set PUT is held until B has looked at
    the group. Before the fix B stopped at once (AttemptInProgress, a RetryExhaustedError: failover went on to the
    next region). Now B joins: it waits, writes nothing, and returns A's cluster (adopted, naming A)."""
    spec = named(t4_spec, t4_spec.name, nodes=2, compact=True)
    rg = names(spec.name).rg
    release = Gate()
    arrived = _hold_scale_set_put(emu, rg, release)
    results: dict[str, object] = {}
    chain = [offers[(r, A100)] for r in ("eastus", "westus2")]
    a = _winner_in_thread(results, spec, chain[:1])
    arrived.wait()
    b_looked = Gate()

    def after(method, path, body, status):
        if method == "GET" and path.lower().endswith(f"/resourcegroups/{rg}".lower()) and arrived.event.is_set():
            b_looked.set()
            release.set()
    emu.after_request = after
    attempts: list = []
    try:
        result = provision(chain, lambda o: spec, lambda cloud: AzureProvider(), attempts.append)
    finally:
        release.set()
        _log(attempts)
        a.join(120)
    assert not arrived.timed_out and not b_looked.timed_out
    assert not isinstance(results["A"], Exception), results
    other = emu.state.group(rg)["tags"]["trainvm-attempt"]
    assert result.record.adopted and result.record.cluster == spec.name and result.record.region == "eastus"
    assert any(f"created by another `trainvm up` ({other})" in note for note in result.record.notes)
    assert [x.outcome for x in attempts] == ["created"]
    assert len(emu.calls("PUT", VMSS + spec.name + "$")) <= 1 and emu.resource_groups() == [rg]
    assert len([c for c in emu.calls("PUT", "/resourcegroups/[^/]+$")]) == 1  # B wrote no group


def test_cluster_winner_that_fails_after_the_loser_joined_is_reported(emu, t4_spec, offers):
    """As above, but A's scale set fails (AllocationFailed after 1 of 2 nodes) once B is waiting on it: A cleans up
    and fails over to westus2; B reports A's failure (exit 5, naming A) and writes nothing."""
    from provisioner.errors import EXIT_NOT_READY, TrainvmError

    spec = named(t4_spec, t4_spec.name, nodes=2, compact=True)
    rg = names(spec.name).rg
    emu.inject("partial_capacity_lro", location="eastus", created=1)
    release = Gate()
    arrived = _hold_scale_set_put(emu, rg, release)
    results: dict[str, object] = {}
    chain = [offers[(r, A100)] for r in ("eastus", "westus2")]
    a = _winner_in_thread(results, spec, chain)
    arrived.wait()

    def after(method, path, body, status):
        if method == "GET" and path.lower().endswith(f"/resourcegroups/{rg}".lower()) and arrived.event.is_set():
            release.set()
    emu.after_request = after
    attempts: list = []
    try:
        with pytest.raises(TrainvmError) as err:
            provision(chain, lambda o: spec, lambda cloud: AzureProvider(), attempts.append)
    finally:
        release.set()
        _log(attempts)
        a.join(120)
    e = err.value
    assert e.exit_code == EXIT_NOT_READY and "another `trainvm up`" in str(e), e
    assert [x.outcome for x in attempts] == ["in-progress"]
    assert not isinstance(results["A"], Exception), results
    assert results["A"].region == "westus2"
    assert emu.resource_groups() == [rg] and emu.state.group(rg)["location"] == "westus2"


def _is_scale_set_put(method, path):
    return method == "PUT" and VMSS.lower() in path.lower() and path.count("/") == 8


def test_scale_set_put_refused_by_a_racing_cluster_up_joins_its_cluster(emu, t4_spec, offers):
    """The first interleaving above for a 2-node cluster (one transaction since issue 26): both `up` read "no
    group"; A writes the group and passes its lease check; B writes the group (its lease now) and its scale-set PUT
    reaches ARM first; A's scale-set PUT gets 409 Conflict. Before, the cluster path failed A with that Conflict
    (its cleanup left B's group, but A's `up` failed although B's cluster was being made); now A joins B's scale set
    as a VM's create joins a VM: both return the one cluster, A's record adopted and naming B."""
    spec = named(t4_spec, t4_spec.name, nodes=2, compact=False)
    rg = names(spec.name).rg
    emu.polls = 3
    second_group_put, a_put, b_answered = Gate(), Gate(), Gate()
    seen: dict[str, list] = {"group": [], "vmss": []}
    lock = threading.Lock()

    def before(method, path, body=None):
        if _is_group_put(method, path, rg):
            with lock:
                seen["group"].append(1)
                first, second = len(seen["group"]) == 1, len(seen["group"]) == 2
            if first:
                second_group_put.wait()
            elif second:
                second_group_put.set()
                a_put.wait()
        elif _is_scale_set_put(method, path):
            with lock:
                seen["vmss"].append(path)
                first = len(seen["vmss"]) == 1
            if first:
                a_put.set()
                b_answered.wait()

    def after(method, path, body, status):
        with lock:
            b = _is_scale_set_put(method, path) and len(seen["vmss"]) >= 2
        if b and status in (200, 201):
            b_answered.set()
    emu.before_request, emu.after_request = before, after
    results: dict[int, object] = {}
    chain = [offers[(r, T4)] for r in REGIONS]

    def up(i):
        try:
            results[i] = provision(chain, lambda o: spec, lambda cloud: AzureProvider()).record
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            results[i] = exc
    threads = [threading.Thread(target=up, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(g.timed_out for g in (second_group_put, a_put, b_answered))  # the interleaving happened
    assert [c.status for c in emu.calls("PUT", VMSS + spec.name + "$")][:2] == [201, 409]
    assert len(results) == 2 and all(not isinstance(r, Exception) for r in results.values()), results
    assert sorted(r.adopted for r in results.values()) == [False, True]
    assert all(r.cluster == spec.name and r.rank == 0 for r in results.values())
    adopted = next(r for r in results.values() if r.adopted)
    assert any("created by another `trainvm up`" in note for note in adopted.notes)
    assert emu.resource_groups() == [rg] and not emu.calls("DELETE", "/resourcegroups/")
