"""A single Azure VM as the contract's ``InstanceRecord`` (a scale set's nodes: ``azure_group.node_records``), and
its ``stop`` / ``start`` (deallocate / start; what they bill: ``azure_power``)."""

from __future__ import annotations

from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi, props
from provisioner.providers.azure.arm import Arm, ImageReference
from provisioner.providers.azure.power import latest_start, vm_state
from provisioner.providers.base import ConflictError, InstanceRecord, costs_from_labels, price_from_labels
from provisioner.providers.store import PAYLOAD_LABEL


def image_urn(ref: ImageReference | None) -> str | None:
    """``publisher:offer:sku:version`` of a VM's imageReference (``exactVersion`` when ARM reports it)."""
    if not ref or not ref.get("publisher"):
        return None
    version = ref.get("exactVersion") or ref.get("version") or "latest"
    return f"{ref['publisher']}:{ref['offer']}:{ref['sku']}:{version}"


def group_of(vm: Arm) -> str:
    """The VM's resource group, from its id (``/subscriptions/S/resourceGroups/RG/...``)."""
    parts = (vm.get("id") or "").split("/")
    return parts[4] if len(parts) > 4 and parts[3].lower() == "resourcegroups" else R.names(vm.get("name") or "").rg


def vm_record(api: AzureApi, vm: Arm, *, notes: list[str] | None = None, existing: bool = False,
              ip: str | None = None) -> InstanceRecord:
    """The record of ``vm`` (its public IP read when not given)."""
    p, tags, name, rg = props(vm), vm.get("tags") or {}, vm.get("name") or "", group_of(vm)
    if ip is None:
        ip = api.ip(rg, name)
    storage = p.get("storageProfile") or {}
    return InstanceRecord(
        name=name, cloud="azure", region=vm.get("location") or "", zone=None,
        instance_type=(p.get("hardwareProfile") or {}).get("vmSize") or "", state=vm_state(p),
        profile=tags.get("trainvm-profile"), hash=tags.get("trainvm-hash"), price_hourly=price_from_labels(tags), **costs_from_labels(tags),
        created=p.get("timeCreated"), last_start=latest_start(p), last_start_is_latest=True, ip=ip or None, image=image_urn(storage.get("imageReference")),
        ssh_command=f"ssh {R.ADMIN_USER}@{ip}" if ip else None, ssh_user=R.ADMIN_USER, notes=tuple(notes or ()), adopted=existing,
        spot=p.get("priority") == "Spot", owner=tags.get("trainvm-owner"), cloud_id=vm.get("id"),
        payload=tags.get(PAYLOAD_LABEL))


def power(api: AzureApi, name: str, action: str, *, wait: bool = True) -> InstanceRecord | None:
    """Deallocate or start VM ``name``; the record after it (None when there is no such VM)."""
    n = R.names(name)
    vm = api.get_vm(n.rg, name)
    if vm is None:
        return None
    if (vm.get("tags") or {}).get("trainvm-managed") != "true":
        raise ConflictError(f"{name} in resource group {n.rg} is not managed by trainvm; not touching it")
    ops = api.clients().compute.virtual_machines
    begin = ops.begin_deallocate if action == "stop" else ops.begin_start
    poller = api.call(lambda: begin(n.rg, name))
    if wait:
        api.wait(poller, api.clock() + api.op_timeout, f"{'deallocating' if action == 'stop' else 'starting'} {name}")
    return vm_record(api, api.get_vm(n.rg, name) or vm)
