"""What the planner is asked: a cloud-neutral, fully-defaulted description of the VM wanted.

The CLI builds a PlanRequest from a profile (applying the documented per-GPU defaults for
``min_vcpus`` / ``min_memory_gib``) and from the compat engine (``stack_excluded_gpus``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from provisioner.planner.checks import CHECKS
from provisioner.providers.registry import CLOUD_NAMES, DISK_TYPES, default_clouds

#: placement.clouds default: the registry's default clouds (provisionable, `CloudSpec.default`), in its order (ties).
DEFAULT_CLOUDS: tuple[str, ...] = default_clouds()

#: Stable rejection reasons, in the order the planner tests them (the checks of planner/checks.py, where each
#: is defined once). Each rejected offer is counted once, under the first reason it fails.
REASONS: tuple[str, ...] = tuple(c.reason for c in CHECKS)


@dataclass(frozen=True)
class PlanRequest:
    gpu_names: frozenset[str] | None = None
    min_gpu_memory_gib: float | None = None
    gpu_count: int = 1
    min_vcpus: float = 0
    min_memory_gib: float = 0
    local_nvme_gib: int = 0
    boot_disk_type: str = "balanced"
    #: boot disk size per node (disk prices: catalog/costs.py)
    boot_disk_gib: int = 200
    clouds: tuple[str, ...] = DEFAULT_CLOUDS
    region_globs: tuple[str, ...] | None = None
    spot: bool = False
    max_price_per_hour: float | None = None
    #: failover may pay at most the chosen price x (1 + this) when max_price_per_hour is unset
    max_failover_premium: float = 0.25
    os: str = "ubuntu-22.04"
    #: GPU name -> why the pinned stack cannot run there (empty: no restriction)
    stack_excluded_gpus: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    include_unprovisionable: bool = False
    #: clouds trainvm can provision on; None: the cloud registry's (derived at plan time, not stored in the catalog)
    provisionable_clouds: frozenset[str] | None = None
    #: cloud -> why a VM there cannot read the profile's data (providers.registry)
    data_excluded_clouds: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: cloud -> why a VM there cannot read a secret:// reference of the profile outside data[] (providers.access)
    secret_excluded_clouds: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: identical VMs wanted (prices in the plan stay per VM; ``plan`` multiplies for the cluster)
    nodes: int = 1
    #: (cloud, family) pairs allowed when compact placement is required; None: no such requirement
    compact_families: frozenset[tuple[str, str]] | None = None
    #: clouds whose provider creates clusters (nodes > 1); None: the cloud registry's (``group_engine``)
    cluster_clouds: frozenset[str] | None = None
    #: the profile's placement.clouds when ``--cloud`` narrowed ``clouds`` (None: ``clouds`` is the profile's): a cloud
    #: it lists that the request leaves out is relaxed by ``--cloud``, not by editing placement.clouds
    profile_clouds: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__
        if self.gpu_names is not None:
            names = frozenset(self.gpu_names) if not isinstance(self.gpu_names, str) \
                else frozenset({self.gpu_names})
            if not names:
                raise ValueError("gpu_names must not be empty (use None for any GPU)")
            put(self, "gpu_names", names)
        clouds = tuple(dict.fromkeys(self.clouds))
        if not clouds or not set(clouds) <= set(CLOUD_NAMES):
            raise ValueError(f"clouds must be a non-empty subset of {', '.join(CLOUD_NAMES)}")
        put(self, "clouds", clouds)
        if self.region_globs is not None:
            globs = tuple(self.region_globs) if not isinstance(self.region_globs, str) \
                else (self.region_globs,)
            put(self, "region_globs", globs or None)
        if self.gpu_count < 1:
            raise ValueError("gpu_count must be >= 1")
        if self.nodes < 1:
            raise ValueError("nodes must be >= 1")
        if self.compact_families is not None:
            put(self, "compact_families", frozenset(self.compact_families))
        if self.cluster_clouds is not None:
            put(self, "cluster_clouds", frozenset(self.cluster_clouds))
        if self.boot_disk_type not in DISK_TYPES:
            raise ValueError(f"boot_disk_type must be one of {', '.join(DISK_TYPES)}")
        for name in ("min_vcpus", "min_memory_gib", "local_nvme_gib", "boot_disk_gib"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.max_price_per_hour is not None and self.max_price_per_hour <= 0:
            raise ValueError("max_price_per_hour must be > 0")
        if self.max_failover_premium < 0:
            raise ValueError("max_failover_premium must be >= 0")
        put(self, "stack_excluded_gpus", MappingProxyType(dict(self.stack_excluded_gpus)))
        put(self, "data_excluded_clouds", MappingProxyType(dict(self.data_excluded_clouds)))
        put(self, "secret_excluded_clouds", MappingProxyType(dict(self.secret_excluded_clouds)))

    def describe_gpu(self) -> str:
        """``H100 x8`` / ``any GPU with >= 24 GiB x1`` for messages."""
        what = "/".join(sorted(self.gpu_names)) if self.gpu_names else "any GPU"
        if self.min_gpu_memory_gib:
            what += f" with >= {self.min_gpu_memory_gib:g} GiB"
        return f"{what} x{self.gpu_count}" + (f" on each of {self.nodes} nodes" if self.nodes > 1 else "")

    def to_json(self) -> dict[str, object]:
        return {
            "gpu_names": sorted(self.gpu_names) if self.gpu_names else None,
            "min_gpu_memory_gib": self.min_gpu_memory_gib, "gpu_count": self.gpu_count,
            "min_vcpus": self.min_vcpus, "min_memory_gib": self.min_memory_gib,
            "local_nvme_gib": self.local_nvme_gib, "boot_disk_type": self.boot_disk_type,
            "boot_disk_gib": self.boot_disk_gib, "clouds": list(self.clouds),
            "region_globs": list(self.region_globs) if self.region_globs else None,
            "spot": self.spot, "max_price_per_hour": self.max_price_per_hour,
            "max_failover_premium": self.max_failover_premium, "os": self.os,
            "stack_excluded_gpus": dict(sorted(self.stack_excluded_gpus.items())),
            "include_unprovisionable": self.include_unprovisionable,
            "data_excluded_clouds": dict(sorted(self.data_excluded_clouds.items())),
            "secret_excluded_clouds": dict(sorted(self.secret_excluded_clouds.items())),
            "nodes": self.nodes, "compact_required": self.compact_families is not None,
        }


def request_with(req: PlanRequest, **changes: object) -> PlanRequest:
    """A copy of ``req`` with some fields changed (validated again)."""
    data = {f: getattr(req, f) for f in req.__dataclass_fields__}
    data.update(changes)
    return PlanRequest(**data)


