"""Disk prices: the catalog's ``disks.csv`` (what boot disks and local SSDs cost per month).

Format (shared with ``trainvm catalog refresh``, which writes the same file)::

    cloud,region,disk_type,size_max_gib,unit,price_month,source,fetched_at

* ``disk_type``: the profile's boot-disk vocabulary (``standard|balanced|ssd``) plus ``local_ssd``; each
  cloud's provider maps it to its own disk (GCE pd-*, Azure managed disks, AWS gp3).
* ``unit`` ``gib``: ``price_month`` is USD per GiB-month (``size_max_gib`` empty); ``disk``: USD per disk-month
  for a disk of up to ``size_max_gib`` GiB (Azure's tiered managed disks, one row per tier): a disk is billed
  at the smallest tier at least its size.
* ``region``: a region, or ``*`` for the cloud's regions not listed.
* ``source``: where the number comes from; ``fetched_at``: ISO date.

A price that is not in the table is unknown (None), never 0. A row with price 0 says that the disk costs
nothing beyond the VM (local NVMe included in the instance price), and its source says why.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Iterable

from provisioner.catalog.families import CLOUDS, DISK_TYPES
from provisioner.catalog.models import CatalogError

DISKS_FILE = "disks.csv"
DISK_COLUMNS: tuple[str, ...] = ("cloud", "region", "disk_type", "size_max_gib", "unit", "price_month",
                                 "source", "fetched_at")
#: ``image``: a stored baked image (docs/bake.md), per GiB-month of its stored size
DISK_KINDS: tuple[str, ...] = (*DISK_TYPES, "local_ssd", "image")
UNITS: tuple[str, ...] = ("gib", "disk")
#: Hours per month the clouds' monthly disk prices assume (GCE, Azure and AWS all bill 730 h).
HOURS_PER_MONTH = 730


@dataclass(frozen=True, slots=True)
class DiskPrice:
    """One row of ``disks.csv``."""

    cloud: str
    region: str  # a region or "*"
    disk_type: str  # standard | balanced | ssd | local_ssd
    size_max_gib: int | None  # unit "disk": the tier's largest size; None for "gib"
    unit: str  # "gib" | "disk"
    price_month: float
    source: str
    fetched_at: date

    def row(self) -> list[str]:
        from provisioner.catalog.storage import fmt_number  # lazy: cycle (catalog.storage imports this module)

        return [self.cloud, self.region, self.disk_type, "" if self.size_max_gib is None else str(self.size_max_gib),
                self.unit, fmt_number(self.price_month), self.source, self.fetched_at.isoformat()]


@dataclass(frozen=True, slots=True)
class DiskQuote:
    """What one disk of ``size_gib`` costs per month, and which row says so."""

    monthly: float
    billed_gib: int  # the size it is billed as (Azure: the tier's size)
    tier: DiskPrice


class DiskPrices:
    """The loaded table; ``quote`` answers one disk's monthly price (None: unknown)."""

    def __init__(self, rows: Iterable[DiskPrice] = ()) -> None:
        self.rows: tuple[DiskPrice, ...] = tuple(rows)
        self._by: dict[tuple[str, str, str], list[DiskPrice]] = {}
        for r in self.rows:
            self._by.setdefault((r.cloud, r.region, r.disk_type), []).append(r)
        for tiers in self._by.values():
            tiers.sort(key=lambda r: (r.size_max_gib or 0))

    def __bool__(self) -> bool:
        return bool(self.rows)

    def rows_for(self, cloud: str, region: str, disk_type: str) -> list[DiskPrice]:
        """The rows of the region, else the cloud's ``*`` rows (empty: not in the table)."""
        return self._by.get((cloud, region, disk_type)) or self._by.get((cloud, "*", disk_type)) or []

    def quote(self, cloud: str, region: str, disk_type: str, size_gib: int) -> DiskQuote | None:
        rows = self.rows_for(cloud, region, disk_type)
        if not rows:
            return None
        if rows[0].unit == "gib":
            return DiskQuote(rows[0].price_month * size_gib, size_gib, rows[0])
        for r in rows:  # tiers, smallest first: billed at the smallest tier >= the size
            if r.size_max_gib is not None and r.size_max_gib >= size_gib:
                return DiskQuote(r.price_month, r.size_max_gib, r)
        return None  # larger than the largest tier: not a disk the cloud sells


