"""Azure VM sizes: GPU series (GPU and its memory per size), fractional-GPU sizes, the snapshot's GPU count fixes,
retired sizes, local NVMe per size and the boot disk types a size takes. Pure data: importing it imports no SDK. The
catalog converter (scripts/build_catalog.py), the request builder (providers/azure/request.py) and the catalog's
``family`` (its ``family_of`` hook, provisioner/hooks/: the series name) use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from provisioner.providers.registry import DISK_TYPES


# --------------------------------------------------------------------------------------------
# Azure
# Sources: learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/* (GPU memory,
# temp/NVMe storage), .../vm-naming-conventions ("s" = premium storage capable),
# .../sizes/migration-guides/nc-series-retirement, nv-series-retirement,
# ncv3-nc24rs-retirement, ncv3-nc6s-nc12s-nc24s-retirement.
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AzureSeries:
    name: str
    pattern: str  # regex over the size name
    gpu_name: str
    gpu_memory_gib: float  # per GPU (fractional sizes: the slice, see AZURE_FRACTIONAL)


AZURE_SERIES: tuple[AzureSeries, ...] = (
    AzureSeries("NCasT4_v3", r"^Standard_NC\d+as_T4_v3$", "T4", 16),
    AzureSeries("NCv3", r"^Standard_NC\d+r?s_v3$", "V100", 16),
    AzureSeries("NC", r"^Standard_NC\d+r?(_Promo)?$", "K80", 12),
    AzureSeries("NDv2", r"^Standard_ND40rs_v2$", "V100-32GB", 32),
    AzureSeries("NC_A100_v4", r"^Standard_NC\d+ads_A100_v4$", "A100-80GB", 80),
    AzureSeries("ND_A100_v4", r"^Standard_ND96asr_v4$", "A100", 40),
    AzureSeries("NDm_A100_v4", r"^Standard_ND96amsr_A100_v4$", "A100-80GB", 80),
    AzureSeries("NCads_H100_v5", r"^Standard_NC\d+adi?s_H100_v5$", "H100", 94),  # H100 NVL
    AzureSeries("ND_H100_v5", r"^Standard_ND96isr_H100_v5$", "H100", 80),
    AzureSeries("NV", r"^Standard_NV\d+(_Promo)?$", "M60", 8),
    AzureSeries("NVv3", r"^Standard_NV\d+s_v3$", "M60", 8),
    AzureSeries("NVv4", r"^Standard_NV\d+as_v4$", "MI25", 16),
    AzureSeries("NVads_A10_v5", r"^Standard_NV\d+adm?s_A10_v5$", "A10", 24),
)
_AZURE_SERIES_RE = tuple((re.compile(s.pattern), s) for s in AZURE_SERIES)


def azure_series(size: str) -> AzureSeries | None:
    for rx, series in _AZURE_SERIES_RE:
        if rx.match(size):
            return series
    return None


#: Sizes that carry only a slice of one GPU (listed by the snapshot as 1 GPU): size -> fraction.
AZURE_FRACTIONAL: Mapping[str, float] = MappingProxyType({
    "Standard_NV4as_v4": 1 / 8, "Standard_NV8as_v4": 1 / 4, "Standard_NV16as_v4": 1 / 2,
    "Standard_NV6ads_A10_v5": 1 / 6, "Standard_NV12ads_A10_v5": 1 / 3,
    "Standard_NV18ads_A10_v5": 1 / 2,
})
#: Facts the snapshot gets wrong: size -> correct GPU count.
AZURE_GPU_COUNT_FIXES: Mapping[str, int] = MappingProxyType({"Standard_ND96isr_H100_v5": 8})
#: Retired sizes (VMs deallocated by Azure after the date): size regex -> (date, source page).
AZURE_RETIRED: tuple[tuple[str, str, str], ...] = (
    (r"^Standard_NC\d+r?(_Promo)?$", "2023-09-06", "migration-guides/nc-series-retirement"),
    (r"^Standard_NV\d+(_Promo)?$", "2023-09-06", "migration-guides/nv-series-retirement"),
    (r"^Standard_NC24rs_v3$", "2025-03-31", "ncv3-nc24rs-retirement"),
    (r"^Standard_NC(6|12|24)s_v3$", "2025-09-30", "ncv3-nc6s-nc12s-nc24s-retirement"),
)
_AZURE_RETIRED_RE = tuple((re.compile(rx), d, src) for rx, d, src in AZURE_RETIRED)


def azure_retirement(size: str) -> tuple[str, str] | None:
    """(retirement date, source) when Azure has retired the size, else None."""
    for rx, when, src in _AZURE_RETIRED_RE:
        if rx.match(size):
            return when, src
    return None


#: Local NVMe scratch per size (GiB, the size tables' temp/NVMe figure). Sizes whose only local
#: storage is a small SCSI temp disk are absent (0): trainvm stages data only to NVMe.
AZURE_LOCAL_NVME_GIB: Mapping[str, int] = MappingProxyType({
    "Standard_NC24ads_A100_v4": 894, "Standard_NC48ads_A100_v4": 1788,
    "Standard_NC96ads_A100_v4": 3576,
    "Standard_NC40ads_H100_v5": 3576, "Standard_NC80adis_H100_v5": 7152,
    "Standard_ND96asr_v4": 6000, "Standard_ND96amsr_A100_v4": 6400,
    "Standard_ND96isr_H100_v5": 28000,
})


def azure_disk_types(size: str) -> tuple[str, ...]:
    """Standard HDD and Standard SSD always; Premium SSD only on premium-capable ("s") sizes."""
    m = re.match(r"^Standard_[A-Z]+\d+([a-z]*)", size)
    premium = bool(m and "s" in m.group(1))
    return DISK_TYPES if premium else ("standard", "balanced")


def family(size: str) -> str:
    """The catalog's ``family`` of an Azure size: its series, or the size itself for a size of no known series."""
    series = azure_series(size)
    return series.name if series else size
