"""Who owns an Azure create's resource group, and cleaning it up (``GroupLease``, a part of ``AzureProvider``).

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
from typing import TypeVar

from provisioner.providers import base
from provisioner.providers.azure.api import AzureApi
from provisioner.providers.azure.arm import Arm, Props
from provisioner.providers.azure.roles import revoke_vm_payload_reader
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


T = TypeVar("T")


def _props(res: Arm) -> Props:
    return res.get("properties") or {}


def refuse_foreign(res: Arm, spec: LaunchSpec, rg: str, kind: str, what: str) -> None:
    """A ``kind`` ("VM", "scale set") called ``spec.name`` already exists: raise ConflictError unless trainvm made it
    for this version of the profile (same hash); ``what`` names it in the second message ("VM", "cluster")."""
    base.refuse_foreign(res.get("tags") or {}, spec, f"a {kind}", f"in resource group {rg}", other=f"a {what}",
                        other_where=f"({res.get('location')})")


def refuse_store_group(group: Arm, rg: str) -> None:
    """A VM name whose group would be a region's payload store (``trainvm-payload-<region>``, azure_store): never
    created into, deleted or cleaned up as a VM's group (it holds every VM's payload of that region)."""
    if ((group.get("tags") or {}).get("trainvm-payload-store")) == "true":
        raise ConflictError(f"resource group {rg} is trainvm's payload store for {group.get('location')}, not a VM's "
                            "group; choose another VM name (--name)", code="PayloadStoreGroup")


def _lease(group: Arm | None) -> str | None:
    return ((group or {}).get("tags") or {}).get(LEASE)


def _lease_live(group: Arm) -> bool:
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


def _foreign_live(res: Arm | None, attempt: str | None) -> bool:
    """``res`` (a group or a VM) names another attempt as its owner, and that attempt may still be at work."""
    owner = _lease(res)
    return res is not None and owner not in (None, attempt) and _lease_live(res)


class GroupLease:
    """The lease and cleanup part of ``AzureProvider``, on the API client ``api``. Keeps no state: the calling
    create's lease id (``attempt``) is passed in."""

    def __init__(self, api: AzureApi) -> None:
        self.api = api

    def put(self, rg: str, deadline: float, attempt: str, fn: Callable[[], T]) -> T:
        """A PUT in this attempt's group. ARM refuses a PUT on a resource whose own PUT is still running (409
        Conflict); when that PUT came from another `up` that raced us for the group, the lease holder waits for
        it and sends its own again (the bodies are the same), so a loser's writes never fail the owner."""
        def ours_held_up(exc: BaseException) -> bool:
            return (isinstance(exc, ProviderError) and exc.code in CONFLICT_CODES
                    and _lease(self.api.get_group(rg)) == attempt)

        def timed_out(last: BaseException) -> BaseException:  # past the deadline: ARM's last refusal
            return last

        return poll(lambda: self.api.call(fn), deadline=deadline, timed_out=timed_out, transient=ours_held_up,
                    tries=1 << 30, backoff=max(self.api.poll_seconds, 0.05), clock=self.api.clock, sleep=self.api.sleep)

    def get_compute(self, rg: str, name: str) -> Arm | None:
        """The VM, else the scale set, called ``name`` in ``rg`` (what a create may have put there)."""
        return self.api.get_vm(rg, name, expand=None) or self.api.get_scale_set(name)

    def refuse_deleting_group(self, rg: str, name: str) -> None:
        """Stop before anything is sent when the group is still being deleted (``GroupBeingDeletedError``)."""
        if _props(self.api.get_group(rg) or {}).get("provisioningState") == "Deleting":
            raise GroupBeingDeletedError(rg, name)

    def lost(self, spec: LaunchSpec, rg: str) -> InstanceRecord:
        raise AttemptInProgressError(f"another `trainvm up` took over resource group {rg} of {spec.name} and gave it up "
                                     "without a VM (its create failed; it goes on with its own failover)",
                                     name=spec.name, where=rg, code="AttemptLost")

    def vanished(self, rg: str, spec: LaunchSpec, exc: ProviderError, attempt: str | None = None,
                 sent: bool = True) -> ProviderError:
        """A failure because someone deleted the group under a pending create (``trainvm down`` during ``up``).
        Before this attempt's VM PUT was accepted, a group that another attempt holds and is deleting is that
        attempt's cleanup (it lost its VM): this attempt is lost too (``AttemptLost``), not deleted by a user."""
        try:
            group = self.api.get_group(rg)
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

    def prepare_group(self, rg: str, location: str, deadline: float, name: str | None = None) -> Arm | None:
        """Make room for the group: a trainvm leftover being deleted or in another region must be gone first.
        The VM or scale set ``name`` found in a group of another region is returned, not deleted (another `up` created it)."""
        group = self.api.get_group(rg)
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
            res = self.get_compute(rg, name) if name else None
            if res is not None:
                return res
            if name:
                self.drop_vm_group(rg, name)
            else:
                self.api.delete_group(rg, wait=True)

        def still_there(last: Arm | None) -> ProviderError:
            return RetryExhaustedError(f"resource group {rg} is still being deleted", code="OperationTimeout")

        poll(lambda: self.api.get_group(rg), ready=lambda g: g is None, deadline=deadline,
             interval=self.api.poll_seconds, clock=self.api.clock, sleep=self.api.sleep, timed_out=still_there)
        return None

    def cleanup(self, rg: str, spec: LaunchSpec, failed: ProviderError | None = None,
                attempt: str | None = None) -> str | None:
        """Delete what a failed attempt left (a group carrying this profile's hash and this attempt's lease), wait,
        and check that ARM answers "not found"; ``failed`` is marked verified or left; a note when not verified."""
        def mark(ok: bool, what: str = "") -> None:
            if failed is not None:
                failed.verified() if ok else failed.leaves(what)
        try:
            group = self.api.get_group(rg)
            tags = (group or {}).get("tags") or {}
            if group is None or tags.get("trainvm-hash") != spec.labels.get("trainvm-hash"):
                mark(True)
                return None
            res = self.get_compute(rg, spec.name)
            creator = _lease(res)
            if res is not None and creator != attempt and (creator is None or _lease_live(res)):
                mark(True)  # a VM or scale set this attempt did not create: never deleted by its cleanup
                return (f"resource group {rg} holds {spec.name} of another `trainvm up` ({creator or 'no attempt tag'}) "
                        "and is left to it")
            owner = tags.get(LEASE)
            if res is None and owner not in (None, attempt) and _lease_live(group):
                mark(True)  # another live `up` holds it now: its resources are that attempt's to keep or delete
                return f"resource group {rg} is left to the other `trainvm up` ({owner}) that now holds it"
            self.drop_vm_group(rg, spec.name)
            if self.api.get_group(rg) is None:
                mark(True)
                return None
            mark(False, f"resource group {rg}")
            return f"resource group {rg} still exists after its deletion; run `trainvm down {spec.name}`"
        except ProviderError as exc:
            mark(False, f"resource group {rg}")
            return f"deleting resource group {rg} failed ({exc}); run `trainvm down {spec.name}`"

    def drop_vm_group(self, rg: str, name: str) -> bool:
        """Delete VM ``name``'s group and wait; first its identity's payload reader assignment, which lives outside
        the group (on the payload store's container) and would stay as an orphan (azure_roles)."""
        revoke_vm_payload_reader(self.api, name, rg)
        return self.api.delete_group(rg, wait=True)
