"""Who owns an Azure create's resource group, and cleaning it up (mixed into ``AzureProvider``).

The group is the attempt's transaction and carries a lease in its tags: ``trainvm-attempt`` =
``host:pid:random`` and ``trainvm-lease-until`` (epoch seconds, now + the operation timeout + 60 s). An
attempt deletes a group only while it holds the lease; an ``up`` that finds another live lease (not expired
and, when on this host, its process still runs) waits for that attempt's VM and returns it instead of
writing to the group, and a lease holder retries a PUT that another racing ``up`` holds up (409 Conflict).
Once an ``up`` has waited on another live attempt it never creates on its own: that attempt giving up (its
create failed, it goes on with its own failover) or the deadline is AttemptInProgressError, which stops
``provision``'s failover (any other region or cloud would be a second, billed VM of the same name).

Why a lease tag and not a group per attempt: the group name is derived from the VM name, which is how
``down``/``status`` find a VM without local state; a group per attempt would need a lookup by tag and could
still leave two VMs of one name. Why not an ARM management lock: a CanNotDelete lock needs
Microsoft.Authorization/locks/* (Owner), and it would also block the owner's own cleanup and ``down``.
Remaining window: ARM has no conditional group create, so two processes that both see no group and PUT it
within one round trip both write a lease; the last write wins, each re-reads it after its PUT and before
its VM PUT, and only the holder deletes.

Cleanup is verified: after the group's deletion has been awaited, ARM must answer "not found" for it, else
the failed attempt's error records the group in ``left_behind``. A group that disappeared or is Deleting
under a pending create was deleted by someone else (``trainvm down``): VanishedError, never a failover.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provisioner.providers import base
from provisioner.providers.base import (
    AttemptInProgressError,
    ConflictError,
    InstanceRecord,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    VanishedError,
)
from provisioner.providers.poll import poll

LEASE, LEASE_UNTIL = "trainvm-attempt", "trainvm-lease-until"
CONFLICT_CODES = frozenset({"Conflict", "AnotherOperationInProgress"})  # a PUT refused while another one runs (409)
WAITING = object()  # _await_other_attempt: the other attempt is still at work
MANAGED = "trainvm-managed"


GROUP_DELETING = "ResourceGroupBeingDeleted"  # ARM's 409 for a PUT of, or into, a group whose deletion runs


class GroupBeingDeletedError(AttemptInProgressError):
    """The VM's resource group (``trainvm-NAME``, the same name in every region) is still being deleted: an earlier
    attempt's cleanup or a ``trainvm down`` that did not wait. ARM refuses new resources in it until the deletion
    ends, and every other region would meet the same group, so ``provision`` stops at once (exit 5, not ready yet)
    instead of waiting the operation timeout once per region. Nothing was created."""

    def __init__(self, rg: str, name: str) -> None:
        super().__init__(f"resource group {rg} of an earlier attempt is still being deleted (provisioningState "
                         "Deleting); Azure creates nothing in it until the deletion ends, and every region would use "
                         "that same group", name=name, where=rg, code=GROUP_DELETING)
        self.hint = (f"wait for the deletion to end (`az group show -n {rg} --query properties.provisioningState`; "
                     f"usually minutes), or run `trainvm down {name}` (it waits for it), then `trainvm up` again")
        #: what ``provision`` says when it stops (instead of "a second VM would be created")
        self.stop_reason = "nothing can be created under that name in any region until the deletion ends"


def _props(res: dict[str, Any]) -> dict[str, Any]:
    return res.get("properties") or {}


def refuse_foreign(res: dict[str, Any], spec: Any, rg: str, kind: str, what: str) -> None:
    """A ``kind`` ("VM", "scale set") called ``spec.name`` already exists: raise ConflictError unless trainvm made it
    for this version of the profile (same hash); ``what`` names it in the second message ("VM", "cluster")."""
    base.refuse_foreign(res.get("tags") or {}, spec, f"a {kind}", f"in resource group {rg}", other=f"a {what}",
                        other_where=f"({res.get('location')})")


def refuse_store_group(group: dict[str, Any], rg: str) -> None:
    """A VM name whose group would be a region's payload store (``trainvm-payload-<region>``, azure_store): never
    created into, deleted or cleaned up as a VM's group (it holds every VM's payload of that region)."""
    if ((group.get("tags") or {}).get("trainvm-payload-store")) == "true":
        raise ConflictError(f"resource group {rg} is trainvm's payload store for {group.get('location')}, not a VM's "
                            "group; choose another VM name (--name)", code="PayloadStoreGroup")


def _lease(group: dict[str, Any] | None) -> str | None:
    return ((group or {}).get("tags") or {}).get(LEASE)


def _lease_live(group: dict[str, Any]) -> bool:
    """The group's lease has not expired, and when its owner runs on this host, that process still exists."""
    tags = group.get("tags") or {}
    try:
        if float(tags.get(LEASE_UNTIL) or 0) <= time.time():
            return False
    except ValueError:
        return False
    host, _, rest = str(tags.get(LEASE) or "").partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname()[:40] and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
    return True


