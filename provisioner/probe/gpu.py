"""The GPU table of the workstation side: canonical names -> spec (compute capability, VRAM, consumer
part), from the compatibility facts (cloud GPUs) plus the workstation parts we recognise.

The GPU *probe* (NVML, nvidia-smi, the kernel module) and the name rules are the agent's
(``provisioner.agent.gpu``), re-exported here: the workstation and the VM run the same one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from provisioner.agent.gpu import (
    SMI_CSV_ARGS,
    SMI_FIELDS,
    CommandResult,
    GpuInfo,
    GpuProbe,
    Runner,
    canonical_gpu_name,
    compute_capability,
    kernel_module,
    parse_smi_csv,
    parse_smi_xml,
    probe_gpus,
    probe_nvml,
    probe_smi,
    run_command,
    version_from_int,
)
from provisioner.compat.facts import load_facts

__all__ = [
    "SMI_CSV_ARGS", "SMI_FIELDS", "CommandResult", "GpuInfo", "GpuProbe", "GpuSpec", "Runner", "canonical_gpu_name",
    "cloud_gpus", "compute_capability", "gpu_spec", "is_consumer", "kernel_module", "known_gpus", "nominal_memory_gib",
    "parse_cc", "parse_smi_csv", "parse_smi_xml", "probe_gpus", "probe_nvml", "probe_smi", "run_command", "version_from_int",
]


@dataclass(frozen=True)
class GpuSpec:
    """A GPU model: canonical name, compute capability ("8.9"), nominal VRAM in GiB."""

    name: str
    compute_capability: str
    vram_gib: float
    consumer: bool = False

    @property
    def cc(self) -> tuple[int, int]:
        return parse_cc(self.compute_capability)


# Source: NVIDIA's CUDA GPU tables (compute capability) and the clouds' GPU tables (VRAM), as in
# provisioner/compat/data/gpus.yaml. The compat engine exposes the same data; swap the body of cloud_gpus() then.
# Workstation / consumer parts we recognise (never rented by the clouds trainvm supports).
_LOCAL_GPUS: Mapping[str, GpuSpec] = MappingProxyType(
    {
        s.name: s
        for s in (
            GpuSpec("RTX 5090", "12.0", 32, consumer=True),
            GpuSpec("RTX 5080", "12.0", 16, consumer=True),
            GpuSpec("RTX 4090", "8.9", 24, consumer=True),
            GpuSpec("RTX 4080", "8.9", 16, consumer=True),
            GpuSpec("RTX 3090", "8.6", 24, consumer=True),
            GpuSpec("RTX 3090 Ti", "8.6", 24, consumer=True),
            GpuSpec("RTX 3080", "8.6", 10, consumer=True),
            GpuSpec("TITAN RTX", "7.5", 24, consumer=True),
            GpuSpec("TITAN V", "7.0", 12, consumer=True),
            GpuSpec("RTX 6000 Ada", "8.9", 48),
            GpuSpec("RTX A6000", "8.6", 48),
            GpuSpec("A40", "8.6", 48),
            GpuSpec("L40", "8.9", 48),
        )
    }
)


def cloud_gpus() -> Mapping[str, GpuSpec]:
    """Canonical cloud GPU name -> spec, from the compatibility facts (provisioner/compat/data/gpus.yaml)."""

    return {n: GpuSpec(n, g.cc_str, g.memory_gib) for n, g in load_facts().gpus.items() if g.cloud and g.cc_str}


def known_gpus() -> Mapping[str, GpuSpec]:
    """Cloud GPUs plus the workstation/consumer parts we recognise."""
    return {**_LOCAL_GPUS, **cloud_gpus()}


def parse_cc(value: str) -> tuple[int, int]:
    major, _, minor = value.strip().partition(".")
    return int(major), int(minor or 0)


def gpu_spec(name: str, memory_mib: int | None = None) -> GpuSpec | None:
    """Spec of a GPU given its product or canonical name, or None when unknown."""
    return known_gpus().get(canonical_gpu_name(name, memory_mib))


def nominal_memory_gib(name: str, memory_mib: int) -> int:
    """Nominal VRAM of a GPU (what catalogs and profiles say): the table's value when the GPU is
    known, else the reported usable memory rounded down to whole GiB."""
    spec = gpu_spec(name, memory_mib)
    if spec is not None:
        return int(spec.vram_gib)
    return int(memory_mib // 1024)


def is_consumer(name: str) -> bool:
    spec = gpu_spec(name)
    if spec is not None:
        return spec.consumer
    return bool(re.search(r"GeForce|TITAN|\bRTX \d{4}\b", name, flags=re.IGNORECASE))
