"""The Azure group engine for clusters (hardware.nodes > 1): one Uniform Virtual Machine Scale Set of N nodes in a
proximity placement group, in the cluster's own resource group (bodies: azure_group_request).

Create: the resource group with this attempt's lease (azure_lease, as for one VM) -> VNet + NSG -> the PPG
(compact placement) -> the scale set (capacity N) -> its instances and NICs are read back: all N must be
Succeeded -> the node list (private IPs by rank) goes into the scale set's tags (IMDS ``compute/tags``).
All or nothing: a scale set has no minimum count, and a failed PUT (AllocationFailed...) can leave some
instances allocated. After any failure the instances that exist are counted for the error message, and the
whole resource group (scale set, instances, NICs, IPs, PPG, network) is deleted, awaited and checked gone
(the error's ``cleanup``); an allocation failure raises CapacityError, so failover moves the whole group.
A leftover with this profile hash that succeeded is returned (adopted); a failed one is deleted first.
While another live ``up`` holds the group's lease this one joins it (``_join``): it writes nothing and waits, bounded,
for that cluster to be complete (Succeeded, all N nodes in the node list), and returns it; that ``up`` failing
first, or the deadline, stops this one (AttemptInProgressError, no failover). Joining is safe because the joiner
only reads, and "complete" is what a re-run's adoption already requires. Window left: a failure of the other
``up`` after it wrote the node list (its lifecycle role grant) deletes a cluster a joiner has already returned.

Nodes: ``NAME-K`` for rank K (instance ids in numeric order); each record carries cluster/rank/nodes, its
public IP and power state. ``find`` returns rank 0; ``stop``/``start`` deallocate/start the whole scale set;
``delete`` is the single-VM one (the group goes); ``console`` is rank 0's serial log. Reports: Run Command on each
instance (at most 16 at once).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from provisioner.catalog.models import Offer
from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import group_request as G
from provisioner.providers.azure import request as R
from provisioner.providers.azure.lease import LEASE, LEASE_UNTIL, MANAGED, _lease, _lease_live, _props, refuse_foreign
from provisioner.providers.azure.power import latest_start, vm_state
from provisioner.providers.azure.roles import grant_lifecycle_role, grant_payload_reader
from provisioner.providers.base import (
    AttemptInProgressError,
    CapacityError,
    ConflictError,
    InstanceRecord,
    LaunchSpec,
    ProviderError,
    VanishedError,
    costs_from_labels,
    price_from_labels,
)
from provisioner.providers.poll import poll
from provisioner.providers.store import PAYLOAD_LABEL
from provisioner.verify.report import StackReport, decode_report

PARALLEL = 16
PARTIAL_CODE = "PartialScaleSet"


def _wire(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    return obj.as_dict() if hasattr(obj, "as_dict") else dict(obj)


def _each(fn: Any, items: list[Any]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(items)))) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [f.result() for f in futures]


# ---------------------------------------------------------------------------------------------- reading
def get_scale_set(p: Any, name: str, expand: str | None = None) -> dict[str, Any] | None:
    rg = R.names(name).rg
    vmss = p._call(lambda: p.api().compute.virtual_machine_scale_sets.get(rg, name, expand=expand), missing=None)
    return None if vmss is None else _wire(vmss)


def _instances(p: Any, rg: str, name: str) -> list[dict[str, Any]]:
    ops = p.api().compute.virtual_machine_scale_set_vms
    return G.rank_order([_wire(i) for i in p._call(lambda: list(ops.list(rg, name, expand="instanceView")), missing=[])])


def _addresses(p: Any, rg: str, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(instance id -> private IP, instance id -> public IP) of the scale set's primary IP configurations."""
    net = p.api().network
    private: dict[str, str] = {}
    public: dict[str, str] = {}
    for nic in p._call(lambda: [_wire(n) for n in net.network_interfaces.list_virtual_machine_scale_set_network_interfaces(
            rg, name)], missing=[]):
        for ipc in _props(nic).get("ipConfigurations") or []:
            iid = G.instance_of(ipc.get("id") or nic.get("id") or "")
            addr = _props(ipc).get("privateIPAddress")
            if iid is not None and addr and (_props(ipc).get("primary", True) or iid not in private):
                private[iid] = addr
    for pip in p._call(lambda: [_wire(x) for x in net.public_ip_addresses.list_virtual_machine_scale_set_public_ip_addresses(
            rg, name)], missing=[]):
        iid = G.instance_of(pip.get("id") or "")
        if iid is not None and _props(pip).get("ipAddress"):
            public[iid] = _props(pip)["ipAddress"]
    return private, public


