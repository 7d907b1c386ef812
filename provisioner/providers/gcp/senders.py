"""The two GCE senders under the one create transaction (providers/gcp/create.py), chosen in one place:
``sender_for(spec)``. A sender holds only what really differs between one VM and N nodes; the flow around it
(look up, adopt, the requestId and its stale-replay loop, firewall rules, wait until running, the all-or-nothing
cleanup) is ``GceCreate``'s, the same code for both.

Why a single VM is not a bulkInsert of one (issue 37; docs/architecture.md "One create path per cloud"): the API
would take it (``count`` = ``minCount`` = 1 with ``perInstanceProperties`` {NAME: {}} keeps the name, and none of the
bulk API's limitations, CSEK disks, boot disks from snapshots, machine images, sole-tenant nodes, applies to
trainvm's VMs: https://cloud.google.com/compute/docs/instances/multiple/about-bulk-creation#limitations), but it
would cost every single VM three things and buy it nothing:

- bulk requests have their own per-project limit: "more than 10 bulk operations running at the same time" is a
  403 rateLimitExceeded (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-bulk-vm-creation),
  so parallel `up`s and bakes of single VMs would queue behind each other; an ``instances.insert`` has no such cap;
- bulkInsert reports differently: it is validated up front "with capacity and quota" (about-bulk-creation, the
  table), so a stock-out can be an HTTP 503 ``insufficientCapacity`` on the request instead of the operation's
  ZONE_RESOURCE_POOL_EXHAUSTED, and a DONE operation without an error may still have made fewer VMs than asked
  (read from ``instancesBulkInsertOperationMetadata.perLocationStatus``, providers/gcp/group.py);
- its ``instanceProperties`` are not an Instance: bare machine, accelerator and disk type names (a selfLink is
  answered 503, as SkyPilot observed) and no name, so every single VM's request and its ``render``/``plan``
  preview would change.

What bulkInsert gives a group, all or nothing through minCount, is what one insert already is. So one VM is an
``instances.insert`` (``InsertSender``), N nodes one ``instances.bulkInsert`` (``BulkSender``, through the group
engine); what a name stands for differs with them (a VM is its name in a zone, a group's nodes carry its label).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from provisioner.providers.base import (
    AttemptInProgressError,
    ConflictError,
    InvalidRequestError,
    LaunchSpec,
    ProviderError,
    VanishedError,
)
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.cluster import GceClusters, _zone
from provisioner.providers.gcp.cluster_request import node_body
from provisioner.providers.gcp.firewall import FirewallTouched, SshFirewall
from provisioner.providers.gcp.group import StaleRequest, node_names, policy_name
from provisioner.providers.gcp.request import instance_body, request_id
from provisioner.providers.gcp.rest_types import InstanceBody
from provisioner.providers.offer import Offer

if TYPE_CHECKING:
    from provisioner.providers.gcp.sdk_types import Instance, Operation

#: one member's create body (REST JSON)
Body = InstanceBody


class Exists(Exception):
    """GCE answered 409: instances of the members' names exist (made meanwhile by another `up`, or not ours)."""

    def __init__(self, cause: BaseException | None = None) -> None:
        super().__init__(str(cause or "409"))
        self.cause = cause


@dataclass(frozen=True)
class Members:
    """What one create makes for ``spec.name``: the data that differs between one VM and N nodes."""

    names: tuple[str, ...]  # (NAME,) or NAME-0 ... NAME-(N-1): what a complete set of members is called
    noun: str  # "a VM" / "a cluster", in the refusal of a foreign one
    policy: str | None  # the compact placement policy a group's cleanup must also find gone
    internal_rule: bool  # the firewall rule between the nodes, made before them


class Sender(Protocol):
    """What differs between sending one VM and N nodes; ``GceCreate`` runs the rest."""

    def members(self, spec: LaunchSpec) -> Members: ...

    def body(self, spec: LaunchSpec, offer: Offer, image: str) -> Body: ...

    def existing(self, spec: LaunchSpec, zone: str) -> builtins.list[Instance]:
        """What ``spec.name`` stands for before this create (empty: nothing)."""

    def in_zone(self, spec: LaunchSpec, zone: str) -> builtins.list[Instance]:
        """The members of ``spec.name`` in ``zone`` now (for the cleanup)."""

    def send(self, spec: LaunchSpec, offer: Offer, image: str, rid: str, sent: Callable[[bool], None],
             deadline: float) -> builtins.list[Instance]:
        """Send the create with requestId ``rid`` (``sent(True)``: it went out, a failure must look for members to
        delete) and wait for its operation: the members as GCE answered. StaleRequest: a replay of an earlier
        request's failed or deleted members; Exists: 409."""

    def exists(self, spec: LaunchSpec, zone: str, exc: Exists) -> builtins.list[Instance]:
        """After a 409: the members to adopt, or the refusal."""

    def await_op(self, spec: LaunchSpec, offer: Offer, first: Instance, zone: str, deadline: float) -> None:
        """Adopting members still in flight: wait for the request that is making them, where it can be found."""

    def drop_rules(self, spec: LaunchSpec, zone: str, touched: FirewallTouched) -> str | None:
        """After a failure: this attempt's firewall rules, unless a member of the name is still there; a note when
        that failed."""


