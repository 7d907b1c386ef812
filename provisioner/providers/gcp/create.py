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

The API: what differs between one VM and N nodes is the sender, chosen in one place (``senders.sender_for``):
one VM is an ``instances.insert`` (``InsertSender``), N nodes one ``instances.bulkInsert`` with count = minCount = N
(``BulkSender``, through gcp_group); providers/gcp/senders.py says, citing Google's pages, why a single VM is not
sent as a bulkInsert of one. The rest of the difference is data (``senders.Members``: the members' names, the
refusal's noun, the placement policy, the rule between the nodes). Everything around the request (steps 1, 2, 4,
the requestId, the replay and vanish checks) is this module's, once.
A single VM keeps its name (no ``-0``), its labels and metadata (no cluster labels, no node list).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from provisioner.providers.base import (
    AttemptInProgressError,
    ConflictError,
    InstanceRecord,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    VanishedError,
    refuse_foreign,
)
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.cluster import GceClusters, _zone
from provisioner.providers.gcp.cluster_request import internal_rule_body, is_internal_rule
from provisioner.providers.gcp.firewall import FirewallTouched, SshFirewall
from provisioner.providers.gcp.group import StaleRequest
from provisioner.providers.gcp.request import request_id, ssh_notes, ssh_tag
from provisioner.providers.gcp.senders import (
    Body,
    BulkSender,
    Exists,
    InsertSender,
    Sender,
    parsed_instance,
    sender_for,
)
from provisioner.providers.offer import Offer
from provisioner.providers.poll import poll

if TYPE_CHECKING:
    from provisioner.providers.gcp.sdk_types import Instance, Operation

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


class Record(Protocol):
    """``GcpProvider._record``: the InstanceRecord of a member."""

    def __call__(self, inst: Instance, *, notes: builtins.list[str] | None = None,
                 existing: bool = False) -> InstanceRecord: ...


