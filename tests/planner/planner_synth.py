"""Small synthetic catalogs for planner tests."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any, Iterable

from provisioner.catalog import Catalog, Offer

CATALOG_DATE = date(2026, 9, 23)
TODAY = date(2026, 10, 1)

_DEFAULTS: dict[str, Any] = dict(
    cloud="gcp", instance_type="g2-standard-8", family="g2-standard", gpu_name="L4", gpu_count=1,
    gpu_memory_gib=24.0, vcpus=8.0, memory_gib=32.0, region="us-central1", zone=None,
    price_hourly=1.0, spot_price_hourly=0.4, gpu_attach="bundled",
    disk_types=("standard", "balanced", "ssd"), local_nvme_max_gib=375, arch="x86_64",
    hyperv_gen="", flags=(),
)


def offer(**kw: Any) -> Offer:
    data = {**_DEFAULTS, **kw}
    if data["zone"] is None and data["cloud"] == "gcp" and "zone" not in kw:
        data["zone"] = data["region"] + "-a"
    return Offer(**data)


def catalog(offers: Iterable[Offer], when: date = CATALOG_DATE) -> Catalog:
    return Catalog(offers=tuple(offers), source="synthetic test catalog", date=when,
                   schema_version=1, path=Path("/synthetic"))