def node_records(p: Any, vmss: dict[str, Any], notes: list[str] | None = None, existing: bool = False) -> list[InstanceRecord]:
    """The scale set's nodes in rank order."""
    name, tags = vmss.get("name") or "", vmss.get("tags") or {}
    rg = R.names(name).rg
    instances = _instances(p, rg, name)
    _, public = _addresses(p, rg, name) if instances else ({}, {})
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
            created=_props(inst).get("timeCreated"), last_start=latest_start(_props(inst)), last_start_is_latest=True, ip=ip, image=R.image_urn(storage.get("imageReference")),
            ssh_command=f"ssh {R.ADMIN_USER}@{ip}" if ip else None, ssh_user=R.ADMIN_USER,
            notes=tuple(notes or ()) if rank == 0 else (), adopted=existing,
            spot=(_props(vmss).get("virtualMachineProfile") or {}).get("priority") == "Spot",
            owner=tags.get("trainvm-owner"), cloud_id=inst.get("id"), cluster=name, rank=rank, nodes=nodes,
            payload=tags.get(PAYLOAD_LABEL)))
    return out


def find(p: Any, name: str) -> InstanceRecord | None:
    nodes = cluster_nodes(p, name)
    return nodes[0] if nodes else None


def cluster_nodes(p: Any, name: str) -> list[InstanceRecord]:
    vmss = get_scale_set(p, name)
    if vmss is None or (vmss.get("tags") or {}).get(MANAGED) != "true":
        return []
    return node_records(p, vmss)


def list_nodes(p: Any) -> list[InstanceRecord]:
    ops = p.api().compute.virtual_machine_scale_sets
    sets = [_wire(v) for v in p._call(lambda: list(ops.list_all()))]
    sets = [v for v in sets if (v.get("tags") or {}).get(MANAGED) == "true" and v.get("name")
            and R.names(v["name"]).rg.lower() in (v.get("id") or "").lower()]
    out: list[InstanceRecord] = []
    for vmss in sets:
        out.extend(node_records(p, vmss))
    return out


def read_cluster_reports(p: Any, name: str) -> dict[str, StackReport | None]:
    rg, ops = R.names(name).rg, p.api().compute.virtual_machine_scale_set_vms
    instances = _instances(p, rg, name)
    cmd = {"commandId": "RunShellScript", "script": list(R.REPORT_SCRIPT)}

    def one(inst: dict[str, Any]) -> StackReport | None:
        iid = str(inst.get("instanceId"))
        deadline = p._clock() + min(p.op_timeout, 300.0)
        try:
            poller = p._call(lambda: ops.begin_run_command(rg, name, iid, cmd))
            result = _wire(p._wait(poller, deadline, f"run command on {name} instance {iid}"))
        except ProviderError:  # not running, agent not ready, busy: no report yet
            return None
        message = "".join((s.get("message") or "") for s in result.get("value") or [])
        return decode_report(R.run_command_stdout(message))

    reports = _each(one, instances)
    return {G.node_name(name, rank): rep for rank, rep in enumerate(reports)}


def read_report(p: Any, name: str) -> tuple[StackReport | None, dict[str, Any] | None]:
    """(rank 0's report, the resolved profile stored in the scale set's userData)."""
    vmss = get_scale_set(p, name, expand="userData")
    if vmss is None or (vmss.get("tags") or {}).get(MANAGED) != "true":
        return None, None
    profile = R.decode_user_data((_props(vmss).get("virtualMachineProfile") or {}).get("userData"))
    reports = read_cluster_reports(p, name)
    return next(iter(reports.values()), None), profile


def console(p: Any, name: str, start: int = 0, rank: int = 0) -> tuple[str, int] | None:
    """Node ``rank``'s boot-diagnostics serial log from character ``start``; None when there is no such cluster."""
    vmss = get_scale_set(p, name)
    if vmss is None or (vmss.get("tags") or {}).get(MANAGED) != "true":
        return None
    rg = R.names(name).rg
    instances = _instances(p, rg, name)
    text = ""
    if rank < len(instances):
        iid = str(instances[rank].get("instanceId"))
        try:
            uris = _wire(p._call(lambda: p.api().compute.virtual_machine_scale_set_vms.retrieve_boot_diagnostics_data(
                rg, name, iid, sas_uri_expiration_time_in_minutes=10)))
        except ProviderError:
            uris = {}
        text = p._serial_blob(uris) or ""
    return text[start:], max(len(text), start)


def power(p: Any, name: str, action: str, *, wait: bool = True) -> InstanceRecord | None:
    vmss = get_scale_set(p, name)
    if vmss is None:
        return None
    if (vmss.get("tags") or {}).get(MANAGED) != "true":
        raise ConflictError(f"scale set {name} is not managed by trainvm; not touching it")
    ops, rg = p.api().compute.virtual_machine_scale_sets, R.names(name).rg
    begin = ops.begin_deallocate if action == "stop" else ops.begin_start
    poller = p._call(lambda: begin(rg, name))
    if wait:
        p._wait(poller, p._clock() + p.op_timeout, f"{'deallocating' if action == 'stop' else 'starting'} {name}")
    return find(p, name)


