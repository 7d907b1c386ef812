"""From a loaded profile to a ``PlanRequest``, and from there to a ``Plan``.

Host defaults (documented, shown by ``trainvm plan`` under "defaults"): when a profile omits
``min_vcpus`` / ``min_memory_gib``, trainvm asks for enough host to keep the GPUs fed:

* vCPUs: 4 per GPU with < 40 GiB of memory (T4, L4, A10, V100, P100, P4), 8 per GPU from 40 GiB
  (A100, H100, H200, B200, L40S) - SkyPilot picks >= 4 vCPUs per T4 and >= 8 per V100 for the same
  reason: data loaders and host-side augmentation starve a GPU long before it runs out of FLOPs;
  at most 96 in all (the largest bundled 16-GPU hosts have 96, and bundled shapes come with hosts
  the cloud already sized for their GPUs);
* RAM: 3.75 GiB per requested vCPU (the GCE "standard" ratio), and at least 0.9x the GPUs' total
  memory, so a checkpoint or a pinned-memory batch of the full model fits on the host (0.9, not
  1.0: an n1-standard host has 15 GiB per 16 GiB T4, and that is enough).

The smallest GPU the profile accepts sets the numbers, so the defaults never exclude an offer that
an explicit value would have allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from provisioner import settings
from provisioner.catalog.storage import load_catalog
from provisioner.compat.facts import load_facts
from provisioner.errors import InputError
from provisioner.hooks import host_offers
from provisioner.planner.core import plan
from provisioner.planner.request import PlanRequest
from provisioner.profile import LoadedProfile
from provisioner.providers.access import data_locality_exclusions, secret_store_exclusions
from provisioner.providers.registry import compactable_families, rehearsal_clouds

if TYPE_CHECKING:
    from provisioner.catalog.models import Catalog
    from provisioner.planner.core import Plan
    from provisioner.planner.request import PlanRequest

VCPUS_PER_SMALL_GPU = 4
VCPUS_PER_LARGE_GPU = 8
LARGE_GPU_GIB = 40
MAX_DEFAULT_VCPUS = 96
RAM_PER_VCPU_GIB = 3.75
RAM_PER_GPU_MEMORY = 0.9


@dataclass(frozen=True)
class Overrides:
    clouds: tuple[str, ...] | None = None
    regions: tuple[str, ...] | None = None
    spot: bool | None = None


@dataclass(frozen=True)
class HostDefaults:
    """The host size asked for: the profile's values, or the documented per-GPU defaults."""

    min_vcpus: float
    min_memory_gib: float
    applied: dict[str, float]  # the defaults trainvm filled in (`plan` shows them under "defaults")


@dataclass(frozen=True)
class PlannedProfile:
    """``make_plan``'s result: the plan, the catalog it was computed over, and the host defaults applied."""

    plan: Plan
    catalog: Catalog
    applied: dict[str, float]


def host_defaults(loaded: LoadedProfile, excluded: dict[str, str]) -> HostDefaults:
    hw = loaded.profile.hardware
    facts = load_facts()
    names = hw.gpu_names() or [n for n in facts.cloud_gpu_names() if n not in excluded]
    mems = [facts.gpus[n].memory_gib for n in names if facts.gpus[n].memory_gib >= (hw.min_gpu_memory_gib or 0)]
    per_gpu_mem = min(mems) if mems else (hw.min_gpu_memory_gib or 16)
    applied: dict[str, float] = {}
    vcpus: float | None = hw.min_vcpus
    if vcpus is None:
        vcpus = min(hw.gpu_count * (VCPUS_PER_LARGE_GPU if per_gpu_mem >= LARGE_GPU_GIB else VCPUS_PER_SMALL_GPU), MAX_DEFAULT_VCPUS)
        applied["min_vcpus"] = vcpus
    memory = hw.min_memory_gib
    if memory is None:
        memory = max(round(vcpus * RAM_PER_VCPU_GIB, 2), round(RAM_PER_GPU_MEMORY * per_gpu_mem * hw.gpu_count, 2))
        applied["min_memory_gib"] = memory
    return HostDefaults(vcpus, memory, applied)


def build_request(loaded: LoadedProfile, overrides: Overrides | None = None) -> tuple[PlanRequest, dict[str, float]]:
    """The planner's request for ``loaded`` (with ``overrides`` from the command line), and the host
    defaults that were applied."""
    ov = overrides or Overrides()
    p, rec = loaded.profile, loaded.resolved
    pl = rec.placement
    clouds = tuple(ov.clouds or pl.clouds)
    excluded = dict(rec.gpu_exclusions)
    host = host_defaults(loaded, excluded)
    request = PlanRequest(
        gpu_names=frozenset(p.hardware.gpu) if p.hardware.gpu is not None else None,
        min_gpu_memory_gib=p.hardware.min_gpu_memory_gib,
        gpu_count=p.hardware.gpu_count,
        min_vcpus=host.min_vcpus,
        min_memory_gib=host.min_memory_gib,
        local_nvme_gib=p.hardware.local_nvme_gib,
        boot_disk_type=p.hardware.boot_disk.type,
        boot_disk_gib=p.hardware.boot_disk.size_gib,
        clouds=clouds,
        region_globs=tuple(ov.regions) if ov.regions else pl.regions,
        spot=pl.spot if ov.spot is None else ov.spot,
        max_price_per_hour=pl.max_price_per_hour,
        max_failover_premium=pl.max_failover_premium,
        os=p.stack.os,
        stack_excluded_gpus=excluded,
        data_excluded_clouds=data_locality_exclusions(list(rec.data_sources), clouds),
        secret_excluded_clouds=secret_store_exclusions(list(loaded.secret_refs), clouds),
        nodes=pl.nodes,
        compact_families=compactable_families(clouds) if pl.compact_required else None,
        profile_clouds=tuple(pl.clouds) if ov.clouds else None,
    )
    return request, host.applied


def make_plan(loaded: LoadedProfile, overrides: Overrides | None = None, today: date | None = None) -> PlannedProfile:

    request, applied = build_request(loaded, overrides)
    catalog = load_catalog()
    host = host_offers(request.clouds)  # offers that are facts of this machine, read now (not catalog rows)
    if host:
        catalog = replace(catalog, offers=catalog.offers + host)
    return PlannedProfile(plan(request, catalog, today or _today()), catalog, applied)


def _today() -> date:
    """Today, or TRAINVM_TODAY (YYYY-MM-DD) so that golden outputs stay reproducible."""
    raw = settings.text("TRAINVM_TODAY")
    if raw:
        try:
            return date.fromisoformat(raw)
        except ValueError:
            raise InputError(f"TRAINVM_TODAY={raw!r} is not a date (YYYY-MM-DD)") from None
    return date.today()


def region_warnings(request: PlanRequest, catalog: Catalog) -> list[str]:
    """Region globs that exclude a whole allowed cloud are almost always a naming slip
    (GCE says us-central1, Azure says eastus): say so instead of silently planning without it."""
    if not request.region_globs:
        return []
    regions: dict[str, set[str]] = {}
    for offer in catalog.offers:
        regions.setdefault(offer.cloud, set()).add(offer.region)
    out = []
    for cloud in request.clouds:
        if cloud in rehearsal_clouds():  # regions are not a gate there (planner/rehearsal.py): the plan says so
            continue
        names = regions.get(cloud, set())
        if names and not any(fnmatchcase(r, g) for r in names for g in request.region_globs):
            examples = ", ".join(sorted(names)[:3])
            out.append(f"placement.regions ({', '.join(request.region_globs)}) matches no {cloud} region, so {cloud} is never used; {cloud} names regions like {examples}")
    return out