class InsertSender:
    """One VM: ``instances.insert`` of the Instance body; the VM is its name in the offer's zone."""

    def __init__(self, gce: GceApi, fw: SshFirewall, image_for: Callable[[LaunchSpec], str]) -> None:
        self.gce, self.fw, self.image_for = gce, fw, image_for

    def members(self, spec: LaunchSpec) -> Members:
        return Members((spec.name,), "a VM", None, internal_rule=False)

    def body(self, spec: LaunchSpec, offer: Offer, image: str) -> Body:
        return instance_body(spec, offer, image, self.gce.project)

    def instance(self, spec: LaunchSpec, offer: Offer, image: str) -> Instance:
        """``compute_v1.Instance`` from the pure body (``from_json`` rejects unknown field names)."""
        return parsed_instance(self.gce, self.body(spec, offer, image))

    def submit(self, spec: LaunchSpec, offer: Offer, image: str | None = None, *, rid: str | None = None) -> Operation | None:
        """Send the insert (with retries); its Operation, or None when the name exists (409)."""
        api, zone = self.gce.clients(), str(offer.zone)
        req = api.v1.InsertInstanceRequest(project=api.project, zone=zone, request_id=rid or request_id(spec, offer),
                                           instance_resource=self.instance(spec, offer, image or self.image_for(spec)))
        op: Operation | None = self.gce.call(
            lambda: api.instances.insert_unary(request=req, retry=None, timeout=self.gce.http_timeout), exists=None)
        return op

    def existing(self, spec: LaunchSpec, zone: str) -> builtins.list[Instance]:
        return self.in_zone(spec, zone)

    def in_zone(self, spec: LaunchSpec, zone: str) -> builtins.list[Instance]:
        inst = self.gce.get(zone, spec.name)
        return [] if inst is None else [inst]

    def send(self, spec: LaunchSpec, offer: Offer, image: str, rid: str, sent: Callable[[bool], None],
             deadline: float) -> builtins.list[Instance]:
        zone = str(offer.zone)
        sent(True)
        op = self.submit(spec, offer, image, rid=rid)
        if op is None:
            raise Exists()
        replayed = op.status == self.gce.clients().v1.Operation.Status.DONE  # an earlier request's finished operation
        op = self.gce.wait(zone, op, deadline)
        failure = errs.from_operation(op)
        inst = None if failure else self.gce.get(zone, spec.name)
        if replayed and (failure or inst is None):
            raise StaleRequest(op.name)  # that request's VM failed or was deleted
        if failure:
            raise errs.classify(failure)
        if inst is None:  # our own insert finished, and the VM is gone: someone deleted it meanwhile
            raise VanishedError(f"{spec.name} in {zone} was deleted while its create was in progress",
                                code="DELETED_DURING_CREATE")
        return [inst]

    def exists(self, spec: LaunchSpec, zone: str, exc: Exists) -> builtins.list[Instance]:
        found = self.gce.get(zone, spec.name)  # created meanwhile (a concurrent or earlier `up`): adopted
        if found is None:
            raise ProviderError(f"{spec.name} was reported to exist in {zone} but is gone", code="409")
        return [found]

    def await_op(self, spec: LaunchSpec, offer: Offer, first: Instance, zone: str, deadline: float) -> None:
        """The same requestId gives back the insert's operation: a failed one is that error (next zone)."""
        meta = {i.key: i.value for i in first.metadata.items}
        op = self.submit(spec, offer, meta.get("trainvm-image") or None)
        if op is not None and op.status != self.gce.clients().v1.Operation.Status.DONE:
            failure = errs.from_operation(self.gce.wait(zone, op, deadline))
            if failure and "ALREADY_EXISTS" not in (failure.code or ""):
                raise errs.classify(failure)

    def drop_rules(self, spec: LaunchSpec, zone: str, touched: FirewallTouched) -> str | None:
        return self.fw.cleanup(spec, zone, touched)


