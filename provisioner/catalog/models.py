"""Catalog data types. Plain slotted dataclasses (not pydantic): the planner walks up to a million
offers, so construction and attribute access must be cheap. ``Offer`` (and ``EXCLUDING_FLAGS``) live in
providers/offer.py, beside the provider contract that takes an offer (issue 37: a cloud package imports nothing
above providers/); they are re-exported here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from datetime import date as _date
from pathlib import Path
from typing import Any, Mapping

from provisioner.errors import CatalogError
from provisioner.providers.offer import EXCLUDING_FLAGS, Offer

__all__ = ["CatalogError", "Offer", "Catalog", "COLUMNS", "SCHEMA_VERSION", "EXCLUDING_FLAGS",
           "SCHEMA_WITH_PROVENANCE", "PROVENANCE_COLUMNS"]

SCHEMA_VERSION = 2  # 2: no `provisionable` column (the cloud registry decides, at plan time)
#: 3: schema 2's columns plus PROVENANCE_COLUMNS (what ``catalog refresh`` writes); the loader reads both
SCHEMA_WITH_PROVENANCE = 3
#: Per-row provenance of a refreshed catalog: the API and SKU/meter the price came from, and when.
PROVENANCE_COLUMNS: tuple[str, ...] = ("source", "fetched_at")
#: Days after which a plan warns that the catalog is old: a refreshed or TRAINVM_CATALOG catalog (renewable
#: with ``trainvm catalog refresh``), and the embedded snapshot (as old as the trainvm release that ships it).
STALE_AFTER_DAYS = 30
EMBEDDED_STALE_AFTER_DAYS = 90

#: Column order of every catalog CSV file (and of Offer's fields).
COLUMNS: tuple[str, ...] = (
    "cloud", "instance_type", "family", "gpu_name", "gpu_count", "gpu_memory_gib", "vcpus",
    "memory_gib", "region", "zone", "price_hourly", "spot_price_hourly", "gpu_attach",
    "disk_types", "local_nvme_max_gib", "arch", "hyperv_gen", "flags",
)

def _no_disk_prices() -> Any:
    from provisioner.catalog.disks import DiskPrices  # lazy: cycle (catalog.disks imports this module)

    return DiskPrices()


@dataclass(frozen=True)
class Catalog:
    """A loaded catalog: every offer plus where it came from."""

    offers: tuple[Offer, ...]
    source: str
    date: date
    schema_version: int
    path: Path
    provenance: Mapping[str, Any] = field(default_factory=dict)
    #: which catalog this is: "embedded", "refreshed" (``trainvm catalog refresh``), "TRAINVM_CATALOG", "argument"
    origin: str = "embedded"
    #: a plan warns past this age (days)
    stale_after_days: int = EMBEDDED_STALE_AFTER_DAYS
    #: why the catalog is not the one the selection order would have given (a refreshed one that did not load)
    note: str = ""
    #: disk prices (``disks.csv``, catalog/disks.py); empty when the folder has none: every disk price unknown
    disk_prices: Any = field(default_factory=lambda: _no_disk_prices())

    def clouds(self) -> tuple[str, ...]:
        return tuple(sorted({o.cloud for o in self.offers}))

    def gpu_names(self) -> tuple[str, ...]:
        return tuple(sorted({o.gpu_name for o in self.offers}))

    def filter(self, *, cloud: str | None = None, gpu: str | None = None) -> tuple[Offer, ...]:
        """Offers for ``catalog show --cloud C --gpu G`` (None = any)."""
        return tuple(o for o in self.offers
                     if (cloud is None or o.cloud == cloud) and (gpu is None or o.gpu_name == gpu))

    def info(self) -> dict[str, Any]:
        """``{source, date, schema_version, path}`` for JSON output."""
        return {"source": self.source, "date": self.date.isoformat(),
                "schema_version": self.schema_version, "path": str(self.path), "origin": self.origin}

    def age_days(self, today: _date) -> int:
        return (today - self.date).days

    def freshness(self) -> str:
        """A refreshed catalog's parts: ``azure eastus refreshed 2026-11-27; the rest: the embedded catalog's prices of
        2026-09-13`` (from ``provenance.parts`` / ``base``, written by ``catalog refresh``); "" when it has none."""
        parts = [p for p in self.provenance.get("parts") or [] if isinstance(p, dict)]
        if not parts:
            return ""
        done = "; ".join(f"{p.get('cloud')} {','.join(p.get('regions') or ['*'])} refreshed {p.get('fetched_at')}"
                         for p in parts)
        base = self.provenance.get("base") or {}
        if base.get("date") != self.date.isoformat():
            return done  # no row of the base is left: the oldest part dates the catalog
        return f"{done}; the rest: the {base.get('origin', 'previous')} catalog's prices of {base.get('date')}"

    def stale_allowance(self, refreshed_days: int) -> int:
        """Days this catalog may age before plans warn: ``refreshed_days`` past each refreshed part's date, and the
        embedded snapshot's own allowance for the rows still from it (a refresh of one region must not make the
        snapshot's other rows look stale sooner than they did)."""
        base = self.provenance.get("base") or {}
        parts = [p for p in self.provenance.get("parts") or [] if isinstance(p, dict)]
        if base.get("origin") != "embedded" or base.get("date") != self.date.isoformat() or not parts:
            return refreshed_days
        try:
            ages = [(_date.fromisoformat(str(p.get("fetched_at"))) - self.date).days for p in parts]
        except ValueError:
            return refreshed_days
        return min([EMBEDDED_STALE_AFTER_DAYS] + [a + refreshed_days for a in ages])

    def describe(self, today: _date) -> str:
        """``refreshed catalog: <source> (2026-11-20, 2 days old)`` for plan and catalog show."""
        parts = self.freshness()
        return (f"{self.origin} catalog: {self.source} ({self.date.isoformat()}, "
                f"{self.age_days(today)} days old{'; ' + parts if parts else ''})")
