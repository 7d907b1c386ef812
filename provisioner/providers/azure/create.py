"""One Azure create of 1..N nodes as a transaction with an owner (``CreateTransaction``, a part of ``AzureProvider``;
the group's lease and the cleanup are in ``azure_lease``; the compute step, a VM for one node or a scale set for N, and why a group
of one is a VM, in ``azure_compute``).

Create = resource group -> VNet + NSG (in parallel) -> the VM's user-assigned identity and its role assignments
(``azure_roles``: lifecycle role, payload reader; a refusal stops here, before anything bills) -> compute (a VM, its
NIC and public IP VM-managed; or the PPG and a scale set of N, carrying that identity) -> read back (a scale set: N
Succeeded instances, then the node list in its tags). Idempotent:
deterministic names; an existing VM or scale set with this profile hash is returned (waiting for it if a killed
``up`` left it creating; a scale set without its node list is finished); a Failed leftover whose creator is gone
is deleted with its group and created again; another hash, or the other kind under that name -> ConflictError.

Ownership of the VM (or scale set: the same). Every attempt has an id (``host:pid:random``), written to the
group's lease tag and to the VM's own tags (``trainvm-attempt`` / ``trainvm-lease-until``). The group tag is last-writer-wins (ARM has
no conditional write), so two ``up`` of one profile can both pass the lease check; the VM PUT is where ARM
decides: a VM whose create is running refuses a second PUT (409 ``Conflict``). So:

- just before its VM PUT an attempt reads the VM: one that already exists (another attempt's) is joined, never
  written over: waited for and returned (``adopted``, with a note naming the other attempt), or, when its
  create failed or it is still Creating at the deadline, this attempt ends with AttemptInProgressError
  (``OtherAttemptFailed`` / ``AttemptInProgress``): failover stops, the other attempt cleans up or goes on;
- a 409 on the VM PUT is answered the same way (the other attempt's PUT won the race);
- cleanup never deletes a group that holds a VM another live attempt created, or a VM without an attempt tag
  (``GroupLease.cleanup``), so a loser can no longer delete the winner's group.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi, Poller
from provisioner.providers.azure.arm import Arm
from provisioner.providers.azure.compute import IN_FLIGHT, ScaleSet, Vm, compute_for, other_kind
from provisioner.providers.azure.identity import user_identity
from provisioner.providers.azure.images import AzureImages
from provisioner.providers.azure.lease import (
    CONFLICT_CODES,
    GROUP_DELETING,
    LEASE,
    LEASE_UNTIL,
    GroupBeingDeletedError,
    GroupLease,
    _foreign_live,
    _lease,
    _lease_live,
    _props,
    refuse_foreign,
)
from provisioner.providers.azure.roles import ensure_identity, grant_roles, principal_of
from provisioner.providers.base import (
    AttemptInProgressError,
    ConflictError,
    InstanceRecord,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    VanishedError,
)
from provisioner.providers.offer import Offer
from provisioner.providers.poll import poll

WAITING = object()  # await_other_attempt: the other attempt is still at work


def new_attempt_id() -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class CreateTransaction:
    """The create part of ``AzureProvider``: one transaction for 1..N nodes on the API client ``api``, the group's
    ``lease`` (ownership and cleanup) and ``images`` (the Marketplace image a node boots)."""

    def __init__(self, api: AzureApi, lease: GroupLease, images: AzureImages) -> None:
        self.api, self.lease, self.images = api, lease, images

    def run(self, spec: LaunchSpec, offer: Offer, key: str) -> InstanceRecord:
        """Create the ``spec.nodes`` nodes of ``spec.name`` (compute_for: one VM, or a scale set of N): the
        rank-0 record (a single VM's record has no cluster fields)."""
        c = compute_for(spec)
        n, deadline = R.names(spec.name), self.api.clock() + self.api.op_timeout
        notes = R.notes(spec, offer, self.api.subscription_id)
        attempt = new_attempt_id()  # this create's owner id: a local, never kept on the provider (parallel creates)
        self.lease.refuse_deleting_group(n.rg, spec.name)  # no region can succeed until that deletion ends
        self._refuse_other_kind(c, spec)
        existing = c.get(self.api, spec.name)
        if existing is not None:
            adopted = self._adopt(existing, spec, notes, deadline, attempt)
            if adopted is not None:
                return adopted
        other = self.await_other_attempt(n.rg, spec, notes, deadline, attempt)
        if other is not None:
            return other
        racer = self.lease.prepare_group(n.rg, offer.region, deadline, spec.name)
        if racer is not None:  # another `up` created it meanwhile (in another region): never delete its group
            return self._join(racer, spec, notes, deadline, attempt, cleanup=True)
        image = self.images.image_for(spec, offer)
        owner = {LEASE: attempt, LEASE_UNTIL: str(int(time.time() + self.api.op_timeout + 60))}
        api, group_body = self.api.clients(), R.group_body(spec, offer.region)
        group_body["tags"] = {**group_body["tags"], **owner}
        made_group = sent = False
        try:
            try:
                self.api.call(lambda: api.resource.resource_groups.create_or_update(n.rg, group_body))
            except ProviderError as exc:  # its deletion began since the check above (a racing cleanup or down)
                if exc.code == GROUP_DELETING:
                    raise GroupBeingDeletedError(n.rg, spec.name) from exc
                raise
            made_group = True
            if _lease(self.api.get_group(n.rg)) != attempt:  # another `up` wrote the group just after us: its attempt
                # owns the group; its compute is ours too, and when it gives up (its cleanup deletes the group) this
                # attempt is over as well (never write into a group another attempt deleted or is deleting)
                return self.await_other_attempt(n.rg, spec, notes, deadline, attempt) or self.lease.lost(spec, n.rg)
            try:
                vnet = self.lease.put(n.rg, deadline, attempt, lambda: api.network.virtual_networks.begin_create_or_update(
                    n.rg, n.vnet, R.vnet_body(spec, offer.region)))
                nsg = self.lease.put(n.rg, deadline, attempt, lambda: api.network.network_security_groups.begin_create_or_update(
                    n.rg, n.nsg, R.nsg_body(spec, offer.region)))
                self.api.wait(vnet, deadline, f"virtual network {n.vnet}")
                self.api.wait(nsg, deadline, f"network security group {n.nsg}")
            except ProviderError as exc:  # a 409 while another `up` holds the group: wait for its compute instead
                if exc.code not in CONFLICT_CODES or _lease(self.api.get_group(n.rg)) == attempt:
                    raise
            if _lease(self.api.get_group(n.rg)) != attempt:  # lost the group to another `up`: its compute is ours too
                return self.await_other_attempt(n.rg, spec, notes, deadline, attempt) or self.lease.lost(spec, n.rg)
            if not user_identity(spec):  # the identity and its roles exist before anything that bills (issue 36 item 5)
                grant_roles(self.api, spec, ensure_identity(self.api, spec, offer.region, deadline))
            racer = c.get(self.api, spec.name)
            if racer is not None:  # another `up` passed its lease check too and its PUT came first
                return self._join(racer, spec, notes, deadline, attempt)
            try:
                poller = c.put(self.api, spec, offer, owner, image, key, deadline)  # it names its creator (owner tags)
            except ProviderError as exc:
                racer = c.get(self.api, spec.name) if exc.code in CONFLICT_CODES else None
                if racer is None:
                    raise
                return self._join(racer, spec, notes, deadline, attempt)  # ARM refused ours: the other PUT won
            sent = True
            self.wait_compute(c, poller, spec, deadline)
            created = c.get(self.api, spec.name)
            created = c.finish(self.api, spec, created, deadline) if created is not None else None
            if created is None:
                raise VanishedError(f"{spec.name} was deleted right after its creation finished", code="DeletedDuringCreate")
            return c.record(self.api, created, notes, False)
        except Exception as exc:
            if isinstance(exc, GroupBeingDeletedError):
                raise  # not this attempt's group: nothing to clean up, and deleting it again would wait for it
            if made_group and isinstance(exc, ProviderError) \
                    and not isinstance(exc, (VanishedError, AttemptInProgressError)):  # the other attempt's cleanup
                exc = self.lease.vanished(n.rg, spec, exc, attempt, sent)
            note = self.lease.cleanup(n.rg, spec, exc if isinstance(exc, ProviderError) else None, attempt)
            if note and isinstance(exc, ProviderError):
                exc.args = (f"{exc}; {note}",)
            raise exc

    def wait_compute(self, c: Vm | ScaleSet, poller: Poller, spec: LaunchSpec, deadline: float) -> None:
        c.wait(self.api, poller, spec, deadline)

    def _refuse_other_kind(self, c: Vm | ScaleSet, spec: LaunchSpec) -> None:
        """A VM and a scale set of one name would share the group (``trainvm-NAME``): never write one beside the other."""
        other = other_kind(c)
        found = other.get(self.api, spec.name)
        if found is not None:
            raise ConflictError(f"a {other.kind} named {spec.name} exists in resource group {R.names(spec.name).rg} "
                                f"({found.get('location')}); this profile makes a {c.kind}: run `trainvm down "
                                f"{spec.name}` or pass --name")

    def _join(self, res: Arm, spec: LaunchSpec, notes: list[str], deadline: float, attempt: str, *,
              cleanup: bool = False) -> InstanceRecord:
        """A VM or scale set another attempt created while this one was on its way: wait for it and return it,
        never write over it. When its create failed, this attempt is over (``OtherAttemptFailed``; that attempt
        cleans up). ``cleanup``: whether a failure here cleans up itself (False inside ``_create``'s transaction)."""
        other = (res.get("tags") or {}).get(LEASE) or "unknown"
        adopted = self._adopt(res, spec, [*notes, f"created by another `trainvm up` ({other})"], deadline, attempt,
                              cleanup=cleanup)
        if adopted is not None:
            return adopted
        raise AttemptInProgressError(f"another `trainvm up` ({other}) created {spec.name} first and its create failed "
                                     "(it goes on with its own failover); this `up` wrote nothing", name=spec.name,
                                     where=R.names(spec.name).rg, other=other, code="OtherAttemptFailed")

    def _adopt(self, res: Arm, spec: LaunchSpec, notes: list[str], deadline: float,
               attempt: str | None = None, *, cleanup: bool = True) -> InstanceRecord | None:
        """A VM or scale set of that name exists: ours (same hash) is returned once complete (a leftover without a
        live creator is finished first: a scale set's node list); a failed leftover is deleted (None) unless
        another live attempt created it or holds the group (None: that attempt's cleanup decides).
        ``attempt``: the calling create's id."""
        c, n = compute_for(spec), R.names(spec.name)
        refuse_foreign(res, spec, n.rg, c.kind, c.what)
        other = _lease(res)
        # a resource another attempt is creating and may still be at work on (or one without an attempt tag): joined,
        # never deleted; when it ends incomplete this `up` stops (AttemptInProgressError) instead of creating its own
        foreign = _foreign_live(res, attempt) or (other is None and _props(res).get("provisioningState") in IN_FLIGHT)

        def settled(v: Arm) -> bool:
            state = _props(v).get("provisioningState")
            return state not in IN_FLIGHT and not (foreign and state == "Succeeded" and not c.complete(v, spec))

        joined = foreign and not settled(res)
        mark = f"created by another `trainvm up` ({other or 'no attempt tag'})"
        if joined and not any(note.startswith("created by another") for note in notes):
            notes = [*notes, mark]  # found before this `up` wrote anything: the record says whose it is

        def timed_out(last: Arm) -> ProviderError:
            state = _props(last).get("provisioningState")
            if joined:
                return AttemptInProgressError(f"another `trainvm up` ({other or 'no attempt tag'}) is still creating "
                                              f"{spec.name} ({state} after {self.api.op_timeout:g} s)", name=spec.name,
                                              where=str(res.get("location") or n.rg), other=other)
            return RetryExhaustedError(f"{spec.name} stayed {state} for {self.api.op_timeout:g} s (TRAINVM_AZURE_OP_TIMEOUT)",
                                       code="OperationTimeout")

        try:
            if not settled(res):  # a killed or a concurrent `up` is creating it
                res = poll(lambda: c.get(self.api, spec.name) or {}, ready=settled, deadline=deadline,
                           interval=self.api.poll_seconds, clock=self.api.clock, sleep=self.api.sleep, timed_out=timed_out)
            if _props(res).get("provisioningState") == "Succeeded":
                if not c.complete(res, spec):  # a killed `up` stopped before its read-back (scale set: node list)
                    res = c.finish(self.api, spec, res, deadline) or {}
                if not user_identity(spec):  # an older trainvm's VM (system-assigned) may lack them
                    grant_roles(self.api, spec, principal_of(self.api, spec, res))
                return c.record(self.api, res, notes, True)
        except AttemptInProgressError:
            raise  # the other attempt's resources and group are left to it
        except ProviderError as exc:
            note = self.lease.cleanup(n.rg, spec, exc, attempt) if cleanup else None
            if note:
                exc.args = (f"{exc}; {note}",)
            raise
        if joined:  # the attempt this `up` waited on failed: report that, never fail over beside it
            raise AttemptInProgressError(
                f"another `trainvm up` ({other or 'no attempt tag'}) was creating {spec.name} and its create ended "
                f"{_props(res).get('provisioningState') or f'with the {c.kind} deleted'} (it goes on with its own "
                "failover); this `up` wrote nothing", name=spec.name, where=str(res.get("location") or n.rg),
                other=other, code="OtherAttemptFailed")
        if not res or _foreign_live(res, attempt) or _foreign_live(self.api.get_group(n.rg), attempt):
            return None  # gone, or another live attempt's failed resource/group: its own cleanup decides
        self.lease.drop_vm_group(n.rg, spec.name)  # Failed/Canceled leftover: start again from nothing
        return None

    def await_other_attempt(self, rg: str, spec: LaunchSpec, notes: list[str], deadline: float,
                            attempt: str) -> InstanceRecord | None:
        """While another live attempt (another ``up`` process) holds the group's lease, never touch the group:
        wait for its VM and return it (``existing``). None when no live attempt held it at the first look (no group,
        or a lease that expired: a killed ``up``). Once this ``up`` has waited on a live attempt it never creates on
        its own: that attempt's lease ending without a VM (its create failed and it cleaned up, going on with its
        own failover), or the deadline, is AttemptInProgressError, which stops failover."""
        c = compute_for(spec)
        owner: list[str | None] = [None]
        seen: list[str] = []  # the live attempt this `up` waited on

        def check() -> InstanceRecord | None | object:
            group = self.api.get_group(rg)
            owner[0] = _lease(group)
            if group is None or owner[0] in (None, attempt) or not _lease_live(group):
                if seen:
                    raise AttemptInProgressError(
                        f"another `trainvm up` ({seen[0]}) was creating {spec.name} in resource group {rg} and gave "
                        "it up without a VM (its create failed; it goes on with its own failover)",
                        name=spec.name, where=rg, other=seen[0], code="OtherAttemptFailed")
                return None
            seen[:] = [str(owner[0])]
            res = c.get(self.api, spec.name)
            if res is not None and c.complete(res, spec):
                if (res.get("tags") or {}).get("trainvm-hash") != spec.labels.get("trainvm-hash"):
                    return self._adopt(res, spec, notes, deadline, attempt)  # raises ConflictError
                return c.record(self.api, res, [*notes, f"created by another `trainvm up` ({owner[0]})"], True)
            return WAITING

        def timed_out(last: object) -> ProviderError:
            return AttemptInProgressError(f"another `trainvm up` ({owner[0]}) is still creating {spec.name} after "
                                          f"{self.api.op_timeout:g} s; not touching its resource group {rg}",
                                          name=spec.name, where=rg, other=owner[0])

        found = poll(check, ready=lambda r: r is not WAITING, deadline=deadline, timed_out=timed_out,
                     interval=self.api.poll_seconds, clock=self.api.clock, sleep=self.api.sleep)
        return found if isinstance(found, InstanceRecord) else None