class BulkSender:
    """N nodes: one ``instances.bulkInsert`` (count = minCount = N) through the group engine (gcp/group.py, which
    also makes the compact policy and writes the node list); a group's nodes carry its label, in any zone."""

    def __init__(self, gce: GceApi, clusters: GceClusters) -> None:
        self.gce, self.clusters = gce, clusters

    def members(self, spec: LaunchSpec) -> Members:
        return Members(tuple(node_names(spec.name, spec.nodes)), "a cluster",
                       policy_name(spec.name) if spec.compact else None, internal_rule=True)

    def body(self, spec: LaunchSpec, offer: Offer, image: str) -> Body:
        return node_body(spec, offer, image, self.gce.project)

    def existing(self, spec: LaunchSpec, zone: str) -> builtins.list[Instance]:
        nodes = self.clusters.nodes(spec.name)
        if nodes:
            return nodes
        single, _ = self.gce.find_any(spec.name)
        if single is not None:
            raise ConflictError(f"a VM named {spec.name} already exists in {_zone(single)}; a cluster of that name cannot "
                                "be created beside it", hint=f"run `trainvm down {spec.name}` or pass --name")
        return []

    def in_zone(self, spec: LaunchSpec, zone: str) -> builtins.list[Instance]:
        return [i for i in self.clusters.nodes(spec.name) if _zone(i) == zone]

    def send(self, spec: LaunchSpec, offer: Offer, image: str, rid: str, sent: Callable[[bool], None],
             deadline: float) -> builtins.list[Instance]:
        sent(True)
        try:
            made: builtins.list[Instance] = self.clusters.group().create(
                spec.name, str(offer.zone), self.body(spec, offer, image), spec.nodes, compact=spec.compact, request_id=rid)
        except ProviderError as exc:
            if exc.code in ("alreadyExists", "409"):
                sent(False)  # the refused bulkInsert made nothing: nodes of these names are someone else's
                raise Exists(exc) from exc
            raise
        return made  # as read after the node list went in

    def exists(self, spec: LaunchSpec, zone: str, exc: Exists) -> builtins.list[Instance]:
        """bulkInsert refused: instances of the nodes' names exist, made by someone else: never ours to delete, and
        never adopted half-made (the winner writes the node list after its nodes exist)."""
        theirs = [i for i in self.clusters.nodes(spec.name)
                  if dict(i.labels).get("trainvm-hash") == spec.labels.get("trainvm-hash")]
        if theirs:  # another `up` of this cluster won the race: failover would make a second cluster
            raise AttemptInProgressError(
                f"another `trainvm up` is creating cluster {spec.name} in {_zone(theirs[0])} ({len(theirs)} of its "
                f"{spec.nodes} nodes exist; GCE refused this one's bulkInsert: {exc.cause})",
                name=spec.name, where=_zone(theirs[0])) from exc.cause
        raise ConflictError(f"instances named like the nodes of {spec.name} already exist in {zone} ({exc.cause}); "
                            "another `trainvm up` of this cluster may be creating it, or they are not trainvm's",
                            hint=f"run `trainvm up` again to adopt the cluster once it is complete, `trainvm down "
                                 f"{spec.name}` to delete it, or pass --name") from exc.cause

    def await_op(self, spec: LaunchSpec, offer: Offer, first: Instance, zone: str, deadline: float) -> None:
        """Nothing to replay: the nodes are polled (GceCreate.until_running) like the VM after its operation."""

    def drop_rules(self, spec: LaunchSpec, zone: str, touched: FirewallTouched) -> str | None:
        if not self.clusters.nodes(spec.name) and (touched.created or touched.reused):
            self.clusters._delete_rules(spec.name, touched.created + touched.reused)
        return None


def parsed_instance(gce: GceApi, body: Body) -> Instance:
    """``compute_v1.Instance`` from a pure body (``from_json`` rejects unknown field names)."""
    try:
        inst: Instance = gce.clients().v1.Instance.from_json(json.dumps(body))
    except Exception as exc:  # noqa: BLE001 - a bug in gcp_request, reported as such
        raise InvalidRequestError(f"the GCE request body does not parse: {exc}", code="BODY") from exc
    return inst


def sender_for(spec: LaunchSpec, insert: InsertSender, bulk: BulkSender) -> Sender:
    """The one place the sender is chosen: one VM, ``instances.insert``; N nodes, ``instances.bulkInsert``."""
    return insert if spec.nodes == 1 else bulk
