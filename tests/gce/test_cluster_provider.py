"""GcpProvider's cluster half (providers/gcp/cluster.py) in the cases the contract suite cannot set up: a
concurrent `up` of the same cluster whose bulkInsert got in first (its nodes must never be deleted by the loser),
through google-cloud-compute against the GCE emulator with its group APIs. What the emulator does not model:
placement itself and the fabric (see tests/emulators/gce_group.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.providers.base import AttemptInProgressError
from provisioner.providers.gcp.cluster_request import node_body
from provisioner.providers.gcp.create import GceCreate
from provisioner.providers.gcp.provider import GcpProvider
from tests.contract.clouds_fake import a2_offer
from tests.contract.harness import spec_maker

PROJECT = "cluster-proj"
OFFER = a2_offer("us-central1-a")


@pytest.fixture
def emu():
    from tests.emulators.gce_group import GceGroupEmulator

    with GceGroupEmulator(seed=5) as e:
        e.polls_to_done = 1
        yield e


def _provider(emu) -> GcpProvider:
    return GcpProvider(endpoint=emu.url, project=PROJECT, retry_base_delay=0, poll_interval=0, op_timeout=60)


def test_the_loser_of_a_concurrent_create_leaves_the_winners_nodes(emu, monkeypatch) -> None:
    spec = replace(spec_maker("#!/bin/bash\n")(name="trainvm-race-0123abcd"), nodes=3, compact=False)
    winner, loser = _provider(emu), _provider(emu)
    checked = GceCreate._ensure_internal_rule

    def race(self, spec_, deadline, touched):  # the other `up` passed the same checks and is faster
        checked(self, spec_, deadline, touched)
        monkeypatch.setattr(GceCreate, "_ensure_internal_rule", checked)
        body = node_body(spec, OFFER, winner.image_for(spec), PROJECT)
        winner._clusters.group().create(spec.name, str(OFFER.zone), body, 3, compact=False)

    monkeypatch.setattr(GceCreate, "_ensure_internal_rule", race)
    with pytest.raises(AttemptInProgressError, match="another `trainvm up` is creating cluster") as err:
        loser.create(spec, OFFER)  # never a failover to another zone, where a second cluster would be billed
    assert err.value.exit_code == 5 and err.value.cleanup == "verified" and "left after" not in str(err.value)
    nodes = winner.cluster_nodes(spec.name)
    assert [n.rank for n in nodes] == [0, 1, 2] and {n.state for n in nodes} == {"RUNNING"}
    assert loser.create(spec, OFFER).adopted  # the re-run adopts the winner's cluster
    assert winner.delete(spec.name) is True and winner.cluster_nodes(spec.name) == []


def test_the_loser_of_a_concurrent_compact_create_stops_and_keeps_the_winners_policy(emu, monkeypatch) -> None:
    """As above with compact placement, the winner's whole create done first: the loser's policy insert is refused
    (409, the winner's policy of the cluster's name). The loser must stop with AttemptInProgressError (exit 5, no
    failover to another zone) and leave the winner's policy and nodes alone. On the old code: ConflictError, exit 1."""
    spec = replace(spec_maker("#!/bin/bash\n")(name="trainvm-race-0123abce"), nodes=2, compact=True)
    winner, loser = _provider(emu), _provider(emu)
    checked = GceCreate._ensure_internal_rule

    def race(self, spec_, deadline, touched):  # the other `up` passed the same checks and is faster
        checked(self, spec_, deadline, touched)
        monkeypatch.setattr(GceCreate, "_ensure_internal_rule", checked)
        winner.create(spec, OFFER)
    monkeypatch.setattr(GceCreate, "_ensure_internal_rule", race)
    with pytest.raises(AttemptInProgressError) as err:
        loser.create(spec, OFFER)
    assert err.value.exit_code == 5 and err.value.cleanup == "verified"
    nodes = winner.cluster_nodes(spec.name)
    assert [n.rank for n in nodes] == [0, 1] and {n.state for n in nodes} == {"RUNNING"}
    assert [k[2] for k in emu.policies] == [f"{spec.name}-compact"]  # the winner's policy is still there
    assert loser.create(spec, OFFER).adopted


