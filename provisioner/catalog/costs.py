"""What a VM costs per hour, running and stopped: compute (the offer's price) plus the disks the request
attaches (the catalog's disk prices, ``disks.csv``). Pure and offline; imports no cloud SDK.

* Boot disk: ``boot_disk.type`` at ``size_gib`` on every node; a persistent disk, so it keeps billing while the
  VM is stopped (GCE TERMINATED, Azure deallocated, EC2 stopped).
* Local scratch (``local_nvme_gib``): billed as the disks the cloud attaches for it (GCE: 375 GiB Local SSD
  disks, rounded up to a count the machine type accepts, as the request builder asks for them); where the
  table prices it at 0, it is part of the instance price (AWS instance store, Azure local NVMe). Never billed
  while stopped: trainvm stops GCE VMs with ``discardLocalSsd=true`` and GCE charges only for Local SSD data
  that a stop preserves (gcloud compute instances stop reference: "Preserving the Local SSD disk data incurs
  costs"); AWS instance store and Azure's local NVMe are lost on stop and are part of the instance price.
* A cloud whose VMs run on the machine running trainvm (``CloudSpec.on_host``: the local cloud) bills nothing: its
  compute and disks are priced at 0, with those words as the source.
* An unknown price is unknown (None), never 0: a part the table does not price makes the totals unknown and
  is named in ``unknown``; ``running_hourly_known`` is then the lower bound of what is known.
* Monthly prices become hourly at 730 h a month (the clouds' own convention).

Not included: public IPs (Azure's Standard static IP keeps billing while deallocated: the registry's
``lifecycle.kept_billing`` says so beside the stopped price), egress, snapshots, disk transactions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from provisioner import hooks
from provisioner.catalog.disks import HOURS_PER_MONTH, DiskPrices
from provisioner.catalog.models import Offer
from provisioner.errors import InvalidRequestError
from provisioner.providers.offer import Shape
from provisioner.providers.registry import cloud

__all__ = ["CostPart", "Cost", "cost_of", "HOURS_PER_MONTH"]


@dataclass(frozen=True, slots=True)
class CostPart:
    """One line of a VM's hourly cost, per node."""

    what: str  # "compute" | "boot disk" | "local SSD"
    detail: str  # "500 GiB ssd (pd-ssd)", "8 x 375 GiB local_ssd"
    hourly: float | None  # USD/h per node; None: unknown
    kept_when_stopped: bool
    source: str  # where the price comes from, or why it is unknown

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "detail": self.detail,
                "hourly": None if self.hourly is None else round(self.hourly, 6),
                "kept_when_stopped": self.kept_when_stopped, "source": self.source}


