"""The ARM emulator's scale sets and proximity placement groups (tests/emulators/arm_vmss.py) refuse what ARM
refuses, driven through azure-mgmt-compute: each case sends the body trainvm sends with one thing changed."""

from __future__ import annotations

import copy

import pytest

from provisioner.providers.azure import group_request as G
from provisioner.providers.azure.request import ImageRef, names
from tests.azure.conftest import SSH_KEY, named

T4 = "Standard_NC4as_T4_v3"


@pytest.fixture
def made(emu, provider, t4_spec, offers):
    """A 2-node cluster (its group, network and PPG exist) and a valid body for another scale set beside it."""
    spec = named(t4_spec, t4_spec.name, nodes=2, compact=True)
    offer = offers[("eastus", T4)]
    provider.create(spec, offer)
    image = ImageRef("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "22.04.202610150")
    body = G.scale_set_body(spec, offer, subscription_id=emu.subscription_id, image=image, ssh_public_key=SSH_KEY,
                            placement_group=G.ppg_id(emu.subscription_id, spec.name))
    _, _, cc = emu.clients()
    return spec, body, cc


def put(cc, spec, body):
    return cc.virtual_machine_scale_sets.begin_create_or_update(names(spec.name).rg, "other", body).result()


def refused(cc, spec, body):
    from azure.core.exceptions import HttpResponseError

    with pytest.raises(HttpResponseError) as err:
        put(cc, spec, body)
    return err.value.status_code, err.value.error.code


def test_the_body_trainvm_sends_is_accepted(made):
    spec, body, cc = made
    vmss = put(cc, spec, body)
    assert vmss.sku.capacity == 2 and vmss.properties.provisioning_state == "Succeeded"


@pytest.mark.parametrize("change, expected", [
    (lambda b: b["properties"]["virtualMachineProfile"]["networkProfile"].update(networkApiVersion="2020-11-01"),
     (400, "InvalidParameter")),   # Flexible only
    (lambda b: b["properties"]["virtualMachineProfile"]["storageProfile"]["osDisk"].update(deleteOption="Delete"),
     (400, "InvalidParameter")),   # Flexible only
    (lambda b: b["sku"].update(capacity=101), (400, "InvalidParameter")),   # singlePlacementGroup caps at 100
    (lambda b: b["properties"].update(orchestrationMode="Flexible"), (400, "InvalidParameter")),
    (lambda b: b["properties"].update(proximityPlacementGroup={"id": b["properties"]["proximityPlacementGroup"]["id"]
                                                               + "x"}), (400, "InvalidResourceReference")),
    (lambda b: b["properties"]["virtualMachineProfile"]["osProfile"].update(computerName="x"),
     (400, "InvalidRequestContent")),   # a VM member, not a scale set's
    (lambda b: b["properties"]["virtualMachineProfile"]["osProfile"].pop("computerNamePrefix"), (400, "InvalidParameter")),
    (lambda b: b.pop("sku"), (400, "InvalidParameter")),
])
def test_what_arm_refuses(made, change, expected):
    spec, body, cc = made
    bad = copy.deepcopy(body)
    change(bad)
    assert refused(cc, spec, bad) == expected


def test_a_ppg_in_use_cannot_be_deleted(made):
    from azure.core.exceptions import HttpResponseError

    spec, _, cc = made
    with pytest.raises(HttpResponseError) as err:
        cc.proximity_placement_groups.delete(names(spec.name).rg, G.ppg_name(spec.name))
    assert err.value.status_code == 409
    ppg = cc.proximity_placement_groups.get(names(spec.name).rg, G.ppg_name(spec.name))
    assert [s.id.rsplit("/", 1)[1] for s in ppg.properties.virtual_machine_scale_sets] == [spec.name]


def test_a_partial_stock_out_leaves_what_was_allocated(emu, made):
    from azure.core.exceptions import HttpResponseError

    spec, body, cc = made
    body = copy.deepcopy(body)
    body["sku"]["capacity"] = 4
    emu.inject("partial_capacity_lro", location="eastus", created=3)
    with pytest.raises(HttpResponseError) as err:
        put(cc, spec, body)
    assert err.value.error.code == "AllocationFailed"
    vms = list(cc.virtual_machine_scale_set_vms.list(names(spec.name).rg, "other", expand="instanceView"))
    assert [v.properties.provisioning_state for v in vms] == ["Succeeded"] * 3 + ["Failed"]
    # the scale set stays (Failed) with its instances: nothing is rolled back for the caller
    assert cc.virtual_machine_scale_sets.get(names(spec.name).rg, "other").properties.provisioning_state == "Failed"
