"""Machine-family facts the catalog converter and the planner rely on.

Everything here is a documented cloud fact (source named next to it), not a price. The converter
(scripts/build_catalog.py) uses these tables to fill the per-row columns ``family``,
``disk_types``, ``local_nvme_max_gib`` and to correct/flag the snapshot. Which clouds exist, their OS images
and their disk maps: providers/registry.py. A cloud's own machine-family tables live in its package (GCE's
families, per-family boot disks, Local SSD and N1 limits: providers/gcp/families.py; Azure's series, retirements and
local NVMe: providers/azure/families.py; AWS's instance store: providers/aws/families.py), each with the catalog's
``family`` of a shape (its ``family_of`` hook, provisioner/hooks/).

Vocabulary: a profile's boot disk type is one of ``standard | balanced | ssd``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping

from provisioner import hooks
from provisioner.providers.registry import CLOUD_NAMES
from provisioner.providers.registry import DISK_TYPES as DISK_TYPES  # the catalog modules read it here

#: the clouds with price rows, in the registry's order (the converter writes one CSV per cloud): every cloud but one
#: whose offers are facts of this machine (a ``host_offers`` hook: the local cloud, read at plan time)
CLOUDS = tuple(c for c in CLOUD_NAMES if hooks.of(c).host_offers is None)
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


def family_of(cloud: str, instance_type: str) -> str:
    """The catalog's ``family`` of an instance type (what the placement facts are keyed by): the cloud's
    ``family_of`` hook (provisioner/hooks/), or the instance type itself where the cloud has none."""
    return hooks.family_of(cloud, instance_type)
