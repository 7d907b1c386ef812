"""One purchasable VM shape (``Offer``): the record the catalog stores, the planner chooses and a provider creates.
It lives beside the provider contract (providers/base.py) so that a cloud package names it without importing the
catalog (issue 37: providers import nothing above them); catalog/models.py re-exports it. Plain slotted dataclass
(not pydantic): the planner walks up to a million offers, so construction and attribute access must be cheap."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from provisioner.providers.registry import provisionable

__all__ = ["EXCLUDING_FLAGS", "Offer", "Shape"]

#: Row flags that keep an offer out of plans, and the rejection reason they are counted under.
#: Other flags are informational (the row stays plannable).
EXCLUDING_FLAGS: Mapping[str, str] = MappingProxyType({
    "suspect_price": "flagged_price",
    "host_price_zero": "flagged_price",
    "fractional_gpu": "fractional_gpu",
    "retired_size": "retired",
})


@dataclass(frozen=True, slots=True)
class Offer:
    """One purchasable VM shape in one region/zone at one hourly price.

    ``zone`` is None where the cloud's offer is regional (Azure). Prices are USD per hour for the
    whole VM (GCE: host + GPUs). ``spot_price_hourly`` is None when unknown or unreliable.
    """

    cloud: str
    instance_type: str
    family: str
    gpu_name: str
    gpu_count: int
    gpu_memory_gib: float
    vcpus: float
    memory_gib: float
    region: str
    zone: str | None
    price_hourly: float
    spot_price_hourly: float | None
    gpu_attach: str  # "bundled" | "attachable"
    disk_types: tuple[str, ...]  # subset of ("standard", "balanced", "ssd")
    local_nvme_max_gib: int
    arch: str  # "x86_64" | "arm64"
    hyperv_gen: str = ""  # Azure Hyper-V generations supported: "1", "2", "1|2"; "" elsewhere
    flags: tuple[str, ...] = ()

    @property
    def provisionable(self) -> bool:
        """Whether trainvm can create this VM: a fact about trainvm's providers (the cloud registry), not
        about the offer, so it is not stored in the catalog."""
        return provisionable(self.cloud)

    def price(self, spot: bool) -> float | None:
        """The hourly price that applies: the spot price when ``spot`` (None if unavailable)."""
        return self.spot_price_hourly if spot else self.price_hourly

    def price_that_applies(self, spot: bool) -> float:
        """``price(spot)``, the on-demand price where the spot one is unknown: what a plan charges (``Plan.price``)."""
        p = self.price(spot)
        return self.price_hourly if p is None else p

    @property
    def location(self) -> str:
        return self.zone or self.region

    def excluded_by(self) -> str | None:
        """The rejection reason of the first excluding flag, or None when the row is plannable."""
        for f in self.flags:
            reason = EXCLUDING_FLAGS.get(f)
            if reason is not None:
                return reason
        return None

    def key(self) -> tuple[str, str, str, str, str, int]:
        """Identity of the offer inside a catalog (unique per row)."""
        return (self.cloud, self.region, self.zone or "", self.instance_type, self.gpu_name,
                self.gpu_count)

    def to_json(self, spot: bool = False) -> dict[str, Any]:
        """SPEC Offer shape; ``price_hourly`` is the price that applies."""
        return {
            "cloud": self.cloud,
            "region": self.region,
            "zone": self.zone,
            "instance_type": self.instance_type,
            "gpu_name": self.gpu_name,
            "gpu_count": self.gpu_count,
            "gpu_memory_gib": self.gpu_memory_gib,
            "vcpus": _num(self.vcpus),
            "memory_gib": _num(self.memory_gib),
            "price_hourly": self.price(spot),
            "spot": spot,
        }

    def describe(self, spot: bool = False) -> str:
        """One line for humans: ``gcp us-central1-a a3-highgpu-1g (1x H100) $11.06/h``."""
        p = self.price(spot)
        price = "no spot price" if p is None else f"${p:.2f}/h{' spot' if spot else ''}"
        return (f"{self.cloud} {self.location} {self.instance_type} "
                f"({self.gpu_count}x {self.gpu_name}) {price}")


@dataclass(frozen=True, slots=True)
class Shape:
    """The machine of one offer, without its prices: what the stages below the plan ask of the offer they act on
    (the quota preflight: what it counts against; the render and the baked-image lookup: the machine the script is
    made for; the payload store: the region). The planner makes one per offer ``up`` may try
    (``planner.core.Candidate``) from the offer's fields, so that those stages take the machine, not the catalog row."""

    cloud: str
    region: str
    zone: str | None
    location: str  # the zone, else the region (``Offer.location``)
    instance_type: str
    family: str
    gpu_name: str
    gpu_count: int
    vcpus: float
    local_nvme_max_gib: int
    arch: str


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x
