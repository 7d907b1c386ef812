"""One Azure VM create as a transaction with an owner (mixed into ``AzureProvider``; the group's lease and
the cleanup are in ``azure_lease``).

Create = resource group -> VNet + NSG (in parallel) -> VM (its NIC and public IP are VM-managed) -> the role
assignment of the VM's identity when it must stop/delete itself (``azure_roles``). Idempotent: deterministic
names; an existing VM with this profile hash is returned (waiting for it if a killed ``up`` left it creating);
a Failed leftover whose creator is gone is deleted with its group and created again; another hash ->
ConflictError.

Ownership of the VM. Every attempt has an id (``host:pid:random``), written to the group's lease tag and to
the VM's own tags (``trainvm-attempt`` / ``trainvm-lease-until``). The group tag is last-writer-wins (ARM has
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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provisioner.catalog.models import Offer
from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import request as R
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
from provisioner.providers.azure.roles import grant_lifecycle_role, grant_payload_reader
from provisioner.providers.base import (
    AttemptInProgressError,
    InstanceRecord,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    VanishedError,
)
from provisioner.providers.poll import poll

IN_FLIGHT = ("Creating", "Updating")


def new_attempt_id() -> str:
    import uuid

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
        def _get_vm(self, *args: Any, **kwargs: Any) -> Any: ...
        def _record(self, *args: Any, **kwargs: Any) -> Any: ...
        def _put(self, *args: Any, **kwargs: Any) -> Any: ...
        def _await_other_attempt(self, *args: Any, **kwargs: Any) -> Any: ...
        def _prepare_group(self, *args: Any, **kwargs: Any) -> Any: ...
        def _cleanup(self, *args: Any, **kwargs: Any) -> Any: ...
        def _delete_group(self, *args: Any, **kwargs: Any) -> Any: ...
        def _vanished(self, *args: Any, **kwargs: Any) -> Any: ...
        def _lost(self, *args: Any, **kwargs: Any) -> Any: ...
        def _refuse_deleting_group(self, *args: Any, **kwargs: Any) -> Any: ...
        def image_for(self, *args: Any, **kwargs: Any) -> Any: ...

    def _create_vm(self, spec: LaunchSpec, offer: Offer, key: str) -> InstanceRecord:
        n, deadline = R.names(spec.name), self._clock() + self.op_timeout
        notes = R.notes(spec, offer, self.subscription_id)
        attempt = new_attempt_id()  # this create's owner id: a local, never kept on the provider (parallel creates)
        self._refuse_deleting_group(n.rg, spec.name)  # no region can succeed until that deletion ends
        existing = self._get_vm(n.rg, spec.name)
        if existing is not None:
            adopted = self._adopt(existing, spec, notes, deadline, attempt)
            if adopted is not None:
                return adopted
        other = self._await_other_attempt(n.rg, spec, notes, deadline, attempt)
        if other is not None:
            return other
        racer = self._prepare_group(n.rg, offer.region, deadline, spec.name)
        if racer is not None:  # another `up` created the VM meanwhile (in another region): never delete its group
            return self._join(racer, spec, notes, deadline, attempt, cleanup=True)
        image = self.image_for(spec, offer)
        body = R.vm_body(spec, offer, subscription_id=self.subscription_id, image=image, ssh_public_key=key)
        owner = {LEASE: attempt, LEASE_UNTIL: str(int(time.time() + self.op_timeout + 60))}
        body["tags"] = {**body["tags"], **owner}  # the VM names its creator: cleanup and racers read it
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
                # owns the group; its VM is ours too, and when it gives up (its cleanup deletes the group) this
                # attempt is over as well (never write into a group another attempt deleted or is deleting)
                return self._await_other_attempt(n.rg, spec, notes, deadline, attempt) or self._lost(spec, n.rg)
            try:
                vnet = self._put(n.rg, deadline, attempt, lambda: api.network.virtual_networks.begin_create_or_update(
                    n.rg, n.vnet, R.vnet_body(spec, offer.region)))
                nsg = self._put(n.rg, deadline, attempt, lambda: api.network.network_security_groups.begin_create_or_update(
                    n.rg, n.nsg, R.nsg_body(spec, offer.region)))
                self._wait(vnet, deadline, f"virtual network {n.vnet}")
                self._wait(nsg, deadline, f"network security group {n.nsg}")
            except ProviderError as exc:  # a 409 while another `up` holds the group: wait for its VM instead
                if exc.code not in CONFLICT_CODES or _lease(self._get_group(n.rg)) == attempt:
                    raise
            if _lease(self._get_group(n.rg)) != attempt:  # lost the group to another `up`: its VM is ours too
                return self._await_other_attempt(n.rg, spec, notes, deadline, attempt) or self._lost(spec, n.rg)
            racer = self._get_vm(n.rg, spec.name)
            if racer is not None:  # another `up` passed its lease check too and its VM PUT came first
                return self._join(racer, spec, notes, deadline, attempt)
            try:
                vm = self._call(lambda: api.compute.virtual_machines.begin_create_or_update(n.rg, spec.name, body))
            except ProviderError as exc:
                racer = self._get_vm(n.rg, spec.name) if exc.code in CONFLICT_CODES else None
                if racer is None:
                    raise
                return self._join(racer, spec, notes, deadline, attempt)  # ARM refused ours: the other PUT won
            sent = True
            self._wait_vm(vm, n, deadline)
            created = self._get_vm(n.rg, spec.name)
            if created is None:
                raise VanishedError(f"{spec.name} was deleted right after its creation finished", code="DeletedDuringCreate")
            grant_lifecycle_role(self, spec, created)  # needs the identity ARM gave the VM
            grant_payload_reader(self, spec, created)  # last: a failure before it leaves no assignment outside the group
            return self._record(created, notes=notes)
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

    def _join(self, vm: dict[str, Any], spec: LaunchSpec, notes: list[str], deadline: float, attempt: str, *,
              cleanup: bool = False) -> InstanceRecord:
        """A VM another attempt created while this one was on its way: wait for it and return it, never write
        over it. When its create failed, this attempt is over (``AttemptLost``; that attempt cleans up).
        ``cleanup``: whether a failure here cleans up itself (False inside ``_create_vm``'s transaction)."""
        other = (vm.get("tags") or {}).get(LEASE) or "unknown"
        adopted = self._adopt(vm, spec, [*notes, f"created by another `trainvm up` ({other})"], deadline, attempt,
                              cleanup=cleanup)
        if adopted is not None:
            return adopted
        raise AttemptInProgressError(f"another `trainvm up` ({other}) created {spec.name} first and its create failed "
                                     "(it goes on with its own failover); this `up` wrote no VM", name=spec.name,
                                     where=R.names(spec.name).rg, other=other, code="OtherAttemptFailed")

    def _wait_vm(self, poller: Any, n: R.Names, deadline: float) -> None:
        """Wait for the VM's creation; a failure without a code (provisioningState polling) takes the code
        from the instance view."""
        try:
            self._wait(poller, deadline, f"virtual machine {n.vm}")
        except ProviderError as exc:
            if exc.code not in (None, "200"):
                raise
            view = self._call(lambda: self.api().compute.virtual_machines.instance_view(n.rg, n.vm), missing=None)
            code, message = errs.code_from_statuses(_wire(view).get("statuses"))
            if code is None:
                raise
            raise errs.classify(errs.Failure(200, code, message)) from exc

    def _adopt(self, vm: dict[str, Any], spec: LaunchSpec, notes: list[str], deadline: float,
               attempt: str | None = None, *, cleanup: bool = True) -> InstanceRecord | None:
        """A VM of that name exists: ours (same hash) is returned once settled; a failed leftover is deleted (None)
        unless another live attempt created it or holds the group (None: that attempt's cleanup decides).
        ``attempt``: the calling create's id."""
        n = R.names(spec.name)
        refuse_foreign(vm, spec, n.rg, "VM", "VM")
        other = _lease(vm)
        # a VM another attempt is creating and may still be at work on (or one without an attempt tag): joined, never
        # deleted; when it ends without a VM this `up` stops (AttemptInProgressError) instead of creating its own
        joined = _props(vm).get("provisioningState") in IN_FLIGHT and (other is None or _foreign_live(vm, attempt))

        def settled(v: dict[str, Any]) -> bool:
            return _props(v).get("provisioningState") not in IN_FLIGHT

        def timed_out(last: dict[str, Any]) -> ProviderError:
            state = _props(last).get("provisioningState")
            if joined and state in IN_FLIGHT:
                return AttemptInProgressError(f"another `trainvm up` ({other or 'no attempt tag'}) is still creating "
                                              f"{spec.name} ({state} after {self.op_timeout:g} s)", name=spec.name,
                                              where=str(vm.get("location") or n.rg), other=other)
            return RetryExhaustedError(f"{spec.name} stayed {state} for {self.op_timeout:g} s (TRAINVM_AZURE_OP_TIMEOUT)",
                                       code="OperationTimeout")

        try:
            if not settled(vm):  # a killed or a concurrent `up` is creating it
                vm = poll(lambda: self._get_vm(n.rg, spec.name) or {}, ready=settled, deadline=deadline,
                          interval=self.poll_seconds, clock=self._clock, sleep=self._sleep, timed_out=timed_out)
        except AttemptInProgressError:
            raise  # the other attempt's VM and group are left to it
        except ProviderError as exc:
            note = self._cleanup(n.rg, spec, exc, attempt) if cleanup else None
            if note:
                exc.args = (f"{exc}; {note}",)
            raise
        if _props(vm).get("provisioningState") == "Succeeded":
            grant_lifecycle_role(self, spec, vm)  # a killed `up` may have stopped before it
            grant_payload_reader(self, spec, vm)
            return self._record(vm, notes=notes, existing=True)
        if joined:  # the attempt this `up` waited on failed: report that, never fail over beside it
            raise AttemptInProgressError(
                f"another `trainvm up` ({other or 'no attempt tag'}) was creating {spec.name} and its create ended "
                f"{_props(vm).get('provisioningState') or 'with the VM deleted'} (it goes on with its own failover); "
                "this `up` wrote no VM", name=spec.name, where=str(vm.get("location") or n.rg), other=other,
                code="OtherAttemptFailed")
        if not vm or _foreign_live(vm, attempt) or _foreign_live(self._get_group(n.rg), attempt):
            return None  # gone, or another live attempt's failed VM/group: its own cleanup decides
        self._delete_group(n.rg, wait=True)  # Failed/Canceled leftover: start again from nothing
        return None


def _wire(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    return obj.as_dict() if hasattr(obj, "as_dict") else dict(obj)