# ---------------------------------------------------------------------------------------------- create
def create(p: Any, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
    """Create the ``spec.nodes`` nodes of cluster ``spec.name``, all or nothing; the rank-0 record."""
    key = p.ssh_public_key()
    R.custom_data(spec)
    R.user_data(spec)
    n, deadline = R.names(spec.name), p._clock() + p.op_timeout
    notes = R.notes(spec, offer, p.subscription_id)
    p._refuse_deleting_group(n.rg, spec.name)  # GroupBeingDeletedError: no region can succeed until it is gone
    if p._get_vm(n.rg, spec.name) is not None:
        raise ConflictError(f"a single VM named {spec.name} exists; run `trainvm down {spec.name}` or pass --name")
    existing = get_scale_set(p, spec.name)
    if existing is not None:
        adopted = _adopt(p, existing, spec, notes, deadline)
        if adopted is not None:
            return adopted
    group = p._get_group(n.rg)
    if group is not None and _lease(group) is not None and _lease_live(group):
        return _join(p, spec, notes, deadline, str(_lease(group)))
    attempt = f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    p._prepare_group(n.rg, offer.region, deadline)
    image = p.image_for(spec, offer)
    api, group_body = p.api(), R.group_body(spec, offer.region)
    group_body["tags"] = {**group_body["tags"], LEASE: attempt, LEASE_UNTIL: str(int(time.time() + p.op_timeout + 60))}
    made_group = False
    try:
        p._call(lambda: api.resource.resource_groups.create_or_update(n.rg, group_body))
        made_group = True
        if _lease(p._get_group(n.rg)) != attempt:
            p._lost(spec, n.rg)
        vnet = p._put(n.rg, deadline, attempt, lambda: api.network.virtual_networks.begin_create_or_update(
            n.rg, n.vnet, R.vnet_body(spec, offer.region)))
        nsg = p._put(n.rg, deadline, attempt, lambda: api.network.network_security_groups.begin_create_or_update(
            n.rg, n.nsg, R.nsg_body(spec, offer.region)))
        p._wait(vnet, deadline, f"virtual network {n.vnet}")
        p._wait(nsg, deadline, f"network security group {n.nsg}")
        placement = None
        if spec.compact:
            p._call(lambda: api.compute.proximity_placement_groups.create_or_update(
                n.rg, G.ppg_name(spec.name), G.ppg_body(spec, offer.region)))
            placement = G.ppg_id(p.subscription_id, spec.name)
        body = G.scale_set_body(spec, offer, subscription_id=p.subscription_id, image=image, ssh_public_key=key,
                                placement_group=placement)
        poller = p._put(n.rg, deadline, attempt, lambda: api.compute.virtual_machine_scale_sets.begin_create_or_update(
            n.rg, spec.name, body))
        try:
            p._wait(poller, deadline, f"scale set {spec.name}")
        except ProviderError as exc:
            raise _failed_put(p, spec, exc) from exc
        instances = _instances(p, n.rg, spec.name)
        ok = [i for i in instances if _props(i).get("provisioningState") == "Succeeded"]
        if len(ok) != spec.nodes:  # never assume: the scale set must hold exactly N running instances
            raise CapacityError(f"scale set {spec.name} holds {len(ok)} of {spec.nodes} nodes in {offer.region}",
                                code=PARTIAL_CODE)
        write_node_list(p, spec.name, instances, deadline)
        vmss = get_scale_set(p, spec.name)
        if vmss is None:
            raise VanishedError(f"{spec.name} was deleted right after its creation finished", code="DeletedDuringCreate")
        # the scale set's identity (every node's) gets the lifecycle role on the group, as a single VM's does: a
        # node's watchdog deallocates its own instance (IMDS resourceId .../virtualMachineScaleSets/N/virtualMachines/K)
        grant_lifecycle_role(p, spec, vmss)
        grant_payload_reader(p, spec, vmss)  # every node fetches the payload with the scale set's identity
        return node_records(p, vmss, notes=notes)[0]
    except Exception as exc:
        if made_group and isinstance(exc, ProviderError) and not isinstance(exc, VanishedError) \
                and exc.code != "AttemptLost":
            exc = p._vanished(n.rg, spec, exc)
        note = p._cleanup(n.rg, spec, exc if isinstance(exc, ProviderError) else None, attempt)
        if note and isinstance(exc, ProviderError):
            exc.args = (f"{exc}; {note}",)
        raise exc


def _failed_put(p: Any, spec: LaunchSpec, exc: ProviderError) -> ProviderError:
    """The scale set's PUT failed: count what was allocated anyway (the group's deletion removes it), and take
    the failure's code from a failed instance when the operation carried none (provisioningState polling)."""
    rg = R.names(spec.name).rg
    try:
        instances = _instances(p, rg, spec.name)
    except ProviderError:
        instances = []
    made = sum(1 for i in instances if _props(i).get("provisioningState") == "Succeeded")
    out = exc
    if exc.code in (None, "200"):
        for inst in instances:
            code, message = errs.code_from_statuses((_props(inst).get("instanceView") or {}).get("statuses"))
            if code is not None:
                out = errs.classify(errs.Failure(200, code, message))
                break
    out.args = (f"{out}; {made} of {spec.nodes} nodes had been allocated",)
    return out


def write_node_list(p: Any, name: str, instances: list[dict[str, Any]], deadline: float) -> None:
    """The nodes' private IPs (rank order) into the scale set's tags (``trainvm-cluster``, ...)."""
    from provisioner.providers.registry import METADATA_VALUE_LIMIT
    from provisioner.render.cluster import META_KEY, node_list_metadata

    rg = R.names(name).rg
    private, _ = _addresses(p, rg, name)
    missing = [str(i.get("instanceId")) for i in instances if str(i.get("instanceId")) not in private]
    if missing:
        raise ProviderError(f"scale set {name}: no private IP for instance(s) {', '.join(missing)}", code="NoNodeAddress")
    items = node_list_metadata([private[str(i.get("instanceId"))] for i in instances], METADATA_VALUE_LIMIT["azure"])
    vmss = get_scale_set(p, name) or {}
    tags = {k: v for k, v in (vmss.get("tags") or {}).items() if not k.startswith(META_KEY)}
    poller = p._call(lambda: p.api().compute.virtual_machine_scale_sets.begin_update(rg, name, {"tags": {**tags, **items}}))
    p._wait(poller, deadline, f"writing the node list of {name}")


def _complete(vmss: dict[str, Any] | None, spec: LaunchSpec) -> bool:
    """The scale set is Succeeded and carries the node list of all N nodes (its create's last write before the role)."""
    from provisioner.render.cluster import parse_node_list

    return (vmss is not None and _props(vmss).get("provisioningState") == "Succeeded"
            and len(parse_node_list(vmss.get("tags") or {})) == spec.nodes)


def _adopt(p: Any, vmss: dict[str, Any], spec: LaunchSpec, notes: list[str], deadline: float) -> InstanceRecord | None:
    n = R.names(spec.name)
    refuse_foreign(vmss, spec, n.rg, "scale set", "cluster")
    if _complete(vmss, spec):
        grant_payload_reader(p, spec, vmss)  # a killed `up` may have stopped before it (idempotent)
        return node_records(p, vmss, notes=notes, existing=True)[0]
    group = p._get_group(n.rg)
    if group is not None and _lease(group) is not None and _lease_live(group):
        return _join(p, spec, notes, deadline, str(_lease(group)))
    p._delete_group(n.rg, wait=True)  # a failed or unfinished leftover: start again from nothing
    return None


def _join(p: Any, spec: LaunchSpec, notes: list[str], deadline: float, other: str) -> InstanceRecord:
    """Another live ``up`` (lease ``other``) is creating this cluster: wait, bounded, writing nothing, until its scale
    set is complete, and return it (adopted, naming that ``up``), as a single VM's create joins another's VM. That
    lease ending or changing hands first (its create failed: it deleted the group and goes on with its own
    failover), or the deadline, is AttemptInProgressError: this ``up`` never creates a cluster beside it."""
    n = R.names(spec.name)

    def check() -> dict[str, Any] | None:
        vmss = get_scale_set(p, spec.name)
        if _complete(vmss, spec):
            return vmss
        group = p._get_group(n.rg)
        if group is None or _lease(group) != other or not _lease_live(group):
            raise AttemptInProgressError(
                f"another `trainvm up` ({other}) was creating cluster {spec.name} and gave it up without a complete "
                "cluster (its create failed; it goes on with its own failover); this `up` wrote nothing",
                name=spec.name, where=n.rg, other=other, code="OtherAttemptFailed")
        return None

    def timed_out(last: Any) -> AttemptInProgressError:
        return AttemptInProgressError(f"another `trainvm up` ({other}) is still creating cluster {spec.name} after "
                                      f"{p.op_timeout:g} s; not touching its resource group {n.rg}",
                                      name=spec.name, where=n.rg, other=other)

    vmss: dict[str, Any] = poll(check, ready=lambda v: v is not None, deadline=deadline, timed_out=timed_out,  # type: ignore[arg-type]
                                interval=p.poll_seconds, clock=p._clock, sleep=p._sleep)
    refuse_foreign(vmss, spec, n.rg, "scale set", "cluster")
    return node_records(p, vmss, notes=[*notes, f"created by another `trainvm up` ({other})"], existing=True)[0]