@dataclass(frozen=True, slots=True)
class Cost:
    """Compute + disks of one offer under one request; per node, and for ``nodes`` nodes."""

    nodes: int
    parts: tuple[CostPart, ...]
    stopped_note: str = ""  # what else keeps billing while stopped, in the registry's words
    on_host: str = ""  # why nothing bills: the VM runs on this machine (CloudSpec.on_host's words)

    def _sum(self, parts: list[CostPart]) -> float | None:
        if any(p.hourly is None for p in parts):
            return None
        return round(sum(p.hourly or 0.0 for p in parts), 6)

    @property
    def compute_hourly(self) -> float | None:
        return self._sum([p for p in self.parts if p.what == "compute"])

    @property
    def disks_hourly(self) -> float | None:
        return self._sum([p for p in self.parts if p.what != "compute"])

    @property
    def running_hourly(self) -> float | None:
        """Per node: compute + disks (None when a part is unknown)."""
        return self._sum(list(self.parts))

    @property
    def running_hourly_known(self) -> float:
        """Per node: the sum of the parts whose price is known (a lower bound when some are unknown)."""
        return round(sum(p.hourly for p in self.parts if p.hourly is not None), 6)

    @property
    def stopped_hourly(self) -> float | None:
        """Per node: what a stopped VM keeps costing (its persistent disks)."""
        return self._sum([p for p in self.parts if p.kept_when_stopped])

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(f"{p.what} ({p.source})" for p in self.parts if p.hourly is None)

    def with_compute(self, instance_type: str, hourly: float | None, *, spot: bool, source: str, nodes: int) -> Cost:
        """This cost with its compute part priced at ``hourly`` for ``nodes`` nodes: what ``cost_of`` gives for the
        same machine and disks (the planner prices a machine's disks once, then each candidate's compute)."""
        compute = CostPart("compute", f"{instance_type}{' spot' if spot else ''}", hourly, False, self.on_host or source)
        return Cost(nodes=nodes, parts=(compute, *(p for p in self.parts if p.what != "compute")),
                    stopped_note=self.stopped_note, on_host=self.on_host)

    def total(self, per_node: float | None) -> float | None:
        return None if per_node is None else round(per_node * self.nodes, 6)

    def to_json(self) -> dict[str, Any]:
        """Per node (``*_hourly``) and for every node (``cluster_*``; equal for one node)."""
        return {"nodes": self.nodes,
                "compute_hourly": self.compute_hourly, "disks_hourly": self.disks_hourly,
                "running_hourly": self.running_hourly, "stopped_hourly": self.stopped_hourly,
                "cluster_running_hourly": self.total(self.running_hourly),
                "cluster_stopped_hourly": self.total(self.stopped_hourly),
                "running_hourly_known": self.running_hourly_known,
                "unknown": list(self.unknown), "stopped_also_billing": self.stopped_note,
                "parts": [p.to_json() for p in self.parts]}

    def line(self) -> str:
        """``running $1.234/h (compute $1.100 + disks $0.134), stopped $0.116/h`` (x nodes for a cluster)."""
        n = self.nodes
        run, stop = self.total(self.running_hourly), self.total(self.stopped_hourly)
        each = f" for {n} nodes" if n > 1 else ""
        comp, disks = self.compute_hourly, self.disks_hourly
        split = f"compute {money(comp)} + disks {money(disks)}" + (" per node" if n > 1 else "")
        running = (f"running {money(run)}/h{each} ({self.on_host or split})" if run is not None else
                   f"running unknown (at least {money(self.running_hourly_known * n)}/h{each}; "
                   f"not priced: {'; '.join(self.unknown)})")
        stopped = f"stopped {money(stop)}/h{each}" if stop is not None else "stopped unknown/h"
        return f"{running}; {stopped}" + (f" ({self.stopped_note})" if self.stopped_note else "")


def money(x: float | None) -> str:
    return "unknown" if x is None else f"${x:.3f}"


def _hourly(monthly: float) -> float:
    return monthly / HOURS_PER_MONTH


def _boot_disk_name(offer: Offer | Shape, disk_type: str) -> str:
    """The cloud's own disk name for a profile disk type (a cloud may narrow it per machine family:
    its ``family_disk_map`` hook, provisioner/hooks/)."""
    spec, disk_map = cloud(offer.cloud), hooks.of(offer.cloud).family_disk_map
    family_map = disk_map(offer.family) if disk_map is not None else None
    return (family_map if family_map is not None else spec.disk_types).get(disk_type, "")


def _local_disks(offer: Offer | Shape, gib: int) -> tuple[int, int] | None:
    """(disks, GiB each) the cloud attaches for ``gib`` of scratch; None: the machine type brings its own
    (whether its price includes them is not in the table)."""
    facts = hooks.of(offer.cloud).local_ssd  # not the request builder: plan prices every offer, and imports neither
    if facts is None:  # a cloud that attaches one scratch disk of the size asked
        return (1, gib) if gib > 0 else (0, 0)
    builder = facts()
    if offer.family in builder.BUNDLED_LOCAL_SSD:
        return None
    if gib <= 0:
        return (0, 0)
    try:
        return builder.local_ssd_count(offer.instance_type, gib), int(builder.LOCAL_SSD_DISK_GIB)
    except InvalidRequestError:  # the request builder refuses the size: no disk to price
        return None


