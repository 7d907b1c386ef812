"""Writing a refreshed catalog to the user's cache, atomically, and its ``disks.csv``.

Layout under ``$XDG_CACHE_HOME/trainvm/catalog/`` (``~/.cache/...``)::

    CURRENT                      the name of the current generation (one line, replaced with os.replace)
    catalog-20261127T175500…Z-x1y2/  catalog.json (schema 3), gcp.csv, azure.csv, aws.csv, disks.csv
    catalog-20261120T090000…Z-a7b8/  the previous generation (kept; older ones are deleted)

A generation is written into a hidden temporary folder, loaded back (the same loader ``plan`` uses), renamed
into place, and only then named in ``CURRENT``: a reader sees the old catalog or the new one, never a half.

``disks.csv`` (its loader belongs to the disk-pricing code): header
``cloud,region,disk_type,size_max_gib,unit,price_month,source,fetched_at``; ``disk_type`` one of
``standard|balanced|ssd|local_ssd``; ``unit`` ``gib`` (USD per GiB-month, ``size_max_gib`` empty) or ``disk``
(USD per disk-month for a disk up to ``size_max_gib`` GiB: Azure's tiers, one row per tier); ``region`` a
region or ``*``; ``source`` the API and SKU; ``fetched_at`` an ISO date.
"""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from provisioner.catalog import disks as disk_table
from provisioner.catalog.models import Offer
from provisioner.catalog.storage import (
    POINTER,
    fmt_number,
    load_catalog,
    refreshed_dir,
    refreshed_root,
    write_catalog,
)
from provisioner.providers.price_rows import DiskPrice

DISK_COLUMNS = ("cloud", "region", "disk_type", "size_max_gib", "unit", "price_month", "source", "fetched_at")
DISKS_FILE = "disks.csv"


def disk_sort_key(d: DiskPrice) -> tuple[Any, ...]:
    return (d.cloud, d.region, d.disk_type, d.unit, d.size_max_gib or 0)


def write_disks(path: Path, disks: Iterable[DiskPrice]) -> None:
    """``disks.csv`` in the shared format; ValueError naming every bad row (nothing written then)."""
    rows = sorted(disks, key=disk_sort_key)
    problems = [p for d in rows for p in d.problems()]
    if problems:
        raise ValueError("; ".join(problems))
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(DISK_COLUMNS)
        for d in rows:
            w.writerow([d.cloud, d.region, d.disk_type, "" if d.size_max_gib is None else str(d.size_max_gib),
                        d.unit, fmt_number(d.price_month), d.source, d.fetched_at])


def publish(offers: Iterable[Offer], disks: Iterable[DiskPrice], *, source: str, fetched: datetime, catalog_date: str,
            provenance_of: Callable[[Offer], tuple[str, str]], extra_provenance: Mapping[str, Any],
            stats: Mapping[str, Any], kept_disks: Iterable[disk_table.DiskPrice] = ()) -> Path:
    """Write a new generation and make it current; returns its folder. ``kept_disks``: the current catalog's disk
    rows the refresh did not replace (as loaded, written back as they were). Raises CatalogError (and leaves the
    current catalog as it was) when the written folder does not load back."""
    root = refreshed_root()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
    try:
        write_disks(tmp / DISKS_FILE, disks)  # checks the new rows (ValueError naming each bad one)
        fresh = disk_table.read_disk_prices(tmp / DISKS_FILE).rows
        # listed in the manifest's files (a disks.csv the manifest does not list is never read: every disk price
        # of a refreshed catalog was "unknown" before)
        write_catalog(tmp, offers, source=source, catalog_date=catalog_date, provenance_of=provenance_of,
                      extra_provenance={"fetched_at": fetched.isoformat(timespec="seconds"), **extra_provenance},
                      stats=stats, disk_prices=[*kept_disks, *fresh])
        load_catalog(tmp)  # what plan will read: a folder that does not load never becomes current
        # the time sorts generations; the temporary folder's random part keeps two refreshes of one instant apart
        final = root / f"catalog-{fetched.astimezone(UTC):%Y%m%dT%H%M%S%fZ}-{tmp.name.removeprefix('.tmp-')}"
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    previous = refreshed_dir()
    fd, ptr = tempfile.mkstemp(dir=root, prefix=".CURRENT-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(final.name + "\n")
    os.replace(ptr, root / POINTER)
    _prune(root, keep={final.name, previous.name if previous else ""})
    return final


def _prune(root: Path, keep: set[str]) -> None:
    """Delete every generation but the new current one and the one it replaced (a reader that chose the old
    one a moment ago can still read it)."""
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith("catalog-") and p.name not in keep:
            shutil.rmtree(p, ignore_errors=True)
