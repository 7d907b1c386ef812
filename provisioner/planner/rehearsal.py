"""Rehearsals: a cloud without a GPU (``CloudSpec.rehearsal``: this machine's QEMU VM) is offered for a profile
that asks for one as a rehearsal, never as a pass. On such a cloud the checks marked ``rehearsed`` in
planner/checks.py (the GPU's name, memory, count and stack, the host size the GPUs set, the local NVMe size, the
region, spot) are not gates; the plan says which of them the offer does not meet (``not_checked``) and why it is
offered at all. A rehearsal offer ranks after every offer that can pass (``last``), and failover never reaches it
(another GPU).

The planner asks the cloud table's field, never a cloud's name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from provisioner.providers.registry import cloud, rehearsal_clouds

if TYPE_CHECKING:
    from provisioner.planner.request import PlanRequest
    from provisioner.providers.offer import Offer

#: what the GPU gate of a rehearsal reports (the VM side says the same words)
STATUS = "no GPU"


@dataclass(frozen=True)
class Rehearsal:
    """Why an offer is a rehearsal, and what the plan could not check on it (reasons of planner/checks.py)."""

    status: str
    why: str
    not_checked: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"status": self.status, "why": self.why, "not_checked": list(self.not_checked)}

    def line(self) -> str:
        gaps = f"; not met, not checked: {', '.join(self.not_checked)}" if self.not_checked else ""
        return f"rehearsal: {self.status} - {self.why}{gaps}"


def clouds_of(request: PlanRequest) -> frozenset[str]:
    """The rehearsal clouds the request plans on (empty for every request that names none)."""
    return rehearsal_clouds() & frozenset(request.clouds)


def rehearsal_of(offer: Offer, request: PlanRequest, not_checked: tuple[str, ...]) -> Rehearsal:
    """The rehearsal ``offer`` (on a rehearsal cloud) is for ``request``; ``not_checked``: the rehearsed checks it fails
    (planner/checks.py ``rehearsed_failures``)."""
    why = (f"{cloud(offer.cloud).title} has no GPU and the profile asks for {request.describe_gpu()}: every phase "
           f"runs there and the GPU gate reports `rehearsal: {STATUS}`, never a pass")
    return Rehearsal(STATUS, why, not_checked)


def last(ranked: tuple[Offer, ...], request: PlanRequest) -> tuple[Offer, ...]:
    """``ranked`` with the rehearsal offers after every other one (each part in its order)."""
    reh = clouds_of(request)
    if not reh:
        return ranked
    return tuple(o for o in ranked if o.cloud not in reh) + tuple(o for o in ranked if o.cloud in reh)
