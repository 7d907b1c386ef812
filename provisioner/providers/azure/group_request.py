"""The Azure cluster requests (hardware.nodes > 1) as plain ARM JSON, built without any cloud SDK.

A cluster lives in the same per-VM resource group a single VM would (``trainvm-<NAME>``, same lease and
ownership, providers/azure/lease.py), with the same VNet and NSG, plus:
- a proximity placement group ``<NAME>-ppg`` (``proximityPlacementGroupType: Standard``) when the plan asks
  for compact placement; ARM creates it synchronously;
- one Virtual Machine Scale Set ``<NAME>``: Uniform orchestration (InfiniBand partition keys are shared only
  within one scale set or availability set; Flexible's IB behaviour is unverified), ``sku.capacity`` = N,
  ``singlePlacementGroup: true`` (required for InfiniBand; caps the set at 100 VMs),
  ``overprovision: false`` (overprovisioning would create and delete extra GPU VMs, spending quota),
  ``platformFaultDomainCount: 1`` (the GPU/HPC recipe: one fault domain keeps the nodes together),
  ``upgradePolicy.mode: Manual`` and the PPG reference. Its VM profile is the single-VM body
  (azure_request.vm_body: image, size, OS disk type/size, customData, userData with the resolved profile,
  SSH key, Trusted Launch, boot diagnostics, Spot) in the scale set's shapes: ``computerNamePrefix``
  instead of ``computerName``, no OS disk name and no ``deleteOption``/``networkApiVersion`` (Flexible-only
  members; a Uniform instance's disk and NIC go with the instance), and a per-instance Standard public IP.
  The NSG keeps Azure's default ``AllowVnetInBound`` rule (trainvm adds only the SSH rule), so all traffic
  between the nodes (NCCL, c10d on arbitrary ports) is allowed.
- tags: the single VM's labels plus ``trainvm-nodes`` (N); after the instances exist, the node list
  (providers/cluster_env.py ``node_list_metadata``: private IPs in rank order, ``trainvm-cluster``,
  ``trainvm-cluster-1``... within Azure's 256-character tag values) is added to the scale set's tags, which
  an instance's IMDS ``compute/tags`` is believed to show (unverified against a live subscription; per-instance
  tags cannot be written on Uniform instances).
Ranks follow the instance ids (numerically); node ``K`` is called ``<NAME>-K``.
"""

from __future__ import annotations

from provisioner.providers.azure import request as R
from provisioner.providers.azure.arm import Arm
from provisioner.providers.azure.bodies import Json, ScaleSetBody
from provisioner.providers.base import LaunchSpec
from provisioner.providers.offer import Offer

NODES_TAG = "trainvm-nodes"
PPG_SUFFIX = "-ppg"
#: Linux computerNamePrefix limit (ARM appends six base-36 characters per instance).
PREFIX_MAX = 58


def ppg_name(cluster: str) -> str:
    return f"{cluster}{PPG_SUFFIX}"


def ppg_id(subscription_id: str, cluster: str) -> str:
    return R.resource_id(subscription_id, R.names(cluster).rg, f"{R.COMPUTE}/proximityPlacementGroups", ppg_name(cluster))


def node_name(cluster: str, rank: int) -> str:
    return f"{cluster}-{rank}"


def cluster_tags(spec: LaunchSpec) -> dict[str, str]:
    return {**R.tags(spec), NODES_TAG: str(spec.nodes)}


def ppg_body(spec: LaunchSpec, location: str) -> Json:
    return {"location": location, "tags": cluster_tags(spec), "properties": {"proximityPlacementGroupType": "Standard"}}


