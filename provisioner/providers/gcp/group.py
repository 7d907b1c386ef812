"""The GCE group engine for clusters (hardware.nodes > 1): one ``instances.bulkInsert`` with count = minCount = N
and explicit per-instance names (rank order), a compact ``resourcePolicies`` group placement policy created first
and deleted with the cluster, a partial success read from the operation's per-location status (never assumed),
and the node list written into every node's metadata (``trainvm-cluster``, provisioner/render/cluster.py).

The bulkInsert carries the caller's requestId (a retried request gets GCE's original operation back); an
operation that is DONE when returned and failed, or whose nodes are gone, is a replay of an earlier request:
StaleRequest, and the caller sends again with a new id (providers/gcp/create.py).

All or nothing: GCE deletes what it created when minCount is not reached; when fewer than N exist anyway (a
partial success), or any later step fails, this engine deletes the nodes that exist and the policy before it
raises, so nothing half-created is left. Waits are bounded (providers/poll.py, tenacity); the SDK is imported lazily.

Every SDK call (the policy, the bulkInsert, the reads, the metadata and labels, the operation waits, the deletes)
goes through ``GceApi.call``, as a single VM's do: retried while transient (429 and 403 ``rateLimitExceeded``, which
is also GCE's answer to an 11th bulk operation running at once, 5xx that are not stock-outs, connection errors)
within ``TRAINVM_API_TIMEOUT``, each request bounded by ``GceApi.http_timeout``; what is left is classified.
The create transaction calls it for ``LaunchSpec.nodes`` > 1 (providers/gcp/create.py; docs/spec.md "Multi-node clusters").
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from provisioner.providers.base import CapacityError, ProviderError
from provisioner.providers.cluster_env import node_list_metadata
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.api import WAIT_HTTP_TIMEOUT, GceApi
from provisioner.providers.gcp.request import fit_name
from provisioner.providers.gcp.rest_types import BulkBody, InstanceBody, PolicyBody
from provisioner.providers.poll import poll as poll_until  # `poll` is the engine's interval attribute
from provisioner.providers.registry import METADATA_VALUE_LIMIT

if TYPE_CHECKING:
    from google.cloud.compute_v1 import (
        InstancesClient,
        RegionOperationsClient,
        ResourcePoliciesClient,
        ZoneOperationsClient,
    )

    from provisioner.providers.gcp.sdk_types import Instance, Operation

T = TypeVar("T")
U = TypeVar("U")

MIN_COUNT_CODE = "VM_MIN_COUNT_NOT_REACHED"
#: The label every node carries (value: the cluster's name); ``delete`` touches only instances that carry it.
CLUSTER_LABEL = "trainvm-cluster"
#: The label holding a node's rank (bulkInsert gives every node the same labels: set per node afterwards).
RANK_LABEL = "trainvm-rank"
#: Per-node calls (metadata, delete) in flight at once.
PARALLEL = 16
POLICY_SUFFIX = "-compact"


class StaleRequest(Exception):
    """GCE answered the bulkInsert's requestId with an earlier request's finished operation whose nodes are gone
    (or which failed): the caller sends again with a new id derived from ``operation``."""

    def __init__(self, operation: str) -> None:
        super().__init__(operation)
        self.operation = operation


def node_names(cluster: str, nodes: int) -> list[str]:
    """``NAME-0`` ... ``NAME-(N-1)``: the rank is the suffix (and the order of the node list); within GCE's
    63 characters."""
    return [fit_name(cluster, f"-{i}") for i in range(nodes)]


def policy_name(cluster: str) -> str:
    return fit_name(cluster, POLICY_SUFFIX)


def policy_body(cluster: str, region: str) -> PolicyBody:
    """A compact placement policy (COLLOCATED, one availability domain, as dstack builds it; ``region`` is
    output only in the discovery document, so it goes in the URL alone)."""
    return {"name": policy_name(cluster), "description": f"trainvm: compact placement of {cluster}",
            "groupPlacementPolicy": {"collocation": "COLLOCATED", "availabilityDomainCount": 1}}


def _bare(value: str) -> str:
    return value.rsplit("/", 1)[-1]


def instance_properties(instance: InstanceBody, policy_link: str | None) -> InstanceBody:
    """An ``instances.insert`` body (providers/gcp/request.instance_body) as bulkInsert's instanceProperties:
    no name, and bare machineType / acceleratorType / diskType names (bulkInsert answers 503 to selfLinks)."""
    props = copy.deepcopy(instance)
    props.pop("name", None)
    props.pop("zone", None)
    props.pop("hostname", None)
    props["machineType"] = _bare(props["machineType"])
    for acc in props.get("guestAccelerators") or []:
        acc["acceleratorType"] = _bare(acc["acceleratorType"])
    for disk in props.get("disks") or []:
        init = disk.get("initializeParams")
        if init is None:
            continue
        if "diskType" in init:
            init["diskType"] = _bare(init["diskType"])
        init.pop("diskName", None)  # one per node: GCE names each boot disk after its instance
    if policy_link:
        props["resourcePolicies"] = [policy_link]
    return props


def bulk_body(names: list[str], properties: InstanceBody) -> BulkBody:
    """count = minCount = N: all or nothing; explicit names keep the ranks stable."""
    return {"count": str(len(names)), "minCount": str(len(names)),
            "perInstanceProperties": {n: {} for n in names}, "instanceProperties": properties}


@dataclass
class GroupClients:
    """compute_v1 clients: instances, zone_operations, resource_policies, region_operations."""

    instances: InstancesClient
    zone_operations: ZoneOperationsClient
    resource_policies: ResourcePoliciesClient
    region_operations: RegionOperationsClient


class GceGroup:
    def __init__(self, clients: GroupClients, project: str, *, api: GceApi, op_timeout: float = 600.0,
                 poll: float = 2.0) -> None:
        self.c, self.project, self.op_timeout, self.poll = clients, project, op_timeout, poll
        self.api, self.timeout = api, api.http_timeout  # the retried call and each request's timeout

    # ------------------------------------------------------------------ waits
    def _wait(self, op: Operation, zone: str | None = None, region: str | None = None) -> Operation:
        """Poll ``op`` until DONE, bounded by ``op_timeout`` (providers/poll.py: between polls 0.2 s doubling up to
        ``poll``; each poll is the long-polling ``operations.wait``, through ``GceApi.call``)."""
        from google.cloud import compute_v1

        done = compute_v1.Operation.Status.DONE
        ops, pauses = [op], [min(0.2, self.poll)]

        def check() -> Operation:
            cur = ops[0]
            if cur.status != done:
                name = cur.name
                if zone:
                    cur = self._sdk(lambda: self.c.zone_operations.wait(
                        project=self.project, zone=zone, operation=name, retry=None, timeout=WAIT_HTTP_TIMEOUT))
                else:
                    cur = self._sdk(lambda: self.c.region_operations.wait(
                        project=self.project, region=region, operation=name, retry=None, timeout=WAIT_HTTP_TIMEOUT))
                ops[0] = cur
            return cur

        def pause() -> float:
            now, pauses[0] = pauses[0], min(self.poll, pauses[0] * 2)
            return now

        def timed_out(last: object) -> ProviderError:
            return ProviderError(f"operation {op.name} did not finish within {self.op_timeout:g} s", code="OPERATION_TIMEOUT")

        return poll_until(check, ready=lambda cur: cur.status == done, deadline=time.monotonic() + self.op_timeout,
                    timed_out=timed_out, interval=pause)

    def _sdk(self, fn: Callable[[], T]) -> T:
        """``fn()`` through ``GceApi.call``: retried while transient, then classified."""
        return self.api.call(fn)

    # ------------------------------------------------------------------ create
    def create(self, cluster: str, zone: str, instance: InstanceBody, nodes: int, *, compact: bool,
               request_id: str | None = None) -> list[Instance]:
        """Create the N nodes of ``cluster`` in ``zone`` from one node's insert body, all or nothing; write the
        node list into each node's metadata. Returns the nodes (as instances.get answers) in rank order. ``request_id``
        goes with the bulkInsert; a replayed finished operation whose nodes are gone raises StaleRequest."""
        from google.cloud import compute_v1

        region = zone.rsplit("-", 1)[0]
        names = node_names(cluster, nodes)
        link = None
        if compact:
            body = compute_v1.ResourcePolicy.from_json(json.dumps(policy_body(cluster, region)))
            made = self._sdk(lambda: self.c.resource_policies.insert_unary(
                project=self.project, region=region, resource_policy_resource=body, retry=None, timeout=self.timeout))
            self._raise_op(self._wait(made, region=region))
            link = f"projects/{self.project}/regions/{region}/resourcePolicies/{policy_name(cluster)}"
        accepted = False  # GCE took the bulkInsert: from then on the nodes of these names are this call's
        try:
            props = instance_properties(instance, link)
            props["labels"] = {**(props.get("labels") or {}), CLUSTER_LABEL: cluster}
            res = compute_v1.BulkInsertInstanceResource.from_json(json.dumps(bulk_body(names, props)))
            req = compute_v1.BulkInsertInstanceRequest(project=self.project, zone=zone,
                                                       bulk_insert_instance_resource_resource=res,
                                                       **({"request_id": request_id} if request_id else {}))
            sent: Operation = self._sdk(  # the requestId makes a retry safe: GCE answers it with the first's operation
                lambda: self.c.instances.bulk_insert_unary(request=req, retry=None, timeout=self.timeout))
            if sent.status == compute_v1.Operation.Status.DONE and (
                    errs.from_operation(sent) is not None or not all(self._exists(zone, n) for n in names)):
                raise StaleRequest(sent.name)  # not accepted: nothing of this request is ours to delete
            accepted = True
            op = self._wait(sent, zone=zone)
            self._raise_op(op)
            status = op.instances_bulk_insert_operation_metadata.per_location_status.get(f"zones/{zone}")
            created = status.created_vm_count if status is not None else 0
            if created != nodes:  # a partial success is DONE without error: never assume all were made
                raise CapacityError(f"bulkInsert created {created} of {nodes} nodes in {zone}", code=MIN_COUNT_CODE)
            self.write_node_list(zone, self._each(lambda n: self._get(zone, n), names))
            return self._each(lambda n: self._get(zone, n), names)
        except BaseException:
            # a refused bulkInsert (e.g. 409: a concurrent `up` made nodes of these names) made nothing: its nodes
            # are not ours to delete (a request lost in transit may have made some: the caller's check finds them)
            self.delete(cluster, zone, nodes if accepted else 0, compact=compact)
            raise

    def _raise_op(self, op: Operation) -> None:
        f = errs.from_operation(op)
        if f is None:
            return
        if f.code == MIN_COUNT_CODE:
            raise CapacityError(errs.short(f.message), code=MIN_COUNT_CODE)
        raise errs.classify(f)

    def _exists(self, zone: str, name: str) -> bool:
        return self._find(zone, name) is not None

    def _find(self, zone: str, name: str) -> Instance | None:
        found: Instance | None = self.api.call(lambda: self.c.instances.get(
            project=self.project, zone=zone, instance=name, retry=None, timeout=self.timeout), missing=None)
        return found

    def _get(self, zone: str, name: str) -> Instance:
        return self._sdk(lambda: self.c.instances.get(project=self.project, zone=zone, instance=name, retry=None,
                                                      timeout=self.timeout))

    def write_node_list(self, zone: str, nodes: list[Instance]) -> None:
        """``trainvm-cluster`` (the nodes' private IPs, rank order) into every node's metadata, and each node's rank
        into its labels (``trainvm-rank``); both requests of a node go out before either is awaited."""
        from google.cloud import compute_v1

        items = node_list_metadata([n.network_interfaces[0].network_i_p for n in nodes], METADATA_VALUE_LIMIT["gcp"])
        def one(ranked: tuple[int, Instance]) -> None:
            rank, node = ranked
            kept = [compute_v1.Items(key=i.key, value=i.value) for i in node.metadata.items if i.key not in items]
            md = compute_v1.Metadata(fingerprint=node.metadata.fingerprint,
                                     items=kept + [compute_v1.Items(key=k, value=v) for k, v in items.items()])
            labels = compute_v1.InstancesSetLabelsRequest(label_fingerprint=node.label_fingerprint,
                                                          labels={**dict(node.labels), RANK_LABEL: str(rank)})
            ops = [self._sdk(lambda: self.c.instances.set_metadata_unary(
                       project=self.project, zone=zone, instance=node.name, metadata_resource=md, retry=None,
                       timeout=self.timeout)),
                   self._sdk(lambda: self.c.instances.set_labels_unary(
                       project=self.project, zone=zone, instance=node.name, instances_set_labels_request_resource=labels,
                       retry=None, timeout=self.timeout))]
            for op in ops:
                self._raise_op(self._wait(op, zone=zone))

        self._each(one, list(enumerate(nodes)))

    def _each(self, fn: Callable[[T], U], items: list[T]) -> list[U]:
        """``fn`` over ``items`` on at most PARALLEL threads (wall time flat in N up to that); the first error
        is raised after all have finished."""
        with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(items)))) as pool:
            futures = [pool.submit(fn, item) for item in items]
        return [f.result() for f in futures]

    # ------------------------------------------------------------------ delete
    def delete(self, cluster: str, zone: str, nodes: int, *, compact: bool) -> None:
        """Delete every node of ``cluster`` that exists, then its placement policy (idempotent). An instance of a
        node's name that does not carry ``trainvm-cluster=cluster`` (another VM of that name) is never touched."""
        def one(name: str) -> None:
            inst = self._find(zone, name)
            if inst is None or dict(inst.labels).get(CLUSTER_LABEL) != cluster:
                return
            op: Operation | None = self.api.call(lambda: self.c.instances.delete_unary(
                project=self.project, zone=zone, instance=name, retry=None, timeout=self.timeout), missing=None)
            if op is not None:
                self._wait(op, zone=zone)

        self._each(one, node_names(cluster, nodes))
        if compact:
            region = zone.rsplit("-", 1)[0]
            gone: Operation | None = self.api.call(lambda: self.c.resource_policies.delete_unary(
                project=self.project, region=region, resource_policy=policy_name(cluster), retry=None,
                timeout=self.timeout), missing=None)
            if gone is not None:
                self._raise_op(self._wait(gone, region=region))
