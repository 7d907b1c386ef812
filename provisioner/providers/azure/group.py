"""The Azure group engine for clusters (hardware.nodes > 1): one Uniform Virtual Machine Scale Set of N nodes in a
proximity placement group, in the cluster's own resource group (bodies: azure_group_request).

Create is the one transaction of providers/azure/create.py (lease, network, join, adopt, verified cleanup, as for
one VM); the scale set is its compute step (providers/azure/compute.py): the PPG (compact placement) -> the scale
set (capacity N) -> its instances are read back: all N must be Succeeded (a scale set has no minimum count; a
failed PUT can leave some allocated, counted in the error) -> the node list (private IPs by rank) goes into the
scale set's tags (``write_node_list``; IMDS ``compute/tags``). Any failure deletes the whole resource group
(scale set, instances, NICs, IPs, PPG, network), awaited and checked gone; an allocation failure is a
CapacityError, so failover moves the whole group. This module reads: nodes, reports, console, power.

Nodes: ``NAME-K`` for rank K (instance ids in numeric order); each record carries cluster/rank/nodes, its
public IP and power state. ``find`` returns rank 0; ``stop``/``start`` deallocate/start the whole scale set;
``delete`` is the single-VM one (the group goes); ``console`` is rank 0's serial log. Reports: Run Command on each
instance (at most 16 at once).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from provisioner.providers import stack_report
from provisioner.providers.azure import group_request as G
from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi, wire
from provisioner.providers.azure.arm import Arm
from provisioner.providers.azure.lease import MANAGED, _props
from provisioner.providers.azure.power import latest_start, vm_state
from provisioner.providers.azure.records import image_urn
from provisioner.providers.base import (
    ConflictError,
    InstanceRecord,
    ProviderError,
    costs_from_labels,
    price_from_labels,
)
from provisioner.providers.cluster_env import META_KEY, node_list_metadata
from provisioner.providers.registry import METADATA_VALUE_LIMIT
from provisioner.providers.stack_report import StackReport
from provisioner.providers.store import PAYLOAD_LABEL

PARALLEL = 16


T = TypeVar("T")
U = TypeVar("U")


def _each(fn: Callable[[T], U], items: list[T]) -> list[U]:
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(items)))) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [f.result() for f in futures]


# ---------------------------------------------------------------------------------------------- reading
def _instances(api: AzureApi, rg: str, name: str) -> list[Arm]:
    ops = api.clients().compute.virtual_machine_scale_set_vms
    return G.rank_order([wire(i) for i in api.call(lambda: list(ops.list(rg, name, expand="instanceView")), missing=[])])


def _addresses(api: AzureApi, rg: str, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(instance id -> private IP, instance id -> public IP) of the scale set's primary IP configurations."""
    net = api.clients().network
    private: dict[str, str] = {}
    public: dict[str, str] = {}
    for nic in api.call(lambda: [wire(n) for n in net.network_interfaces.list_virtual_machine_scale_set_network_interfaces(
            rg, name)], missing=[]):
        for ipc in _props(nic).get("ipConfigurations") or []:
            iid = G.instance_of(ipc.get("id") or nic.get("id") or "")
            ipc_props = ipc.get("properties") or {}
            addr = ipc_props.get("privateIPAddress")
            if iid is not None and addr and (ipc_props.get("primary", True) or iid not in private):
                private[iid] = addr
    for pip in api.call(lambda: [wire(x) for x in net.public_ip_addresses.list_virtual_machine_scale_set_public_ip_addresses(
            rg, name)], missing=[]):
        iid = G.instance_of(pip.get("id") or "")
        if iid is not None and _props(pip).get("ipAddress"):
            public[iid] = _props(pip)["ipAddress"]
    return private, public


def node_records(api: AzureApi, vmss: Arm, notes: list[str] | None = None, existing: bool = False) -> list[InstanceRecord]:
    """The scale set's nodes in rank order."""
    name, tags = vmss.get("name") or "", vmss.get("tags") or {}
    rg = R.names(name).rg
    instances = _instances(api, rg, name)
    _, public = _addresses(api, rg, name) if instances else ({}, {})
    nodes = int(tags.get(G.NODES_TAG) or (vmss.get("sku") or {}).get("capacity") or len(instances) or 1)
    out = []
    for rank, inst in enumerate(instances):
        iid, ip = str(inst.get("instanceId")), None
        ip = public.get(iid)
        storage = _props(inst).get("storageProfile") or {}
        out.append(InstanceRecord(
            name=G.node_name(name, rank), cloud="azure", region=vmss.get("location") or "", zone=None,
            instance_type=(vmss.get("sku") or {}).get("name") or "", state=vm_state(_props(inst)),
            profile=tags.get("trainvm-profile"), hash=tags.get("trainvm-hash"), price_hourly=price_from_labels(tags), **costs_from_labels(tags),
            created=_props(inst).get("timeCreated"), last_start=latest_start(_props(inst)), last_start_is_latest=True, ip=ip, image=image_urn(storage.get("imageReference")),
            ssh_command=f"ssh {R.ADMIN_USER}@{ip}" if ip else None, ssh_user=R.ADMIN_USER,
            notes=tuple(notes or ()) if rank == 0 else (), adopted=existing,
            spot=(_props(vmss).get("virtualMachineProfile") or {}).get("priority") == "Spot",
            owner=tags.get("trainvm-owner"), cloud_id=inst.get("id"), cluster=name, rank=rank, nodes=nodes,
            payload=tags.get(PAYLOAD_LABEL)))
    return out


