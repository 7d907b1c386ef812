"""GCE machine families: per-family GPU attachment and boot disk types, Local SSD per machine type, N1 host limits
per attached GPU, the Local SSD disk count (GCE's ``local_ssd`` hook, provisioner/hooks/: the request builder attaches
that many, and ``plan`` prices them without importing the builder) and the catalog's consistency check of a GCE offer
(the ``catalog_check`` hook). Pure data:
importing it imports no SDK. The catalog converter (scripts/build_catalog.py), the request builder
(providers/gcp/request.py), disk costs (catalog/costs.py, its ``family_disk_map`` hook) and the
placement facts use it.

Sources: cloud.google.com/compute/docs/gpus (N1 GPU limits), .../accelerator-optimized-machines
(bundled GPUs, supported disk types, Local SSD per machine type), .../disks/local-ssd.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from provisioner.errors import InvalidRequestError
from provisioner.providers.registry import DISK_TYPES

if TYPE_CHECKING:
    from provisioner.providers.offer import Offer

LOCAL_SSD_DISK_GIB = 375  # one GCE Local SSD disk
#: Series whose machine types come with a fixed set of Local SSD disks that GCE attaches itself.
BUNDLED_LOCAL_SSD = frozenset({"a2-ultragpu", "a3-highgpu", "a3-megagpu", "a3-edgegpu", "a3-ultragpu", "a4-highgpu"})
#: Local SSD counts N1 accepts; A2 Standard needs at least as many disks as its shape's minimum.
N1_LOCAL_SSD_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 16, 24)
A2_MIN_LOCAL_SSD = {"a2-highgpu-1g": 1, "a2-highgpu-2g": 2, "a2-highgpu-4g": 4, "a2-highgpu-8g": 8, "a2-megagpu-16g": 8}


@dataclass(frozen=True, slots=True)
class GceFamily:
    name: str  # machine-type prefix, e.g. "a3-highgpu"; "n1" for all N1 shapes
    gpu_attach: str  # "attachable" (N1 + guestAccelerators) or "bundled"
    #: profile disk type -> GCE disk type used for the boot disk
    disk_map: Mapping[str, str]
    note: str = ""

    @property
    def disk_types(self) -> tuple[str, ...]:
        return tuple(t for t in DISK_TYPES if t in self.disk_map)


_PD_ALL = MappingProxyType({"standard": "pd-standard", "balanced": "pd-balanced", "ssd": "pd-ssd"})
_PD_NO_STD = MappingProxyType({"balanced": "pd-balanced", "ssd": "pd-ssd"})
# Hyperdisk-only series: hyperdisk-balanced (SSD-backed, provisioned IOPS) satisfies both
# "balanced" and "ssd"; there is no HDD-class boot disk, so "standard" is unavailable.
_HD_ONLY = MappingProxyType({"balanced": "hyperdisk-balanced", "ssd": "hyperdisk-balanced"})

GCE_FAMILIES: Mapping[str, GceFamily] = MappingProxyType({f.name: f for f in (
    GceFamily("n1", "attachable", _PD_ALL, "N1 host + T4/V100/P100/P4 as guestAccelerators"),
    GceFamily("a2-highgpu", "bundled", _PD_ALL, "A2 Standard (A100 40GB)"),
    GceFamily("a2-megagpu", "bundled", _PD_ALL, "A2 Standard, 16x A100 40GB"),
    GceFamily("a2-ultragpu", "bundled", _PD_NO_STD, "A2 Ultra (A100 80GB): no pd-standard"),
    GceFamily("a3-highgpu", "bundled", _PD_NO_STD, "A3 High (H100): pd-balanced/pd-ssd/Hyperdisk"),
    GceFamily("a3-megagpu", "bundled", _PD_NO_STD, "A3 Mega (H100): pd-balanced/pd-ssd/Hyperdisk"),
    GceFamily("a3-edgegpu", "bundled", _PD_NO_STD, "A3 Edge (H100): pd-balanced/pd-ssd/Hyperdisk"),
    GceFamily("a3-ultragpu", "bundled", _HD_ONLY, "A3 Ultra (H200): Hyperdisk only"),
    GceFamily("a4-highgpu", "bundled", _HD_ONLY, "A4 (B200): Hyperdisk only"),
    GceFamily("g2-standard", "bundled", _PD_NO_STD, "G2 (L4): no pd-standard"),
)})


def gce_family(machine_type: str) -> str:
    """``n1-highmem-8`` -> ``n1``; ``a3-highgpu-8g`` -> ``a3-highgpu``."""
    parts = machine_type.split("-")
    return "n1" if parts[0] == "n1" else "-".join(parts[:2])


def gce_disk_type(family: str, profile_disk_type: str) -> str | None:
    """The GCE boot disk type for a profile disk type on that family (None: not available)."""
    fam = GCE_FAMILIES.get(family)
    return None if fam is None else fam.disk_map.get(profile_disk_type)


#: Largest Local SSD capacity per machine type (GiB). Bundled series fix the number of disks per
#: shape (A2 Ultra, A3, A4 attach them automatically; A2 Standard and G2 allow up to the figure).
#: "-nolssd" shapes have none. N1 accepts up to 24 disks.
GCE_LOCAL_SSD_GIB: Mapping[str, int] = MappingProxyType({
    "a2-highgpu-1g": 8 * 375, "a2-highgpu-2g": 8 * 375, "a2-highgpu-4g": 8 * 375,
    "a2-highgpu-8g": 8 * 375, "a2-megagpu-16g": 8 * 375,
    "a2-ultragpu-1g": 375, "a2-ultragpu-2g": 750, "a2-ultragpu-4g": 1500, "a2-ultragpu-8g": 3000,
    "a3-highgpu-1g": 750, "a3-highgpu-2g": 1500, "a3-highgpu-4g": 3000, "a3-highgpu-8g": 6000,
    "a3-megagpu-8g": 6000, "a3-edgegpu-8g": 6000, "a3-edgegpu-8g-nolssd": 0,
    "a3-ultragpu-8g": 12000, "a3-ultragpu-8g-nolssd": 0, "a4-highgpu-8g": 12000,
    "g2-standard-4": 375, "g2-standard-8": 375, "g2-standard-12": 375, "g2-standard-16": 375,
    "g2-standard-24": 750, "g2-standard-32": 375, "g2-standard-48": 1500, "g2-standard-96": 3000,
})
GCE_N1_LOCAL_SSD_GIB = 24 * LOCAL_SSD_DISK_GIB


def gce_local_ssd_gib(machine_type: str) -> int:
    if gce_family(machine_type) == "n1":
        return GCE_N1_LOCAL_SSD_GIB
    return GCE_LOCAL_SSD_GIB.get(machine_type, 0)


#: N1 + attachable GPU: (gpu, count) -> (max vCPUs, max RAM GiB) of the host.
N1_GPU_LIMITS: Mapping[tuple[str, int], tuple[int, int]] = MappingProxyType({
    ("T4", 1): (48, 312), ("T4", 2): (48, 312), ("T4", 4): (96, 624),
    ("V100", 1): (12, 78), ("V100", 2): (24, 156), ("V100", 4): (48, 312), ("V100", 8): (96, 624),
    ("P100", 1): (16, 104), ("P100", 2): (32, 208), ("P100", 4): (96, 624),
    ("P4", 1): (24, 156), ("P4", 2): (48, 312), ("P4", 4): (96, 624),
})
#: Zones with a lower limit than N1_GPU_LIMITS (GCE GPU docs, footnote on P100 x4).
N1_GPU_ZONE_LIMITS: Mapping[tuple[str, int, str], tuple[int, int]] = MappingProxyType({
    ("P100", 4, "us-east1-c"): (64, 208),
    ("P100", 4, "europe-west1-b"): (64, 208),
    ("P100", 4, "europe-west1-d"): (64, 208),
})


def n1_gpu_limits(gpu: str, count: int, zone: str | None = None) -> tuple[int, int] | None:
    """Max (vCPUs, RAM GiB) of an N1 host carrying ``count`` ``gpu``s; None if not attachable."""
    if zone is not None and (gpu, count, zone) in N1_GPU_ZONE_LIMITS:
        return N1_GPU_ZONE_LIMITS[(gpu, count, zone)]
    return N1_GPU_LIMITS.get((gpu, count))


def family_disk_map(family: str) -> Mapping[str, str] | None:
    """GCE's ``family_disk_map`` hook (provisioner/hooks/): profile disk type -> GCE boot disk type on ``family``
    (None: not a GCE family; the registry's ``disk_types`` then apply)."""
    fam = GCE_FAMILIES.get(family)
    return None if fam is None else fam.disk_map


def check_offer(o: Offer) -> list[str]:
    """GCE's ``catalog_check`` hook (provisioner/hooks/): what is wrong with one GCE catalog row (catalog/storage.py
    ``validate_offers``):
    its zone outside its region, an unknown family, boot disk types or GPU attachment the family does not have,
    an N1 host above GCE's limits for its GPUs."""
    where = f"{o.cloud} {o.instance_type} {o.zone or o.region}"
    problems: list[str] = []
    if not o.zone or not o.zone.startswith(o.region + "-"):
        problems.append(f"{where}: zone {o.zone!r} is not in region {o.region}")
    fam = GCE_FAMILIES.get(o.family)
    if fam is None:
        return [*problems, f"{where}: unknown GCE family {o.family!r}"]
    extra = sorted(set(o.disk_types) - set(fam.disk_types))
    if extra:
        problems.append(f"{where}: {o.family} has no {'/'.join(extra)} boot disk")
    if fam.gpu_attach != o.gpu_attach:
        problems.append(f"{where}: {o.family} GPUs are {fam.gpu_attach}")
    if o.gpu_attach == "attachable":
        lim = n1_gpu_limits(o.gpu_name, o.gpu_count, o.zone)
        if lim is None or o.vcpus > lim[0] or o.memory_gib > lim[1]:
            problems.append(f"{where}: N1 host {o.vcpus:g} vCPUs/{o.memory_gib:g} GiB "
                            f"exceeds GCE's limit for {o.gpu_count}x {o.gpu_name}")
    return problems


def local_ssd_count(machine_type: str, gib: int) -> int:
    """Local SSD disks to attach for ``gib`` of scratch (0 where the series brings its own)."""
    if gib <= 0 or gce_family(machine_type) in BUNDLED_LOCAL_SSD:
        return 0
    if gib > gce_local_ssd_gib(machine_type):
        raise InvalidRequestError(f"{machine_type} cannot have {gib} GiB of Local SSD "
                                  f"(at most {gce_local_ssd_gib(machine_type)} GiB)")
    count = math.ceil(gib / LOCAL_SSD_DISK_GIB)
    if gce_family(machine_type) == "n1":
        allowed: tuple[int, ...] = N1_LOCAL_SSD_COUNTS
    elif machine_type in A2_MIN_LOCAL_SSD:  # A2 Standard takes 1, 2, 4 or 8 disks, at least its shape's minimum
        allowed = tuple(n for n in (1, 2, 4, 8) if n >= A2_MIN_LOCAL_SSD[machine_type])
    else:
        return count
    return next(n for n in allowed if n >= count)  # gib <= the maximum, so a count exists