class GceCreate:
    def __init__(self, gce: GceApi, fw: SshFirewall, clusters: GceClusters, record: Record,
                 image_for: Callable[[LaunchSpec], str], op_timeout: float) -> None:
        self.gce, self.fw, self.clusters, self.record, self.op_timeout = gce, fw, clusters, record, op_timeout
        self.image_for = image_for  # resolved only when a request is built (an adopt needs none)
        self.insert, self.bulk = InsertSender(gce, fw, image_for), BulkSender(gce, clusters)

    def sender(self, spec: LaunchSpec) -> Sender:
        return sender_for(spec, self.insert, self.bulk)

    def body(self, spec: LaunchSpec, offer: Offer, image: str) -> Body:
        """One member's ``instances.insert`` body (a group's nodes: with the cluster's labels and tag)."""
        return self.sender(spec).body(spec, offer, image)

    def instance(self, spec: LaunchSpec, offer: Offer, image: str) -> Instance:
        """``compute_v1.Instance`` of one member from the pure body (``from_json`` rejects unknown field names)."""
        return parsed_instance(self.gce, self.body(spec, offer, image))

    def submit(self, spec: LaunchSpec, offer: Offer, image: str | None = None, *, rid: str | None = None) -> Operation | None:
        """Send the insert of one VM (with retries); its Operation, or None when the name exists (409)."""
        return self.insert.submit(spec, offer, image, rid=rid)

    # ------------------------------------------------------------------ the transaction
    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        zone, sender = str(offer.zone), self.sender(spec)
        attempt = CreateAttempt(spec, zone, self.gce.deadline())
        try:
            found = sender.existing(spec, zone)
            if found:
                return self._adopt(found, spec, offer, attempt)
            image = self.image_for(spec)
            self.instance(spec, offer, image)  # a body that does not parse creates nothing (no rules either)
            if spec.ssh_from:
                self.fw.ensure(spec, attempt.deadline, attempt.rules)
            if sender.members(spec).internal_rule:
                self._ensure_internal_rule(spec, attempt.deadline, attempt.rules)
            return self._send(sender, spec, offer, image, attempt)
        except ProviderError as exc:
            self._after_failure(sender, spec, zone, attempt, exc)
            raise

    def _send(self, sender: Sender, spec: LaunchSpec, offer: Offer, image: str, attempt: CreateAttempt) -> InstanceRecord:
        """Send with the requestId of this name, profile and offer; a stale replay is sent again with a new id."""
        rid = request_id(spec, offer)

        def sent(value: bool) -> None:
            attempt.sent = value

        for _ in range(3):
            try:
                made = sender.send(spec, offer, image, rid, sent, attempt.deadline)
            except StaleRequest as stale:  # that request's members failed or were deleted since
                rid = request_id(spec, offer, salt=stale.operation)
                continue
            except Exists as exc:  # 409: created meanwhile (a concurrent or earlier `up`)
                return self._adopt(sender.exists(spec, attempt.zone, exc), spec, offer, attempt)
            members = [self.until_running(m, attempt.zone, attempt.deadline) for m in made]
            return self.record(members[0], notes=ssh_notes(spec))
        raise ProviderError("GCE kept answering with operations of earlier requests", code="STALE_REQUEST_ID")

    # ------------------------------------------------------------------ adopting
    def _adopt(self, found: builtins.list[Instance], spec: LaunchSpec, offer: Offer,
               attempt: CreateAttempt) -> InstanceRecord:
        """The name already stands for members: this profile's (same hash, complete) are returned once up, else
        ConflictError."""
        sender, first, zone = self.sender(spec), found[0], _zone(found[0])
        want = sender.members(spec)
        refuse_foreign(dict(first.labels), spec, want.noun, f"in {zone}")
        if sorted(i.name for i in found) != sorted(want.names):
            raise ConflictError(f"cluster {spec.name} in {zone} has {len(found)} of its {spec.nodes} nodes "
                                "(an interrupted create or delete)", hint=f"run `trainvm down {spec.name}`, then `trainvm up` again")
        tagged = ssh_tag(spec.name) in first.tags.items
        if tagged and spec.ssh_from:  # converge the rules (missing: created; another --ssh-from: updated)
            self.fw.ensure(spec, attempt.deadline, attempt.rules)
        if any(i.status in IN_FLIGHT for i in found):  # an interrupted or a concurrent `up`
            try:
                sender.await_op(spec, offer, first, zone, attempt.deadline)
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

    def until_running(self, inst: Instance, zone: str, deadline: float) -> Instance:
        """Poll until the member leaves PROVISIONING/STAGING (bounded). One that disappears, or turns STOPPING /
        TERMINATED on its way up, was deleted or stopped by someone else: VanishedError."""
        name = inst.name

        def fetch() -> Instance:
            got: Instance | None = self.gce.get(zone, name)
            if got is None:
                raise VanishedError(f"{name} in {zone} was deleted while `up` waited for it to start",
                                    code="DELETED_DURING_CREATE")
            return got

        def timed_out(last: Instance | None) -> RetryExhaustedError:
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

    def _after_failure(self, sender: Sender, spec: LaunchSpec, zone: str, attempt: CreateAttempt,
                       exc: ProviderError) -> None:
        """Delete the members this attempt sent (only ones with this profile's hash; never after
        AttemptInProgressError), check that GCE answers "not found" for them (and the group's placement policy), then
        this attempt's rules."""
        notes: builtins.list[str] = []
        try:
            if attempt.sent and not isinstance(exc, AttemptInProgressError):  # never another `up`'s members
                ours = self._ours(sender, spec, zone)
                if ours:
                    self.clusters.delete(spec.name, ours, wait=True, rules=False)
                left = [f"{i.name} ({zone}, {i.status})" for i in self._ours(sender, spec, zone)]
                policy = sender.members(spec).policy
                if policy and self._policy_exists(policy, zone):
                    left.append(f"placement policy {policy}")
                if left:
                    exc.leaves(*left)
                    notes.append(f"left after the cleanup: {', '.join(left)}; run `trainvm down {spec.name}`")
            note = sender.drop_rules(spec, zone, attempt.rules)
            if note:
                exc.leaves(f"firewall rules of {spec.name}")
                notes.append(note)
        except ProviderError as cleanup:
            exc.leaves(f"{spec.name} ({zone})")
            notes.append(f"cleaning up {spec.name} in {zone} failed ({cleanup}); run `trainvm down {spec.name}`")
        exc.verified()
        if notes:
            exc.args = ("; ".join([str(exc), *notes]),)

    @staticmethod
    def _ours(sender: Sender, spec: LaunchSpec, zone: str) -> builtins.list[Instance]:
        """The members of ``spec.name`` in ``zone`` that carry this profile's hash."""
        return [i for i in sender.in_zone(spec, zone) if dict(i.labels).get("trainvm-hash") == spec.labels.get("trainvm-hash")]

    def _policy_exists(self, policy: str, zone: str) -> bool:
        api = self.gce.clients()
        region = zone.rsplit("-", 1)[0]
        got = self.gce.call(lambda: api.policies.get(project=api.project, region=region, resource_policy=policy,
                                                     retry=None, timeout=self.gce.http_timeout), missing=None)
        return got is not None
