"""Machine-family facts the catalog converter and the planner rely on.

Everything here is a documented cloud fact (source named next to it), not a price. The converter
(scripts/build_catalog.py) uses these tables to fill the per-row columns ``family``,
``disk_types``, ``local_nvme_max_gib`` and to correct/flag the snapshot. Which clouds exist, their OS images
and their disk maps: providers/registry.py. A cloud's own machine-family tables live in its package (GCE's
families, per-family boot disks, Local SSD and N1 limits: providers/gcp/families.py).

Vocabulary: a profile's boot disk type is one of ``standard | balanced | ssd``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from provisioner.providers.registry import CLOUD_NAMES, DISK_TYPES

CLOUDS = CLOUD_NAMES  # the registry's clouds, in its order (the converter writes one CSV per cloud)
ARCHES: tuple[str, ...] = ("x86_64", "arm64")

# --------------------------------------------------------------------------------------------
# GPU names
# --------------------------------------------------------------------------------------------
#: trainvm canonical GPU name -> memory of ONE GPU in GiB, as the cloud sells it (nominal).
#: AWS reports *usable* memory (22.35 GiB for a 24 GiB L4/A10G); the catalog stores the nominal
#: figure so that ``min_gpu_memory_gib: 24`` means the same thing on every cloud.
GPU_MEMORY_GIB: Mapping[str, float] = MappingProxyType({
    "K80": 12, "M60": 8, "P4": 8, "P100": 16, "V100": 16, "V100-32GB": 32, "T4": 16, "T4G": 16,
    "A10": 24, "A10G": 24, "L4": 24, "L40S": 48, "A100": 40, "A100-80GB": 80, "H100": 80,
    "H200": 141, "B200": 180, "MI25": 16,
})
CANONICAL_GPUS: frozenset[str] = frozenset(GPU_MEMORY_GIB)
#: What a program can allocate on one GPU, where it is known to be less than the nominal size above (ECC and
#: driver reservations): AWS's own figures for L4/A10G (22.35 GiB) and L40S (44.70 GiB), as its price list and
#: DescribeInstanceTypes report them (scripts/catalog-snapshot/aws.csv). ``min_gpu_memory_gib`` compares nominal
#: sizes (``GPU_MEMORY_GIB``); ``usable_memory_notes`` says when that differs from what a program gets.
GPU_USABLE_GIB: Mapping[str, float] = MappingProxyType({"L4": 22.35, "A10G": 22.35, "L40S": 44.70})


def usable_memory_notes(min_gib: float | None, gpus: Iterable[str] | None) -> list[str]:
    """For each GPU (``gpus``; None: every GPU) that ``min_gpu_memory_gib`` admits by its nominal size but whose
    usable memory is below ``min_gib``: one sentence saying so."""
    if min_gib is None:
        return []
    names = sorted(GPU_USABLE_GIB) if gpus is None else sorted(set(gpus))
    return [f"{n} counts as {GPU_MEMORY_GIB[n]:g} GiB (nominal, as clouds sell it) but about {GPU_USABLE_GIB[n]:g} GiB "
            f"is usable, less than {min_gib:g}" for n in names
            if n in GPU_USABLE_GIB and GPU_MEMORY_GIB[n] >= min_gib > GPU_USABLE_GIB[n]]

#: Snapshot (SkyPilot) accelerator name -> trainvm canonical name. H100-MEGA is an H100 80GB on
#: a3-megagpu-8g (the instance type keeps the distinction); "T4g" is the Graviton T4 of g5g.
SOURCE_GPU_NAMES: Mapping[str, str] = MappingProxyType(
    {**{n: n for n in GPU_MEMORY_GIB}, "H100-MEGA": "H100", "Radeon MI25": "MI25", "T4g": "T4G"}
)


def canonical_gpu(source_name: str) -> str:
    try:
        return SOURCE_GPU_NAMES[source_name]
    except KeyError:
        raise ValueError(f"unknown accelerator name {source_name!r} in catalog snapshot") from None


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


# --------------------------------------------------------------------------------------------
# AWS. Instance store NVMe per type, GB -> GiB (floor).
# Source: docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (instance store volumes).
# --------------------------------------------------------------------------------------------
_AWS_NVME_GB = {
    "g4dn.xlarge": 125, "g4dn.2xlarge": 225, "g4dn.4xlarge": 225, "g4dn.8xlarge": 900,
    "g4dn.12xlarge": 900, "g4dn.16xlarge": 900, "g4dn.metal": 1800,
    "g5.xlarge": 250, "g5.2xlarge": 450, "g5.4xlarge": 600, "g5.8xlarge": 900,
    "g5.12xlarge": 3800, "g5.16xlarge": 1900, "g5.24xlarge": 3800, "g5.48xlarge": 7600,
    "g6.xlarge": 250, "g6.2xlarge": 450, "g6.4xlarge": 600, "g6.8xlarge": 900,
    "g6.12xlarge": 3760, "g6.16xlarge": 1880, "g6.24xlarge": 3760, "g6.48xlarge": 7520,
    "g6e.xlarge": 250, "g6e.2xlarge": 450, "g6e.4xlarge": 600, "g6e.8xlarge": 900,
    "g6e.12xlarge": 3800, "g6e.16xlarge": 1900, "g6e.24xlarge": 3800, "g6e.48xlarge": 7600,
    "p3dn.24xlarge": 1800, "p4d.24xlarge": 8000, "p4de.24xlarge": 8000,
    "p5.4xlarge": 3840, "p5.48xlarge": 30720,
}
AWS_LOCAL_NVME_GIB: Mapping[str, int] = MappingProxyType(
    {k: int(v * 1e9 // 2**30) for k, v in _AWS_NVME_GB.items()}
)


def family_of(cloud: str, instance_type: str) -> str:
    """The catalog's ``family`` of an instance type (what the placement facts are keyed by)."""
    if cloud == "gcp":
        from provisioner.providers.gcp import families as gcp_families  # lazy: cycle (providers.gcp reads the catalog)

        return gcp_families.gce_family(instance_type)
    if cloud == "azure":
        series = azure_series(instance_type)
        return series.name if series else instance_type
    return instance_type.split(".", 1)[0]