def _foreign_live(res: dict[str, Any] | None, attempt: str | None) -> bool:
    """``res`` (a group or a VM) names another attempt as its owner, and that attempt may still be at work."""
    owner = _lease(res)
    return res is not None and owner not in (None, attempt) and _lease_live(res)


class GroupLease:
    """Needs: _call, _wait, _get_group, _get_vm, _adopt, _sleep, _clock, poll_seconds, op_timeout.
    Keeps no state: the calling create's lease id (``attempt``) is passed in."""

    if TYPE_CHECKING:  # provided by AzureProvider (declared so that mypy checks this mixin)
        poll_seconds: float
        op_timeout: float
        _sleep: Callable[[float], None]
        _clock: Callable[[], float]

        def api(self) -> Any: ...
        def _call(self, *args: Any, **kwargs: Any) -> Any: ...
        def _wait(self, *args: Any, **kwargs: Any) -> Any: ...
        def _get_group(self, *args: Any, **kwargs: Any) -> Any: ...
        def _get_vm(self, *args: Any, **kwargs: Any) -> Any: ...
        def _adopt(self, *args: Any, **kwargs: Any) -> Any: ...
        def _revoke_payload_reader(self, *args: Any, **kwargs: Any) -> Any: ...

    def _put(self, rg: str, deadline: float, attempt: str, fn: Callable[[], Any]) -> Any:
        """A PUT in this attempt's group. ARM refuses a PUT on a resource whose own PUT is still running (409
        Conflict); when that PUT came from another `up` that raced us for the group, the lease holder waits for
        it and sends its own again (the bodies are the same), so a loser's writes never fail the owner."""
        def ours_held_up(exc: BaseException) -> bool:
            return (isinstance(exc, ProviderError) and exc.code in CONFLICT_CODES
                    and _lease(self._get_group(rg)) == attempt)

        return poll(lambda: self._call(fn), deadline=deadline, timed_out=lambda last: last, transient=ours_held_up,
                    tries=1 << 30, backoff=max(self.poll_seconds, 0.05), clock=self._clock, sleep=self._sleep)

    def _get_compute(self, rg: str, name: str) -> dict[str, Any] | None:
        """The VM, else the scale set, called ``name`` in ``rg`` (what a create may have put there)."""
        from provisioner.providers.azure.group import get_scale_set  # lazy: cycle (group imports this module)

        return self._get_vm(rg, name, expand=None) or get_scale_set(self, name)

    def _refuse_deleting_group(self, rg: str, name: str) -> None:
        """Stop before anything is sent when the group is still being deleted (``GroupBeingDeletedError``)."""
        if _props(self._get_group(rg) or {}).get("provisioningState") == "Deleting":
            raise GroupBeingDeletedError(rg, name)

    def _lost(self, spec: LaunchSpec, rg: str) -> InstanceRecord:
        raise AttemptInProgressError(f"another `trainvm up` took over resource group {rg} of {spec.name} and gave it up "
                                     "without a VM (its create failed; it goes on with its own failover)",
                                     name=spec.name, where=rg, code="AttemptLost")

    def _vanished(self, rg: str, spec: LaunchSpec, exc: ProviderError, attempt: str | None = None,
                  sent: bool = True) -> ProviderError:
        """A failure because someone deleted the group under a pending create (``trainvm down`` during ``up``).
        Before this attempt's VM PUT was accepted, a group that another attempt holds and is deleting is that
        attempt's cleanup (it lost its VM): this attempt is lost too (``AttemptLost``), not deleted by a user."""
        try:
            group = self._get_group(rg)
        except ProviderError:
            return exc
        if group is not None and _props(group).get("provisioningState") != "Deleting":
            return exc
        if not sent and group is not None and _lease(group) not in (None, attempt):
            lost = AttemptInProgressError(f"another `trainvm up` ({_lease(group)}) that held resource group {rg} gave up "
                                          f"and is deleting it ({exc})", name=spec.name, where=rg,
                                          other=_lease(group), code="AttemptLost")
            lost.__cause__ = exc
            return lost
        gone = VanishedError(f"resource group {rg} of {spec.name} was deleted while its create was in progress "
                             f"({exc})", code="DeletedDuringCreate")
        gone.__cause__ = exc
        return gone

    def _await_other_attempt(self, rg: str, spec: LaunchSpec, notes: list[str], deadline: float,
                             attempt: str) -> InstanceRecord | None:
        """While another live attempt (another ``up`` process) holds the group's lease, never touch the group:
        wait for its VM and return it (``existing``). None when no live attempt held it at the first look (no group,
        or a lease that expired: a killed ``up``). Once this ``up`` has waited on a live attempt it never creates on
        its own: that attempt's lease ending without a VM (its create failed and it cleaned up, going on with its
        own failover), or the deadline, is AttemptInProgressError, which stops failover."""
        from provisioner.providers.azure.compute import compute_for  # lazy: cycle (compute imports this module)

        c = compute_for(spec)
        owner: list[str | None] = [None]
        seen: list[str] = []  # the live attempt this `up` waited on

        def check() -> InstanceRecord | None | object:
            group = self._get_group(rg)
            owner[0] = _lease(group)
            if group is None or owner[0] in (None, attempt) or not _lease_live(group):
                if seen:
                    raise AttemptInProgressError(
                        f"another `trainvm up` ({seen[0]}) was creating {spec.name} in resource group {rg} and gave "
                        "it up without a VM (its create failed; it goes on with its own failover)",
                        name=spec.name, where=rg, other=seen[0], code="OtherAttemptFailed")
                return None
            seen[:] = [str(owner[0])]
            res = c.get(self, spec.name)
            if res is not None and c.complete(res, spec):
                if (res.get("tags") or {}).get("trainvm-hash") != spec.labels.get("trainvm-hash"):
                    return self._adopt(res, spec, notes, deadline, attempt)  # raises ConflictError
                return c.record(self, res, [*notes, f"created by another `trainvm up` ({owner[0]})"], True)
            return WAITING

        def timed_out(last: Any) -> ProviderError:
            return AttemptInProgressError(f"another `trainvm up` ({owner[0]}) is still creating {spec.name} after "
                                          f"{self.op_timeout:g} s; not touching its resource group {rg}",
                                          name=spec.name, where=rg, other=owner[0])

        found = poll(check, ready=lambda r: r is not WAITING, deadline=deadline, timed_out=timed_out,
                     interval=self.poll_seconds, clock=self._clock, sleep=self._sleep)
        return None if found is WAITING else found  # type: ignore[return-value]

    def _prepare_group(self, rg: str, location: str, deadline: float, name: str | None = None) -> dict[str, Any] | None:
        """Make room for the group: a trainvm leftover being deleted or in another region must be gone first.
        The VM or scale set ``name`` found in a group of another region is returned, not deleted (another `up` created it)."""
        group = self._get_group(rg)
        if group is None:
            return None
        refuse_store_group(group, rg)
        if (group.get("tags") or {}).get(MANAGED) != "true":
            raise ConflictError(f"resource group {rg} exists and is not managed by trainvm; pass --name to choose "
                                "another VM name")
        state = _props(group).get("provisioningState")
        if state != "Deleting" and group.get("location") == location:
            return None  # a leftover of an interrupted attempt here: the PUTs below update it in place
        if state != "Deleting":
            res = self._get_compute(rg, name) if name else None
            if res is not None:
                return res
            if name:
                self._drop_vm_group(rg, name)
            else:
                self._delete_group(rg, wait=True)
        poll(lambda: self._get_group(rg), ready=lambda g: g is None, deadline=deadline, interval=self.poll_seconds,
             clock=self._clock, sleep=self._sleep,
             timed_out=lambda last: RetryExhaustedError(f"resource group {rg} is still being deleted",
                                                        code="OperationTimeout"))
        return None

    def _cleanup(self, rg: str, spec: LaunchSpec, failed: ProviderError | None = None,
                 attempt: str | None = None) -> str | None:
        """Delete what a failed attempt left (a group carrying this profile's hash and this attempt's lease), wait,
        and check that ARM answers "not found"; ``failed`` is marked verified or left; a note when not verified."""
        def mark(ok: bool, what: str = "") -> None:
            if failed is not None:
                failed.verified() if ok else failed.leaves(what)
        try:
            group = self._get_group(rg)
            tags = (group or {}).get("tags") or {}
            if group is None or tags.get("trainvm-hash") != spec.labels.get("trainvm-hash"):
                mark(True)
                return None
            res = self._get_compute(rg, spec.name)
            creator = _lease(res)
            if res is not None and creator != attempt and (creator is None or _lease_live(res)):
                mark(True)  # a VM or scale set this attempt did not create: never deleted by its cleanup
                return (f"resource group {rg} holds {spec.name} of another `trainvm up` ({creator or 'no attempt tag'}) "
                        "and is left to it")
            owner = tags.get(LEASE)
            if res is None and owner not in (None, attempt) and _lease_live(group):
                mark(True)  # another live `up` holds it now: its resources are that attempt's to keep or delete
                return f"resource group {rg} is left to the other `trainvm up` ({owner}) that now holds it"
            self._drop_vm_group(rg, spec.name)
            if self._get_group(rg) is None:
                mark(True)
                return None
            mark(False, f"resource group {rg}")
            return f"resource group {rg} still exists after its deletion; run `trainvm down {spec.name}`"
        except ProviderError as exc:
            mark(False, f"resource group {rg}")
            return f"deleting resource group {rg} failed ({exc}); run `trainvm down {spec.name}`"

    def _drop_vm_group(self, rg: str, name: str) -> bool:
        """Delete VM ``name``'s group and wait; first its identity's payload reader assignment, which lives outside
        the group (on the payload store's container) and would stay as an orphan (azure_roles)."""
        self._revoke_payload_reader(name, rg)
        return self._delete_group(rg, wait=True)

    def _delete_group(self, rg: str, *, wait: bool) -> bool:
        poller = self._call(lambda: self.api().resource.resource_groups.begin_delete(rg), missing=None)
        if poller is None:
            return False
        if wait:
            self._wait(poller, self._clock() + self.op_timeout, f"deleting resource group {rg}")
        return True
