"""One Azure create of 1..N nodes as a transaction with an owner (mixed into ``AzureProvider``; the group's lease
and the cleanup are in ``azure_lease``; the compute step, a VM for one node or a scale set for N, and why a group
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
  (``azure_lease._cleanup``), so a loser can no longer delete the winner's group.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provisioner.providers.azure import request as R
from provisioner.providers.azure.compute import IN_FLIGHT, ScaleSet, Vm, compute_for, other_kind
from provisioner.providers.azure.identity import user_identity
from provisioner.providers.azure.lease import (
    CONFLICT_CODES,
    GROUP_DELETING,
    LEASE,
    LEASE_UNTIL,
    GroupBeingDeletedError,
    _foreign_live,
    _lease,
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


def new_attempt_id() -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class CreateTransaction:
    """Needs the ``AzureProvider`` calls (``_call``, ``_wait``, ``_get_vm``, ``_get_group``, ``_record``, ``api``)
    and the ``GroupLease`` ones (``_put``, ``_await_other_attempt``, ``_prepare_group``, ``_cleanup``, ...)."""

    if TYPE_CHECKING:  # provided by AzureProvider / GroupLease (declared so that mypy checks this mixin)
        subscription_id: str
        poll_seconds: float
        op_timeout: float
        _sleep: Callable[[float], None]
        _clock: Callable[[], float]

        def api(self) -> Any: ...
        def _call(self, *args: Any, **kwargs: Any) -> Any: ...
        def _wait(self, *args: Any, **kwargs: Any) -> Any: ...
        def _get_group(self, *args: Any, **kwargs: Any) -> Any: ...
        def _put(self, *args: Any, **kwargs: Any) -> Any: ...
        def _await_other_attempt(self, *args: Any, **kwargs: Any) -> Any: ...
        def _prepare_group(self, *args: Any, **kwargs: Any) -> Any: ...
        def _cleanup(self, *args: Any, **kwargs: Any) -> Any: ...
        def _drop_vm_group(self, *args: Any, **kwargs: Any) -> Any: ...
        def _vanished(self, *args: Any, **kwargs: Any) -> Any: ...
        def _lost(self, *args: Any, **kwargs: Any) -> Any: ...
        def _refuse_deleting_group(self, *args: Any, **kwargs: Any) -> Any: ...
        def image_for(self, *args: Any, **kwargs: Any) -> Any: ...

    def _create(self, spec: LaunchSpec, offer: Offer, key: str) -> InstanceRecord:
        """Create the ``spec.nodes`` nodes of ``spec.name`` (compute_for: one VM, or a scale set of N): the
        rank-0 record (a single VM's record has no cluster fields)."""
        c = compute_for(spec)
        n, deadline = R.names(spec.name), self._clock() + self.op_timeout
        notes = R.notes(spec, offer, self.subscription_id)
        attempt = new_attempt_id()  # this create's owner id: a local, never kept on the provider (parallel creates)
        self._refuse_deleting_group(n.rg, spec.name)  # no region can succeed until that deletion ends
        self._refuse_other_kind(c, spec)
        existing = c.get(self, spec.name)
        if existing is not None:
            adopted = self._adopt(existing, spec, notes, deadline, attempt)
            if adopted is not None:
                return adopted
        other = self._await_other_attempt(n.rg, spec, notes, deadline, attempt)
        if other is not None:
            return other
        racer = self._prepare_group(n.rg, offer.region, deadline, spec.name)
        if racer is not None:  # another `up` created it meanwhile (in another region): never delete its group
            return self._join(racer, spec, notes, deadline, attempt, cleanup=True)
        image = self.image_for(spec, offer)
        owner = {LEASE: attempt, LEASE_UNTIL: str(int(time.time() + self.op_timeout + 60))}
        api, group_body = self.api(), R.group_body(spec, offer.region)
        group_body["tags"] = {**group_body["tags"], **owner}
        made_group = sent = False
        try:
            try:
                self._call(lambda: api.resource.resource_groups.create_or_update(n.rg, group_body))
            except ProviderError as exc:  # its deletion began since the check above (a racing cleanup or down)
                if exc.code == GROUP_DELETING:
                    raise GroupBeingDeletedError(n.rg, spec.name) from exc
                raise
            made_group = True
            if _lease(self._get_group(n.rg)) != attempt:  # another `up` wrote the group just after us: its attempt
                # owns the group; its compute is ours too, and when it gives up (its cleanup deletes the group) this
                # attempt is over as well (never write into a group another attempt deleted or is deleting)
                return self._await_other_attempt(n.rg, spec, notes, deadline, attempt) or self._lost(spec, n.rg)
            try:
                vnet = self._put(n.rg, deadline, attempt, lambda: api.network.virtual_networks.begin_create_or_update(
                    n.rg, n.vnet, R.vnet_body(spec, offer.region)))
                nsg = self._put(n.rg, deadline, attempt, lambda: api.network.network_security_groups.begin_create_or_update(
                    n.rg, n.nsg, R.nsg_body(spec, offer.region)))
                self._wait(vnet, deadline, f"virtual network {n.vnet}")
                self._wait(nsg, deadline, f"network security group {n.nsg}")
            except ProviderError as exc:  # a 409 while another `up` holds the group: wait for its compute instead
                if exc.code not in CONFLICT_CODES or _lease(self._get_group(n.rg)) == attempt:
                    raise
            if _lease(self._get_group(n.rg)) != attempt:  # lost the group to another `up`: its compute is ours too
                return self._await_other_attempt(n.rg, spec, notes, deadline, attempt) or self._lost(spec, n.rg)
            if not user_identity(spec):  # the identity and its roles exist before anything that bills (issue 36 item 5)
                grant_roles(self, spec, ensure_identity(self, spec, offer.region, deadline))
            racer = c.get(self, spec.name)
            if racer is not None:  # another `up` passed its lease check too and its PUT came first
                return self._join(racer, spec, notes, deadline, attempt)
            try:
                poller = c.put(self, spec, offer, owner, image, key, deadline)  # it names its creator (owner tags)
            except ProviderError as exc:
                racer = c.get(self, spec.name) if exc.code in CONFLICT_CODES else None
                if racer is None:
                    raise
                return self._join(racer, spec, notes, deadline, attempt)  # ARM refused ours: the other PUT won
            sent = True
            self._wait_compute(c, poller, spec, deadline)
            created = c.get(self, spec.name)
            created = c.finish(self, spec, created, deadline) if created is not None else None
            if created is None:
                raise VanishedError(f"{spec.name} was deleted right after its creation finished", code="DeletedDuringCreate")
            return c.record(self, created, notes, False)
        except Exception as exc:
            if isinstance(exc, GroupBeingDeletedError):
                raise  # not this attempt's group: nothing to clean up, and deleting it again would wait for it
            if made_group and isinstance(exc, ProviderError) \
                    and not isinstance(exc, (VanishedError, AttemptInProgressError)):  # the other attempt's cleanup
                exc = self._vanished(n.rg, spec, exc, attempt, sent)
            note = self._cleanup(n.rg, spec, exc if isinstance(exc, ProviderError) else None, attempt)
            if note and isinstance(exc, ProviderError):
                exc.args = (f"{exc}; {note}",)
            raise exc

    def _wait_compute(self, c: Vm | ScaleSet, poller: Any, spec: LaunchSpec, deadline: float) -> None:
        c.wait(self, poller, spec, deadline)

    def _refuse_other_kind(self, c: Vm | ScaleSet, spec: LaunchSpec) -> None:
        """A VM and a scale set of one name would share the group (``trainvm-NAME``): never write one beside the other."""
        other = other_kind(c)
        found = other.get(self, spec.name)
        if found is not None:
            raise ConflictError(f"a {other.kind} named {spec.name} exists in resource group {R.names(spec.name).rg} "
                                f"({found.get('location')}); this profile makes a {c.kind}: run `trainvm down "
                                f"{spec.name}` or pass --name")

    def _join(self, res: dict[str, Any], spec: LaunchSpec, notes: list[str], deadline: float, attempt: str, *,
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

    def _adopt(self, res: dict[str, Any], spec: LaunchSpec, notes: list[str], deadline: float,
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

        def settled(v: dict[str, Any]) -> bool:
            state = _props(v).get("provisioningState")
            return state not in IN_FLIGHT and not (foreign and state == "Succeeded" and not c.complete(v, spec))

        joined = foreign and not settled(res)
        mark = f"created by another `trainvm up` ({other or 'no attempt tag'})"
        if joined and not any(note.startswith("created by another") for note in notes):
            notes = [*notes, mark]  # found before this `up` wrote anything: the record says whose it is

        def timed_out(last: dict[str, Any]) -> ProviderError:
            state = _props(last).get("provisioningState")
            if joined:
                return AttemptInProgressError(f"another `trainvm up` ({other or 'no attempt tag'}) is still creating "
                                              f"{spec.name} ({state} after {self.op_timeout:g} s)", name=spec.name,
                                              where=str(res.get("location") or n.rg), other=other)
            return RetryExhaustedError(f"{spec.name} stayed {state} for {self.op_timeout:g} s (TRAINVM_AZURE_OP_TIMEOUT)",
                                       code="OperationTimeout")

        try:
            if not settled(res):  # a killed or a concurrent `up` is creating it
                res = poll(lambda: c.get(self, spec.name) or {}, ready=settled, deadline=deadline,
                           interval=self.poll_seconds, clock=self._clock, sleep=self._sleep, timed_out=timed_out)
            if _props(res).get("provisioningState") == "Succeeded":
                if not c.complete(res, spec):  # a killed `up` stopped before its read-back (scale set: node list)
                    res = c.finish(self, spec, res, deadline) or {}
                if not user_identity(spec):  # an older trainvm's VM (system-assigned) may lack them
                    grant_roles(self, spec, principal_of(self, spec, res))
                return c.record(self, res, notes, True)
        except AttemptInProgressError:
            raise  # the other attempt's resources and group are left to it
        except ProviderError as exc:
            note = self._cleanup(n.rg, spec, exc, attempt) if cleanup else None
            if note:
                exc.args = (f"{exc}; {note}",)
            raise
        if joined:  # the attempt this `up` waited on failed: report that, never fail over beside it
            raise AttemptInProgressError(
                f"another `trainvm up` ({other or 'no attempt tag'}) was creating {spec.name} and its create ended "
                f"{_props(res).get('provisioningState') or f'with the {c.kind} deleted'} (it goes on with its own "
                "failover); this `up` wrote nothing", name=spec.name, where=str(res.get("location") or n.rg),
                other=other, code="OtherAttemptFailed")
        if not res or _foreign_live(res, attempt) or _foreign_live(self._get_group(n.rg), attempt):
            return None  # gone, or another live attempt's failed resource/group: its own cleanup decides
        self._drop_vm_group(n.rg, spec.name)  # Failed/Canceled leftover: start again from nothing
        return None