def find(api: AzureApi, name: str) -> InstanceRecord | None:
    nodes = cluster_nodes(api, name)
    return nodes[0] if nodes else None


def cluster_nodes(api: AzureApi, name: str) -> list[InstanceRecord]:
    vmss = api.get_scale_set(name)
    if vmss is None or (vmss.get("tags") or {}).get(MANAGED) != "true":
        return []
    return node_records(api, vmss)


def list_nodes(api: AzureApi) -> list[InstanceRecord]:
    ops = api.clients().compute.virtual_machine_scale_sets
    sets = [wire(v) for v in api.call(lambda: list(ops.list_all()))]
    sets = [v for v in sets if (v.get("tags") or {}).get(MANAGED) == "true" and v.get("name")
            and R.names(v["name"]).rg.lower() in (v.get("id") or "").lower()]
    out: list[InstanceRecord] = []
    for vmss in sets:
        out.extend(node_records(api, vmss))
    return out


def read_cluster_reports(api: AzureApi, name: str) -> dict[str, StackReport | None]:
    rg, ops = R.names(name).rg, api.clients().compute.virtual_machine_scale_set_vms
    instances = _instances(api, rg, name)
    cmd = {"commandId": "RunShellScript", "script": list(R.REPORT_SCRIPT)}

    def one(inst: Arm) -> StackReport | None:
        iid = str(inst.get("instanceId"))
        deadline = api.clock() + min(api.op_timeout, 300.0)
        try:
            poller = api.call(lambda: ops.begin_run_command(rg, name, iid, cmd))
            result = wire(api.wait(poller, deadline, f"run command on {name} instance {iid}"))
        except ProviderError:  # not running, agent not ready, busy: no report yet
            return None
        message = "".join((s.get("message") or "") for s in result.get("value") or [])
        return stack_report.read_report(R.run_command_stdout(message),
                                        f"the stack report of {name} instance {iid} (Run Command)")

    reports = _each(one, instances)
    return {G.node_name(name, rank): rep for rank, rep in enumerate(reports)}


def read_report(api: AzureApi, name: str) -> tuple[StackReport | None, dict[str, object] | None]:
    """(rank 0's report, the resolved profile stored in the scale set's userData)."""
    vmss = api.get_scale_set(name, expand="userData")
    if vmss is None or (vmss.get("tags") or {}).get(MANAGED) != "true":
        return None, None
    profile = R.decode_user_data((_props(vmss).get("virtualMachineProfile") or {}).get("userData"))
    reports = read_cluster_reports(api, name)
    return next(iter(reports.values()), None), profile


def console(api: AzureApi, name: str, start: int = 0, rank: int = 0) -> tuple[str, int] | None:
    """Node ``rank``'s boot-diagnostics serial log from character ``start``; None when there is no such cluster."""
    vmss = api.get_scale_set(name)
    if vmss is None or (vmss.get("tags") or {}).get(MANAGED) != "true":
        return None
    rg = R.names(name).rg
    instances = _instances(api, rg, name)
    text = ""
    if rank < len(instances):
        iid = str(instances[rank].get("instanceId"))
        try:
            uris = wire(api.call(lambda: api.clients().compute.virtual_machine_scale_set_vms.retrieve_boot_diagnostics_data(
                rg, name, iid, sas_uri_expiration_time_in_minutes=10)))
        except ProviderError:
            uris = {}
        text = api.serial_blob(uris) or ""
    return text[start:], max(len(text), start)


def power(api: AzureApi, name: str, action: str, *, wait: bool = True) -> InstanceRecord | None:
    vmss = api.get_scale_set(name)
    if vmss is None:
        return None
    if (vmss.get("tags") or {}).get(MANAGED) != "true":
        raise ConflictError(f"scale set {name} is not managed by trainvm; not touching it")
    ops, rg = api.clients().compute.virtual_machine_scale_sets, R.names(name).rg
    begin = ops.begin_deallocate if action == "stop" else ops.begin_start
    poller = api.call(lambda: begin(rg, name))
    if wait:
        api.wait(poller, api.clock() + api.op_timeout, f"{'deallocating' if action == 'stop' else 'starting'} {name}")
    return find(api, name)


# ---------------------------------------------------------------------------------------------- create
# (the transaction is providers/azure/create.py; the scale set is its compute step, providers/azure/compute.py)
def write_node_list(api: AzureApi, name: str, instances: list[Arm], deadline: float) -> None:
    """The nodes' private IPs (rank order) into the scale set's tags (``trainvm-cluster``, ...)."""
    rg = R.names(name).rg
    private, _ = _addresses(api, rg, name)
    missing = [str(i.get("instanceId")) for i in instances if str(i.get("instanceId")) not in private]
    if missing:
        raise ProviderError(f"scale set {name}: no private IP for instance(s) {', '.join(missing)}", code="NoNodeAddress")
    items = node_list_metadata([private[str(i.get("instanceId"))] for i in instances], METADATA_VALUE_LIMIT["azure"])
    vmss = api.get_scale_set(name) or {}
    tags = {k: v for k, v in (vmss.get("tags") or {}).items() if not k.startswith(META_KEY)}
    poller = api.call(lambda: api.clients().compute.virtual_machine_scale_sets.begin_update(rg, name, {"tags": {**tags, **items}}))
    api.wait(poller, deadline, f"writing the node list of {name}")
