"""What an interrupted ``up`` leaves, for its one ``aborted: ...`` line (Ctrl-C, or SIGTERM: provisioner/console.py):
nothing; a VM being created (of that name, at that offer's price); or a VM that exists and what it costs per hour
(compute + disks as recorded on it), stopped or running; a VM stopped but still allocated (Azure's guest poweroff:
``providers/lifecycle.allocated_while_stopped``) bills as if running. Exit 130 (errors.Aborted)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from provisioner.errors import Aborted
from provisioner.providers.lifecycle import allocated_while_stopped

if TYPE_CHECKING:
    from provisioner.catalog.models import Offer
    from provisioner.providers.base import InstanceRecord


@dataclass
class Leaves:
    """Filled in by ``up`` as it goes: the offer of the create in flight, then the VM once it exists."""

    name: str = ""
    attempt: tuple[Offer, float] | None = None  # (offer, compute $/h) of the create call in flight
    record: InstanceRecord | None = None  # created, or found already there
    notes: list[str] = field(default_factory=list)

    def aborted(self) -> Aborted:
        r = self.record
        if r is not None:
            target, n = r.cluster or r.name, r.nodes if r.cluster else 1
            where = f"{r.cloud} {r.zone or r.region}"
            stopped = r.state.upper() in STOPPED
            if stopped and not allocated_while_stopped(r.cloud, r.state):
                kept = "an unknown amount per hour" if r.kept_hourly is None else f"${r.kept_hourly * n:.3f}/h"
                return Aborted(f"aborted: {target} exists on {where}, stopped ({r.state}): it keeps costing {kept} "
                               f"until `trainvm down {target} --yes`")
            how = f"stopped ({r.state}) but still allocated, and bills" if stopped else "bills"
            return Aborted(f"aborted: {target} exists on {where} and {how} {_running(r, n)} until "
                           f"`trainvm down {target} --yes`; `trainvm verify {target}` checks it later")
        if self.attempt is not None:
            offer, price = self.attempt
            return Aborted(f"aborted while creating {self.name} on {offer.cloud} {offer.zone or offer.region} "
                           f"({offer.instance_type}, ${price:.2f}/h compute): that VM may exist and bill; run the same "
                           f"`trainvm up` again (it finds or finishes it, never a second one) or `trainvm down {self.name} --yes`")
        return Aborted("aborted: nothing was created")


#: InstanceRecord.state of a stopped VM (or one stopping): GCE TERMINATED/SUSPENDED, EC2 stopped/stopping, Azure
#: PowerState/deallocated, stopped (a guest poweroff: still billing compute) and their -ing states
STOPPED = frozenset({"TERMINATED", "STOPPED", "STOPPING", "SUSPENDED", "SUSPENDING", "DEALLOCATED", "DEALLOCATING"})


def _running(r: InstanceRecord, n: int) -> str:
    if r.price_hourly is None:
        return "its compute price (not recorded on the VM)"
    if r.disks_hourly is None:
        return f"${r.price_hourly * n:.3f}/h for compute, plus its disks"
    return f"${(r.price_hourly + r.disks_hourly) * n:.3f}/h (compute + disks{f', {n} nodes' if n > 1 else ''})"