def cost_of(offer: Offer | Shape, *, disk_prices: DiskPrices, boot_disk_type: str, boot_disk_gib: int,
            local_nvme_gib: int = 0, nodes: int = 1, spot: bool = False,
            compute_hourly: float | None = None, compute_source: str = "catalog") -> Cost:
    """The hourly cost of ``offer`` with the request's disks. ``compute_hourly`` overrides the offer's price
    (status: the price recorded on the VM; the planner: the price that applies to a candidate, whose machine
    ``offer`` is then, a ``Shape``); else the offer's price that applies (spot when ``spot`` and known)."""
    if compute_hourly is None:
        if not isinstance(offer, Offer):
            raise TypeError("cost_of: a Shape has no price of its own; pass compute_hourly")
        p = offer.price(spot)
        compute_hourly = offer.price_hourly if p is None else p
    spec = cloud(offer.cloud)
    parts = [CostPart("compute", f"{offer.instance_type}{' spot' if spot else ''}", compute_hourly, False,
                      spec.on_host or compute_source)]
    name = _boot_disk_name(offer, boot_disk_type)
    detail = f"{boot_disk_gib} GiB {boot_disk_type}" + (f" ({name})" if name else "")
    if spec.on_host is not None:  # this machine's own disk: priced at 0, saying whose
        parts.append(CostPart("boot disk", detail, 0.0, True, spec.on_host))
        if local_nvme_gib > 0:
            parts.append(CostPart("local SSD", f"{local_nvme_gib} GiB local NVMe", 0.0, False, spec.on_host))
        return Cost(nodes=nodes, parts=tuple(parts), stopped_note=spec.lifecycle.kept_billing, on_host=spec.on_host)
    q = disk_prices.quote(offer.cloud, offer.region, boot_disk_type, boot_disk_gib)
    if name.startswith("hyperdisk"):
        parts.append(CostPart("boot disk", detail, None, True, f"{name} is not in the disk price table"))
    elif q is None:
        parts.append(CostPart("boot disk", detail, None, True,
                              f"no {offer.cloud} {boot_disk_type} price for {boot_disk_gib} GiB in the disk price table"))
    else:
        tier = f", billed as {q.billed_gib} GiB" if q.billed_gib != boot_disk_gib else ""
        parts.append(CostPart("boot disk", detail + tier, _hourly(q.monthly), True,
                              f"{q.tier.source} ({q.tier.fetched_at.isoformat()})"))
    local = _local_disks(offer, local_nvme_gib)
    if local is None:
        parts.append(CostPart("local SSD", f"the Local SSD {offer.instance_type} comes with", None, False,
                              "the machine type's own Local SSD is not in the disk price table"))
    elif local[0]:
        count, each = local
        detail = f"{count} x {each} GiB local_ssd" if count > 1 else f"{each} GiB local_ssd"
        lq = disk_prices.quote(offer.cloud, offer.region, "local_ssd", each)
        if lq is None:
            parts.append(CostPart("local SSD", detail, None, False,
                                  f"no {offer.cloud} local_ssd price in the disk price table"))
        else:
            parts.append(CostPart("local SSD", detail, _hourly(lq.monthly) * count, False,
                                  f"{lq.tier.source} ({lq.tier.fetched_at.isoformat()})"))
    return Cost(nodes=nodes, parts=tuple(parts), stopped_note=spec.lifecycle.kept_billing)


def disk_key(offer: Offer | Shape, local_nvme_gib: int) -> tuple[str, str, str, str]:
    """What the price of a request's disks on ``offer`` depends on: cloud, region, family (and the shape when local
    scratch is asked for)."""
    return offer.cloud, offer.region, offer.family, offer.instance_type if local_nvme_gib else ""


def disks_running_hourly(offers: Iterable[Offer | Shape], *, disk_prices: DiskPrices, boot_disk_type: str, boot_disk_gib: int,
                         local_nvme_gib: int = 0) -> dict[tuple[str, str, str, str], float]:
    """``disk_key`` -> the known hourly price of the disks per node (``cost_of(...).running_hourly_known`` with no
    compute), once per key among ``offers`` (offers, or their machines: the planner passes one ``Shape`` per key): the
    planner's running prices (planner/core.py ``running_prices``)."""
    out: dict[tuple[str, str, str, str], float] = {}
    for o in offers:
        k = disk_key(o, local_nvme_gib)
        if k not in out:
            c = cost_of(o, disk_prices=disk_prices, boot_disk_type=boot_disk_type, boot_disk_gib=boot_disk_gib,
                        local_nvme_gib=local_nvme_gib, compute_hourly=0.0)
            out[k] = float(c.running_hourly_known)
    return out
