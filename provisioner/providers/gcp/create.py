"""One create transaction on Compute Engine for 1..N nodes: a single VM is a group of one (issue 26).

``GcpProvider.create`` calls ``GceCreate.create`` for every ``LaunchSpec.nodes``; the steps and their guarantees
are the same for one VM and for N nodes:

1. Look for what the name already stands for (one VM: the instance NAME in the offer's zone; N nodes: the nodes
   labelled ``trainvm-cluster=NAME``, and a VM called NAME is a ConflictError). Found, this profile's hash and
   complete: adopted once no member is PROVISIONING/STAGING any more; a member still in flight at the deadline:
   AttemptInProgressError (left to the `up` creating it, never deleted, no failover); another hash, not trainvm's,
   or an incomplete group: ConflictError.
2. The body is built and parsed first (a request that cannot work creates nothing), then the SSH firewall rules
   (``ssh_from``) and, for N > 1, the rule between the nodes.
3. One request creates all members, carrying a requestId derived from name + profile hash + offer, so a retried or
   re-run request gets GCE's original operation back. A replayed operation that is stale (DONE when returned and
   failed, or its members are gone) is re-sent with a new id; a 409 (created meanwhile) is adopted (one VM) or
   AttemptInProgressError (a group: another `up` won the race). A member this call created that is gone or
   STOPPING/TERMINATED when its operation finished was deleted by someone else: VanishedError.
4. On any failure after the request went out, every member carrying this profile's hash (and the placement
   policy) is deleted and GCE is asked again: the cleanup is "verified" only when nothing is left, else the
   members are in ``left_behind``. Then this attempt's firewall rules, never while a member of the name exists.

The API (why two methods under one transaction): one VM is sent as ``instances.insert``, N nodes as one
``instances.bulkInsert`` with count = minCount = N (gcp_group). bulkInsert accepts count = 1, but its
``instanceProperties`` differ from an Instance (bare machine/disk type names, no per-VM disk name), so a group of
one sent that way would change every single VM's request (``render``/``plan`` previews, goldens) for no gain: one
insert is already all-or-nothing, and the capacity guarantee that bulkInsert's minCount gives only matters for
N > 1. Everything around the request (steps 1, 2, 4, the requestId, the replay and vanish checks) is shared.
A single VM keeps its name (no ``-0``), its labels and metadata (no cluster labels, no node list).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provisioner.providers.base import (
    AttemptInProgressError,
    ConflictError,
    InstanceRecord,
    InvalidRequestError,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    VanishedError,
    refuse_foreign,
)
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.cluster import GceClusters, _zone
from provisioner.providers.gcp.cluster_request import cluster_of, internal_rule_body, is_internal_rule, node_body
from provisioner.providers.gcp.firewall import FirewallTouched, SshFirewall
from provisioner.providers.gcp.group import StaleRequest, policy_name
from provisioner.providers.gcp.request import instance_body, request_id, ssh_notes, ssh_tag
from provisioner.providers.offer import Offer
from provisioner.providers.poll import poll

IN_FLIGHT = ("PROVISIONING", "STAGING")


@dataclass
class CreateAttempt:
    """What one ``create`` call has done so far (a failure cleans up exactly that): never kept on the provider,
    so that one provider serves creates in parallel threads."""

    spec: LaunchSpec
    zone: str
    deadline: float
    sent: bool = False  # a create request went out: a failure must look for the members and delete them
    rules: FirewallTouched = field(default_factory=FirewallTouched)


class GceCreate:
    def __init__(self, gce: GceApi, fw: SshFirewall, clusters: GceClusters, record: Callable[..., InstanceRecord],
                 image_for: Callable[[LaunchSpec], str], op_timeout: float) -> None:
        self.gce, self.fw, self.clusters, self.record, self.op_timeout = gce, fw, clusters, record, op_timeout
        self.image_for = image_for  # resolved only when a request is built (an adopt needs none)

    def body(self, spec: LaunchSpec, offer: Offer, image: str) -> dict[str, Any]:
        """One member's ``instances.insert`` body (a group's nodes: with the cluster's labels and tag)."""
        return (node_body if spec.nodes > 1 else instance_body)(spec, offer, image, self.gce.project)

    def instance(self, spec: LaunchSpec, offer: Offer, image: str) -> Any:
        """``compute_v1.Instance`` from the pure body (``from_json`` rejects unknown field names)."""
        try:
            return self.gce.clients().v1.Instance.from_json(json.dumps(self.body(spec, offer, image)))
        except Exception as exc:  # noqa: BLE001 - a bug in gcp_request, reported as such
            raise InvalidRequestError(f"the GCE request body does not parse: {exc}", code="BODY") from exc

    def submit(self, spec: LaunchSpec, offer: Offer, image: str | None = None, *, rid: str | None = None,
               attempt: CreateAttempt | None = None) -> Any:
        """Send the insert of a group of one (with retries); its Operation, or None when the name exists (409)."""
        api, zone = self.gce.clients(), str(offer.zone)
        req = api.v1.InsertInstanceRequest(project=api.project, zone=zone, request_id=rid or request_id(spec, offer),
                                           instance_resource=self.instance(spec, offer, image or self.image_for(spec)))
        if attempt is not None:
            attempt.sent = True
        return self.gce.call(lambda: api.instances.insert_unary(request=req, retry=None, timeout=self.gce.http_timeout),
                             exists=None)

    # ------------------------------------------------------------------ the transaction
    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        zone = str(offer.zone)
        attempt = CreateAttempt(spec, zone, self.gce.deadline())
        try:
            found = self._existing(spec, zone)
            if found:
                return self._adopt(found, spec, offer, attempt)
            image = self.image_for(spec)
            self.instance(spec, offer, image)  # a body that does not parse creates nothing (no rules either)
            if spec.ssh_from:
                self.fw.ensure(spec, attempt.deadline, attempt.rules)
            if spec.nodes > 1:
                self._ensure_internal_rule(spec, attempt.deadline, attempt.rules)
            made = self._send_group(spec, offer, image, attempt) if spec.nodes > 1 else self._send_one(spec, offer, image, attempt)
            return made
        except ProviderError as exc:
            self._after_failure(spec, zone, attempt, exc)
            raise

    def _existing(self, spec: LaunchSpec, zone: str) -> builtins.list[Any]:
        """What ``spec.name`` stands for: the VM in the offer's zone (one), the nodes (any zone; N > 1)."""
        if spec.nodes == 1:
            return self._in_zone(spec, zone)
        nodes = self.clusters.nodes(spec.name)
        if nodes:
            return nodes
        single, _ = self.gce.find_any(spec.name)
        if single is not None:
            raise ConflictError(f"a VM named {spec.name} already exists in {_zone(single)}; a cluster of that name cannot "
                                "be created beside it", hint=f"run `trainvm down {spec.name}` or pass --name")
        return []

    def _send_one(self, spec: LaunchSpec, offer: Offer, image: str, attempt: CreateAttempt) -> InstanceRecord:
        zone, rid, done = attempt.zone, request_id(spec, offer), self.gce.clients().v1.Operation.Status.DONE
        for _ in range(3):
            op = self.submit(spec, offer, image, rid=rid, attempt=attempt)
            if op is None:  # 409: created meanwhile (a concurrent or earlier `up`)
                found = self.gce.get(zone, spec.name)
                if found is None:
                    raise ProviderError(f"{spec.name} was reported to exist in {zone} but is gone", code="409")
                return self._adopt([found], spec, offer, attempt)
            replayed = op.status == done  # GCE answered with the finished operation of an earlier request
            op = self.gce.wait(zone, op, attempt.deadline)
            failure = errs.from_operation(op)
            inst = None if failure else self.gce.get(zone, spec.name)
            if replayed and (failure or inst is None):
                rid = request_id(spec, offer, salt=op.name)  # stale: that request's VM failed or was deleted
                continue
            if failure:
                raise errs.classify(failure)
            if inst is None:  # our own insert finished, and the VM is gone: someone deleted it meanwhile
                raise VanishedError(f"{spec.name} in {zone} was deleted while its create was in progress",
                                    code="DELETED_DURING_CREATE")
            return self.record(self.until_running(inst, zone, attempt.deadline), notes=ssh_notes(spec))
        raise ProviderError("GCE kept answering with operations of earlier requests", code="STALE_REQUEST_ID")

    def _send_group(self, spec: LaunchSpec, offer: Offer, image: str, attempt: CreateAttempt) -> InstanceRecord:
        zone, rid = attempt.zone, request_id(spec, offer)
        attempt.sent = True
        try:
            for _ in range(3):
                try:
                    made: builtins.list[Any] = self.clusters.group().create(
                        spec.name, zone, self.body(spec, offer, image), spec.nodes, compact=spec.compact, request_id=rid)
                    break
                except StaleRequest as stale:  # that request's nodes failed or were deleted since
                    rid = request_id(spec, offer, salt=stale.operation)
            else:
                raise ProviderError("GCE kept answering with operations of earlier requests", code="STALE_REQUEST_ID")
        except ProviderError as exc:
            if exc.code not in ("alreadyExists", "409"):
                raise
            # bulkInsert refused: instances of the nodes' names exist, made by someone else: never ours to delete
            attempt.sent = False
            theirs = [i for i in self.clusters.nodes(spec.name)
                      if dict(i.labels).get("trainvm-hash") == spec.labels.get("trainvm-hash")]
            if theirs:  # another `up` of this cluster won the race: failover would make a second cluster
                raise AttemptInProgressError(
                    f"another `trainvm up` is creating cluster {spec.name} in {_zone(theirs[0])} ({len(theirs)} of its "
                    f"{spec.nodes} nodes exist; GCE refused this one's bulkInsert: {exc})",
                    name=spec.name, where=_zone(theirs[0])) from exc
            raise ConflictError(f"instances named like the nodes of {spec.name} already exist in {zone} ({exc}); "
                                "another `trainvm up` of this cluster may be creating it, or they are not trainvm's",
                                hint=f"run `trainvm up` again to adopt the cluster once it is complete, `trainvm down "
                                     f"{spec.name}` to delete it, or pass --name") from exc
        nodes = [self.until_running(n, zone, attempt.deadline) for n in made]  # as read after the node list went in
        return self.record(nodes[0], notes=ssh_notes(spec))

    # ------------------------------------------------------------------ adopting
    def _adopt(self, found: builtins.list[Any], spec: LaunchSpec, offer: Offer, attempt: CreateAttempt) -> InstanceRecord:
        """The name already stands for members: this profile's (same hash, complete) are returned once up, else
        ConflictError."""
        first, zone = found[0], _zone(found[0])
        labels = dict(first.labels)
        refuse_foreign(labels, spec, "a VM" if spec.nodes == 1 else "a cluster", f"in {zone}")
        if spec.nodes > 1 and (len(found) != spec.nodes or cluster_of(first.name, labels)[1] != 0):
            raise ConflictError(f"cluster {spec.name} in {zone} has {len(found)} of its {spec.nodes} nodes "
                                "(an interrupted create or delete)", hint=f"run `trainvm down {spec.name}`, then `trainvm up` again")
        tagged = ssh_tag(spec.name) in first.tags.items
        if tagged and spec.ssh_from:  # converge the rules (missing: created; another --ssh-from: updated)
            self.fw.ensure(spec, attempt.deadline, attempt.rules)
        if any(i.status in IN_FLIGHT for i in found):  # an interrupted or a concurrent `up`
            try:
                if spec.nodes == 1:  # the same requestId gives back the insert's operation: wait for it
                    meta = {i.key: i.value for i in first.metadata.items}
                    op = self.submit(spec, offer, meta.get("trainvm-image") or None)
                    if op is not None and op.status != self.gce.clients().v1.Operation.Status.DONE:
                        failure = errs.from_operation(self.gce.wait(zone, op, attempt.deadline))
                        if failure and "ALREADY_EXISTS" not in (failure.code or ""):
                            raise errs.classify(failure)
                found = [self.until_running(self.gce.get(zone, i.name) or i, zone, attempt.deadline) for i in found]
            except RetryExhaustedError as exc:
                still = [self.gce.get(zone, i.name) for i in found] if exc.code == "OPERATION_TIMEOUT" else []
                busy = [i for i in still if i is not None and i.status in IN_FLIGHT]
                if not busy:
                    raise
                raise AttemptInProgressError(  # another `up` owns the name: never deleted, never duplicated elsewhere
                    f"{busy[0].name} in {zone} is still {busy[0].status} after {self.op_timeout:g} s: another `trainvm up` "
                    "(or an interrupted one) is creating it", name=spec.name, where=zone) from exc
        return self.record(found[0], notes=ssh_notes(spec, tagged), existing=True)

    def until_running(self, inst: Any, zone: str, deadline: float) -> Any:
        """Poll until the member leaves PROVISIONING/STAGING (bounded). One that disappears, or turns STOPPING /
        TERMINATED on its way up, was deleted or stopped by someone else: VanishedError."""
        name = inst.name

        def fetch() -> Any:
            got = self.gce.get(zone, name)
            if got is None:
                raise VanishedError(f"{name} in {zone} was deleted while `up` waited for it to start",
                                    code="DELETED_DURING_CREATE")
            return got

        def timed_out(last: Any) -> RetryExhaustedError:
            return RetryExhaustedError(f"{name} in {zone} was still {getattr(last, 'status', inst.status)} after "
                                       f"{self.op_timeout:g} s (TRAINVM_GCE_OP_TIMEOUT)", code="OPERATION_TIMEOUT")

        if inst.status in IN_FLIGHT:
            inst = poll(fetch, ready=lambda i: i.status not in IN_FLIGHT, deadline=deadline, timed_out=timed_out,
                        interval=self.gce.poll_interval, clock=self.gce.clock, sleep=self.gce.sleep)
        if inst.status in ("STOPPING", "TERMINATED", "SUSPENDING", "SUSPENDED"):
            raise VanishedError(f"{name} in {zone} is {inst.status}: it was stopped or deleted while `up` waited for it",
                                code="DELETED_DURING_CREATE")
        return inst

    # ------------------------------------------------------------------ after a failure: all or nothing
    def _ensure_internal_rule(self, spec: LaunchSpec, deadline: float, touched: FirewallTouched) -> None:
        body = internal_rule_body(spec, self.gce.project)
        rule = self.fw.rule(body["name"])
        if rule is not None:
            if not is_internal_rule(rule, spec.name):
                raise ConflictError(f"a firewall rule named {body['name']} already exists and was not created by trainvm "
                                    f"for cluster {spec.name}; delete or rename it, or pass --name")
            touched.reused.append(body["name"])
            return
        op = self.fw._send("insert", body)
        if op is not None:
            touched.created.append(body["name"])
            self.fw._finish([op], deadline)

    def _ours(self, spec: LaunchSpec, zone: str) -> builtins.list[Any]:
        """The members of ``spec.name`` in ``zone`` that carry this profile's hash."""
        found = self._in_zone(spec, zone)
        return [i for i in found if dict(i.labels).get("trainvm-hash") == spec.labels.get("trainvm-hash")]

    def _in_zone(self, spec: LaunchSpec, zone: str) -> builtins.list[Any]:
        if spec.nodes == 1:
            inst = self.gce.get(zone, spec.name)
            return [] if inst is None else [inst]
        return [i for i in self.clusters.nodes(spec.name) if _zone(i) == zone]

    def _after_failure(self, spec: LaunchSpec, zone: str, attempt: CreateAttempt, exc: ProviderError) -> None:
        """Delete the members this attempt sent (only ones with this profile's hash; never after
        AttemptInProgressError), check that GCE answers "not found" for them, then this attempt's rules."""
        notes: builtins.list[str] = []
        try:
            if attempt.sent and not isinstance(exc, AttemptInProgressError):  # never another `up`'s members
                ours = self._ours(spec, zone)
                if ours:
                    self.clusters.delete(spec.name, ours, wait=True, rules=False)
                left = [f"{i.name} ({zone}, {i.status})" for i in self._ours(spec, zone)]
                if spec.nodes > 1 and spec.compact and self._policy_exists(spec.name, zone):
                    left.append(f"placement policy {policy_name(spec.name)}")
                if left:
                    exc.leaves(*left)
                    notes.append(f"left after the cleanup: {', '.join(left)}; run `trainvm down {spec.name}`")
            if spec.nodes == 1:
                note = self.fw.cleanup(spec, zone, attempt.rules)
                if note:
                    exc.leaves(f"firewall rules of {spec.name}")
                    notes.append(note)
            elif not self.clusters.nodes(spec.name) and (attempt.rules.created or attempt.rules.reused):
                self.clusters._delete_rules(spec.name, attempt.rules.created + attempt.rules.reused)
        except ProviderError as cleanup:
            exc.leaves(f"{spec.name} ({zone})")
            notes.append(f"cleaning up {spec.name} in {zone} failed ({cleanup}); run `trainvm down {spec.name}`")
        exc.verified()
        if notes:
            exc.args = ("; ".join([str(exc), *notes]),)

    def _policy_exists(self, cluster: str, zone: str) -> bool:
        api = self.gce.clients()
        region = zone.rsplit("-", 1)[0]
        got = self.gce.call(lambda: api.policies.get(project=api.project, region=region, resource_policy=policy_name(cluster),
                                                     retry=None, timeout=self.gce.http_timeout), missing=None)
        return got is not None
