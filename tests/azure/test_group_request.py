"""The Azure cluster request bodies (providers/azure/group_request.py), offline: what ``render`` shows and what
the scale-set PUT carries for a 4-node ND A100 v4 cluster."""

from __future__ import annotations

from provisioner.providers.azure import group_request as G
from provisioner.providers.azure.request import COMPUTE, request_preview
from tests.azure.conftest import named

A100 = "Standard_ND96asr_v4"


def test_render_shows_the_ppg_and_the_scale_set_instead_of_a_vm(t4_spec, offers):
    spec = named(t4_spec, t4_spec.name, nodes=4, compact=True)
    out = request_preview(spec, offers[("eastus", A100)])
    assert f"{COMPUTE}/virtualMachines" not in out
    ppg, vmss = out[f"{COMPUTE}/proximityPlacementGroups"], out[f"{COMPUTE}/virtualMachineScaleSets"]
    assert ppg["name"] == f"{spec.name}-ppg" and ppg["body"]["properties"] == {"proximityPlacementGroupType": "Standard"}
    body = vmss["body"]
    assert body["sku"] == {"name": A100, "tier": "Standard", "capacity": 4}
    assert body["properties"]["proximityPlacementGroup"]["id"].endswith(f"/proximityPlacementGroups/{spec.name}-ppg")
    assert body["tags"][G.NODES_TAG] == "4"


def test_one_scale_set_profile_from_the_single_vm_body(t4_spec, offers):
    spec = named(t4_spec, "trainvm-" + "x" * 70, nodes=2, compact=False)
    out = request_preview(spec, offers[("eastus", "Standard_NC4as_T4_v3")])
    body = out[f"{COMPUTE}/virtualMachineScaleSets"]["body"]
    assert "proximityPlacementGroup" not in body["properties"] and f"{COMPUTE}/proximityPlacementGroups" not in out
    vp = body["properties"]["virtualMachineProfile"]
    assert len(vp["osProfile"]["computerNamePrefix"]) == G.PREFIX_MAX and "computerName" not in vp["osProfile"]
    assert "name" not in vp["storageProfile"]["osDisk"] and "deleteOption" not in vp["storageProfile"]["osDisk"]
    assert "networkApiVersion" not in vp["networkProfile"]
    assert vp["securityProfile"]["securityType"] == "TrustedLaunch"  # the T4 size supports it; ND A100 v4 does not


def test_a_single_vm_preview_is_unchanged(t4_spec, offers):
    out = request_preview(t4_spec, offers[("eastus", "Standard_NC4as_T4_v3")])
    assert f"{COMPUTE}/virtualMachines" in out and f"{COMPUTE}/virtualMachineScaleSets" not in out


def test_rank_order_and_instance_ids():
    assert [i["instanceId"] for i in G.rank_order([{"instanceId": "10"}, {"instanceId": "2"}, {"instanceId": "0"}])] == \
        ["0", "2", "10"]
    assert G.instance_of("/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/c/"
                         "virtualMachines/7/networkInterfaces/n/ipConfigurations/i") == "7"
    assert G.instance_of("/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/networkInterfaces/n") is None