def scale_set_body(spec: LaunchSpec, offer: Offer, *, subscription_id: str, image: R.ImageRef, ssh_public_key: str,
                   placement_group: str | None) -> ScaleSetBody:
    """The ``virtualMachineScaleSets`` PUT body for ``spec.nodes`` nodes of ``offer`` (``placement_group``: the
    PPG's id, or None without compact placement)."""
    vm = R.vm_body(spec, offer, subscription_id=subscription_id, image=image, ssh_public_key=ssh_public_key)
    p = vm["properties"]
    os_disk = {k: v for k, v in p["storageProfile"]["osDisk"].items() if k not in ("name", "deleteOption")}
    os_profile: Json = {k: v for k, v in p["osProfile"].items() if k != "computerName"}
    os_profile["computerNamePrefix"] = spec.name[:PREFIX_MAX]
    nic = p["networkProfile"]["networkInterfaceConfigurations"][0]
    ipc = nic["properties"]["ipConfigurations"][0]
    pip = ipc["properties"]["publicIPAddressConfiguration"]
    network = {"networkInterfaceConfigurations": [{"name": nic["name"], "properties": {
        "primary": True, "networkSecurityGroup": nic["properties"]["networkSecurityGroup"],
        "ipConfigurations": [{"name": ipc["name"], "properties": {
            "primary": True, "subnet": ipc["properties"]["subnet"],
            "publicIPAddressConfiguration": {"name": pip["name"], "sku": pip["sku"],
                                             "properties": {"publicIPAddressVersion": "IPv4"}}}}]}}]}
    profile: Json = {
        "osProfile": os_profile,
        "storageProfile": {"imageReference": p["storageProfile"]["imageReference"], "osDisk": os_disk},
        "networkProfile": network,
        "diagnosticsProfile": p["diagnosticsProfile"],
        "userData": p["userData"],
    }
    if "securityProfile" in p:
        profile["securityProfile"] = p["securityProfile"]
    if "priority" in p:
        profile["priority"] = p["priority"]
    if "evictionPolicy" in p:
        profile["evictionPolicy"] = p["evictionPolicy"]
    if "billingProfile" in p:
        profile["billingProfile"] = p["billingProfile"]
    props: Json = {
        "orchestrationMode": "Uniform", "upgradePolicy": {"mode": "Manual"}, "singlePlacementGroup": True,
        "overprovision": False, "platformFaultDomainCount": 1, "virtualMachineProfile": profile,
    }
    if placement_group:
        props["proximityPlacementGroup"] = {"id": placement_group}
    return {"location": offer.region, "tags": {**cluster_tags(spec), **vm["tags"]}, "identity": vm["identity"],
            "sku": {"name": offer.instance_type, "tier": "Standard", "capacity": spec.nodes}, "properties": props}


def rank_order(instances: list[Arm]) -> list[Arm]:
    """Scale-set instances (``virtual_machine_scale_set_vms.list`` JSON) in rank order: by numeric instance id."""
    return sorted(instances, key=lambda i: int(str(i.get("instanceId") or "0")))


def instance_of(resource_id: str) -> str | None:
    """The instance id in a scale-set NIC/IP configuration/public IP id (``.../virtualMachines/ID/...``)."""
    parts = resource_id.split("/")
    low = [x.lower() for x in parts]
    return parts[low.index("virtualmachines") + 1] if "virtualmachines" in low[:-1] else None


def preview(spec: LaunchSpec, offer: Offer, subscription_id: str, image: R.ImageRef) -> Json:
    """The cluster's resources in ``request_preview`` (``render``/``plan``): the PPG and the scale set instead of
    one VM (the rest is the single VM's: group, VNet, NSG, role assignment)."""
    out: Json = {}
    placement = None
    if spec.compact:
        out[f"{R.COMPUTE}/proximityPlacementGroups"] = {"name": ppg_name(spec.name), "body": ppg_body(spec, offer.region)}
        placement = ppg_id(subscription_id, spec.name)
    out[f"{R.COMPUTE}/virtualMachineScaleSets"] = {"name": spec.name, "body": scale_set_body(
        spec, offer, subscription_id=subscription_id, image=image, ssh_public_key=R.PREVIEW_SSH_KEY,
        placement_group=placement)}
    return out
