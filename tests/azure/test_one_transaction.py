"""One create transaction for 1..N nodes (issue 26, providers/azure/create.py): the hardening the single-VM path
had (the compute resource names its creator; ResourceGroupBeingDeleted stops at once; cleanup never deletes a group
holding another live `up`'s compute resource) now holds for a scale set too, and a VM and a scale set of one name
never share a group. Against the ARM emulator; what it does not model is said per test."""

from __future__ import annotations

import pytest

from provisioner.providers.azure.lease import LEASE, LEASE_UNTIL, GroupBeingDeletedError
from provisioner.providers.azure.request import names
from provisioner.providers.base import ConflictError
from tests.azure.conftest import named

A100 = "Standard_ND96asr_v4"
T4 = "Standard_NC4as_T4_v3"
VMSS = "/providers/Microsoft.Compute/virtualMachineScaleSets/"


def _cluster(spec):
    return named(spec, spec.name, nodes=2, compact=False)


def test_the_scale_set_names_its_creator_as_a_vm_does(emu, provider, t4_spec, offers):
    """Cleanup and racers read the creator on the compute resource itself (the group's lease is last-writer-wins)."""
    spec = _cluster(t4_spec)
    provider.create(spec, offers[("eastus", A100)])
    tags = emu.calls("PUT", VMSS)[0].body["tags"]
    group = emu.state.group(names(spec.name).rg)["tags"]
    assert tags[LEASE] == group[LEASE] and int(tags[LEASE_UNTIL]) > 0


def test_a_cluster_whose_group_is_being_deleted_stops_at_once(emu, provider, t4_spec, offers):
    """As for one VM: no PUT is sent into a group whose deletion runs, and no region can succeed."""
    spec = _cluster(t4_spec)
    emu.deleting_group(names(spec.name).rg, "eastus", {"trainvm-managed": "true"})
    with pytest.raises(GroupBeingDeletedError):
        provider.create(spec, offers[("eastus", A100)])
    assert not emu.calls("PUT", VMSS)


def test_a_cluster_whose_group_starts_deleting_before_its_put_stops_and_deletes_nothing(emu, provider, t4_spec,
                                                                                       offers):
    """The deletion (a racing cleanup or `down` that did not wait) begins after the check and before the group PUT:
    ARM answers that PUT 409 ResourceGroupBeingDeleted. As for one VM (before: the cluster path raised a plain
    conflict and its cleanup tried to delete the group again), the create stops at once and deletes nothing."""
    spec = _cluster(t4_spec)
    rg = names(spec.name).rg
    started = []

    def before(method, path, body=None):
        if method == "PUT" and path.lower().endswith(f"/resourcegroups/{rg}".lower()) and not started:
            started.append(emu.deleting_group(rg, "eastus", {"trainvm-managed": "true"}))
    emu.before_request = before
    with pytest.raises(GroupBeingDeletedError):
        provider.create(spec, offers[("eastus", A100)])
    assert started and not emu.calls("PUT", VMSS) and not emu.calls("DELETE", "/resourcegroups/")


def test_a_single_vm_never_goes_into_a_clusters_group(emu, provider, t4_spec, offers):
    """A cluster of that name exists: `up` of a one-node profile under the same name is a conflict naming it,
    writing nothing (before: it waited on the cluster's lease, then wrote a VM into the cluster's group)."""
    provider.create(_cluster(t4_spec), offers[("eastus", A100)])
    puts = len(emu.calls("PUT", "/"))
    single = named(t4_spec, t4_spec.name, labels={**t4_spec.labels, "trainvm-hash": "0" * 12})
    with pytest.raises(ConflictError, match="scale set"):
        provider.create(single, offers[("eastus", T4)])
    assert len(emu.calls("PUT", "/")) == puts


def test_a_cluster_never_goes_into_a_single_vms_group(emu, provider, t4_spec, offers):
    provider.create(t4_spec, offers[("eastus", T4)])
    puts = len(emu.calls("PUT", "/"))
    with pytest.raises(ConflictError, match="VM"):
        provider.create(_cluster(t4_spec), offers[("eastus", A100)])
    assert len(emu.calls("PUT", "/")) == puts


def test_cluster_cleanup_never_deletes_a_group_holding_another_live_ups_scale_set(emu, provider, t4_spec, offers):
    """A scale set another live `up` created (its attempt tag, a live lease) sits in the group when this attempt's
    create fails: the group is left to that `up`, as for a VM. (The interleaving is planted: the other `up`'s scale
    set is created first by a second provider, then its tags name a live foreign attempt.)"""
    from provisioner.providers.azure.provider import AzureProvider

    spec = _cluster(t4_spec)
    rg = names(spec.name).rg
    AzureProvider().create(spec, offers[("eastus", A100)])
    rec = emu.state.by_id(f"/subscriptions/{emu.subscription_id}/resourceGroups/{rg}{VMSS}{spec.name}")
    rec["body"]["tags"][LEASE] = "elsewhere:1:abcd"  # what the other `up`'s scale-set PUT wrote
    emu.state.group(rg)["tags"][LEASE] = "this-host:2:ef01"  # this attempt wrote the group last (last writer wins)
    note = provider.lease.cleanup(rg, spec, None, "this-host:2:ef01")
    assert note and "left to it" in note
    assert emu.resource_groups() == [rg]


def test_a_single_vm_is_still_a_plain_vm_without_cluster_fields(emu, provider, t4_spec, offers):
    """A group of one is a virtual machine called NAME (not a scale set of one): the portal, `az vm` and the
    `status`/`list` rows see it as before."""
    record = provider.create(t4_spec, offers[("eastus", T4)])
    assert not emu.calls("PUT", VMSS) and len(emu.calls("PUT", "/virtualMachines/")) == 1
    listed = provider.list()
    assert [r.name for r in listed] == [t4_spec.name] == [record.name]
    assert (listed[0].cluster, listed[0].rank, listed[0].nodes) == (None, None, 1) == (
        record.cluster, record.rank, record.nodes)


def test_a_vm_made_before_the_one_transaction_is_still_managed(emu, provider, t4_spec, offers):
    """A VM an earlier release made carries no attempt tags (planted: they are removed in the emulator's state):
    find, stop, start and delete still reach it, and a re-run adopts it instead of writing a second one."""
    provider.create(t4_spec, offers[("eastus", T4)])
    rg = names(t4_spec.name).rg
    rec = emu.state.by_id(f"/subscriptions/{emu.subscription_id}/resourceGroups/{rg}"
                          f"/providers/Microsoft.Compute/virtualMachines/{t4_spec.name}")
    for key in (LEASE, LEASE_UNTIL):
        rec["body"]["tags"].pop(key, None)
        emu.state.group(rg)["tags"].pop(key, None)
    assert provider.find(t4_spec.name).name == t4_spec.name
    again = provider.create(t4_spec, offers[("eastus", T4)])
    assert again.adopted and len(emu.calls("PUT", "/virtualMachines/")) == 1
    assert provider.stop(t4_spec.name).state == "DEALLOCATED"
    assert provider.start(t4_spec.name).state == "RUNNING"
    assert provider.delete(t4_spec.name) is True
    assert provider.find(t4_spec.name) is None and emu.resource_groups() == []