def test_a_rerun_waits_for_nodes_still_in_flight_and_never_deletes_them(emu) -> None:
    """issue 26 (a single VM is a group of one): the single VM's adopt rule now holds for groups. A re-run that
    finds this profile's nodes still PROVISIONING (an interrupted or concurrent `up`) does not call the cluster
    ready: within the deadline it waits, after it AttemptInProgressError (exit 5, no failover), and the nodes stay.
    On the old code the group was "adopted" at once, still PROVISIONING. The emulator's nodes stay in the status
    set here (it does not move them on by itself)."""
    spec = replace(spec_maker("#!/bin/bash\n")(name="trainvm-inflight-0123abcd"), nodes=2, compact=False)
    first = _provider(emu)
    first.create(spec, OFFER)
    emu.set_status(f"{spec.name}-1", "PROVISIONING")
    rerun = GcpProvider(endpoint=emu.url, project=PROJECT, retry_base_delay=0, poll_interval=0, op_timeout=0.3)
    with pytest.raises(AttemptInProgressError, match=f"{spec.name}-1 in us-central1-a is still PROVISIONING") as err:
        rerun.create(spec, OFFER)
    assert err.value.exit_code == 5
    assert [n.name for n in first.cluster_nodes(spec.name)] == [f"{spec.name}-0", f"{spec.name}-1"]
    assert emu.calls("instances.delete") == []
    emu.set_status(f"{spec.name}-1", "RUNNING")
    assert rerun.create(spec, OFFER).adopted


def test_a_group_create_carries_no_cluster_marks_for_one_node(emu) -> None:
    """A group of one is today's single VM: named NAME (no -0), sent as one instances.insert with its requestId,
    no cluster labels, no node list, no placement policy, no internal rule."""
    spec = spec_maker("#!/bin/bash\n")(name="trainvm-one-0123abcd")
    rec = _provider(emu).create(spec, OFFER)
    assert rec.name == spec.name and rec.cluster is None and rec.rank is None
    inst = emu.instance(spec.name)
    assert not {"trainvm-cluster", "trainvm-nodes", "trainvm-rank"} & set(inst["labels"])
    assert not any(i["key"].startswith("trainvm-cluster") for i in inst["metadata"]["items"])
    assert emu.calls("bulkInsert") == [] and len(emu.calls("instances.insert")) == 1
    assert emu.calls("instances.insert")[0].query.get("requestId")
    assert not emu.policies and emu.calls("firewalls.insert") == []


def test_bulkinsert_carries_a_request_id_and_a_stale_replay_is_sent_again(emu) -> None:
    """issue 26: the single VM's requestId hardening holds for groups. The bulkInsert carries the requestId derived
    from name + hash + offer (a retried request gets GCE's original operation, never a 409 against its own nodes).
    `up`, `down`, `up` again of the same cluster: GCE answers the second bulkInsert with the first one's finished
    operation, whose nodes are gone; the create sees the stale replay and sends again with a new id."""
    spec = replace(spec_maker("#!/bin/bash\n")(name="trainvm-replay-0123abcd"), nodes=2, compact=True)
    provider = _provider(emu)
    provider.create(spec, OFFER)
    assert provider.delete(spec.name) is True and provider.cluster_nodes(spec.name) == []
    rec = provider.create(spec, OFFER)
    assert not rec.adopted and [n.name for n in provider.cluster_nodes(spec.name)] == [f"{spec.name}-0", f"{spec.name}-1"]
    ids = [c.query.get("requestId") for c in emu.calls("bulkInsert")]
    assert len(ids) == 3 and ids[0] and ids[0] == ids[1] and ids[2] not in (None, ids[0])


@pytest.mark.parametrize(("kind", "method"), [
    ("rate_403", "instances.bulkInsert"),  # an 11th bulk operation running in the project (gce_faults.py cites it)
    ("unavailable_503", "instances.bulkInsert"),
    ("rate_429", "resourcePolicies.insert"),
    ("unavailable_503", "instances.setMetadata"),
    ("rate_403", "instances.setLabels"),
    ("unavailable_503", "zoneOperations.wait"),
])
def test_a_transient_answer_to_a_group_engine_call_is_retried(emu, kind, method) -> None:
    """issue 37: the group engine's calls go through ``GceApi.call`` as a single VM's do: one 403 rateLimitExceeded
    (GCE's answer to more than 10 bulk operations at once), 429 or 503 is sent again, not the end of the create (on
    the old code: RetryExhaustedError / the SDK's exception, and the cluster cleaned up)."""
    spec = replace(spec_maker("#!/bin/bash\n")(name="trainvm-retry-0123abcd"), nodes=2, compact=True)
    provider = _provider(emu)
    emu.inject(kind, method=method)
    provider.create(spec, OFFER)
    nodes = provider.cluster_nodes(spec.name)
    assert [n.rank for n in nodes] == [0, 1] and {n.state for n in nodes} == {"RUNNING"}
    assert emu.faults == []  # the fault was answered (and the call sent again)
    if method == "instances.bulkInsert":  # the same requestId both times: GCE would answer the first's operation
        sent = emu.calls("instances.bulkInsert")
        assert len(sent) == 2 and len({r.query.get("requestId") for r in sent}) == 1
    assert provider.delete(spec.name) is True