def read_disk_prices(p: Path) -> DiskPrices:
    """Parse ``disks.csv``; a bad row is a CatalogError naming the file and line."""
    try:
        fh = p.open(newline="", encoding="utf-8")
    except OSError as e:
        raise CatalogError(f"{p}: cannot read ({e.strerror})") from None
    out: list[DiskPrice] = []
    seen: dict[tuple[str, str, str, int | None], int] = {}
    with fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header != list(DISK_COLUMNS):
            raise CatalogError(f"{p}:1: header must be {','.join(DISK_COLUMNS)}")
        for lineno, row in enumerate(reader, start=2):
            if len(row) != len(DISK_COLUMNS):
                raise CatalogError(f"{p}:{lineno}: {len(row)} fields, expected {len(DISK_COLUMNS)}")
            try:
                d = _parse(row)
            except ValueError as e:
                raise CatalogError(f"{p}:{lineno}: {e}") from None
            key = (d.cloud, d.region, d.disk_type, d.size_max_gib)
            if key in seen:
                raise CatalogError(f"{p}:{lineno}: same cloud, region, disk_type and size_max_gib as line {seen[key]}")
            seen[key] = lineno
            out.append(d)
    table = DiskPrices(out)
    for (cloud, region, kind), rows in table._by.items():
        if len({r.unit for r in rows}) > 1 or (rows[0].unit == "gib" and len(rows) > 1):
            raise CatalogError(f"{p}: {cloud} {region} {kind}: one 'gib' row or 'disk' tiers, not both")
    return table


def _parse(row: list[str]) -> DiskPrice:
    cloud, region, kind, size_max, unit, price, source, fetched = (v.strip() for v in row)
    if cloud not in CLOUDS:
        raise ValueError(f"cloud {cloud!r}: expected one of {', '.join(CLOUDS)}")
    if not region:
        raise ValueError("region must be a region or '*'")
    if kind not in DISK_KINDS:
        raise ValueError(f"disk_type {kind!r}: expected one of {'|'.join(DISK_KINDS)}")
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r}: expected gib (USD per GiB-month) or disk (USD per disk-month)")
    if unit == "gib" and size_max:
        raise ValueError("size_max_gib must be empty for unit gib")
    size: int | None = None
    if unit == "disk":
        if not size_max.isdigit() or int(size_max) < 1:
            raise ValueError(f"size_max_gib {size_max!r}: unit disk needs the tier's size in GiB (>= 1)")
        size = int(size_max)
    try:
        value = float(price)
    except ValueError:
        raise ValueError(f"price_month {price!r} is not a number (leave the row out when the price is unknown)") from None
    if not value >= 0:
        raise ValueError(f"price_month {price!r} must be >= 0")
    if not source:
        raise ValueError("source must say where the price comes from")
    try:
        when = date.fromisoformat(fetched)
    except ValueError:
        raise ValueError(f"fetched_at {fetched!r} is not YYYY-MM-DD") from None
    return DiskPrice(cloud, region, kind, size, unit, value, source, when)


def write_disk_prices(p: Path, rows: Iterable[DiskPrice]) -> Path:
    """Write the table sorted (deterministic)."""
    ordered = sorted(rows, key=lambda r: (CLOUDS.index(r.cloud) if r.cloud in CLOUDS else len(CLOUDS), r.cloud,
                                          r.region, DISK_KINDS.index(r.disk_type), r.size_max_gib or 0))
    with p.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(DISK_COLUMNS)
        w.writerows(r.row() for r in ordered)
    return p
