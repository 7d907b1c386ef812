"""The rows a cloud's price source gives ``trainvm catalog refresh`` (providers/<cloud>/prices.py ``fetch`` ->
``SourceResult``: offers with new prices, and ``DiskPrice`` rows). They live beside the provider contract so that a
cloud package imports nothing from catalog/ (issue 37: providers import nothing above them); catalog/refresh.py and
catalog/publish.py re-export them under their old names. Pure data."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from provisioner.providers.offer import Offer

__all__ = ["DISK_TYPES", "DISK_UNITS", "DiskPrice", "SourceResult"]

DISK_TYPES = ("standard", "balanced", "ssd", "local_ssd")  # what a price source writes (image rows are carried)
DISK_UNITS = ("gib", "disk")


@dataclass(frozen=True, slots=True)
class DiskPrice:
    cloud: str
    region: str  # a region, or "*" when one price applies everywhere
    disk_type: str  # DISK_TYPES
    size_max_gib: int | None  # unit "disk": the tier's largest size; unit "gib": None
    unit: str  # DISK_UNITS
    price_month: float  # USD per GiB-month (gib) or per disk-month (disk)
    source: str  # API + SKU / meter
    fetched_at: str  # ISO date

    def problems(self) -> list[str]:
        where = f"{self.cloud} {self.region} {self.disk_type}"
        out = []
        if self.disk_type not in DISK_TYPES:
            out.append(f"{where}: disk_type must be one of {'|'.join(DISK_TYPES)}")
        if self.unit not in DISK_UNITS:
            out.append(f"{where}: unit must be gib or disk")
        if (self.unit == "disk") != (self.size_max_gib is not None and self.size_max_gib > 0):
            out.append(f"{where}: size_max_gib is set exactly for unit disk")
        if not self.price_month > 0:
            out.append(f"{where}: price_month {self.price_month!r} is not > 0")
        if not (self.cloud and self.region and self.source and self.fetched_at):
            out.append(f"{where}: cloud, region, source and fetched_at must not be empty")
        return out


@dataclass
class SourceResult:
    """What one cloud's price source gives back."""

    offers: list[Offer]  # known shapes with the new prices (spot None where the source has none)
    row_source: dict[tuple[Any, ...], str]  # Offer.key() -> "API SKU/meter" the price came from
    disks: list[DiskPrice] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> rows dropped
    ambiguous: list[str] = field(default_factory=list)  # SKU conflicts, each resolved deterministically
    notes: list[str] = field(default_factory=list)  # what was not asked or modelled (credentials, ...)
    source: str = ""  # the API, for the manifest
    #: known rows the source knowingly cannot price (a series it does not model): dropped, but not a "shrink"
    unmodelled: set[tuple[Any, ...]] = field(default_factory=set)
    #: sizes the source prices in a region where ``known`` has none: (region, size) -> (price, spot, source)
    extra: dict[tuple[str, str], tuple[float, float | None, str]] = field(default_factory=dict)
