"""Published GPU peak figures (provisioner/compat/data/gpu_perf.yaml) and efficiency against them."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ruamel.yaml import YAML

from provisioner.compat.facts import facts_dir
from provisioner.probe.gpu import canonical_gpu_name

if TYPE_CHECKING:
    from provisioner.verify.perfdoc import PerfDocument

SPEC_KEYS = ("fp32", "tf32", "bf16", "fp16", "mem_gbs")


@dataclass(frozen=True)
class GpuPerfSpec:
    canonical: str
    variant: str
    match: str
    figures: dict[str, float | None]  # dense figures: fp32/tf32/bf16/fp16 TFLOPS, mem_gbs GB/s
    source: str

    def figure(self, key: str) -> float | None:
        return self.figures.get(key)


@functools.cache
def load_specs() -> dict[str, tuple[GpuPerfSpec, ...]]:
    with (facts_dir() / "gpu_perf.yaml").open(encoding="utf-8") as fh:
        doc = YAML(typ="safe").load(fh)
    return {
        name: tuple(GpuPerfSpec(name, e["variant"], e["match"], {k: e.get(k) for k in SPEC_KEYS}, e["source"]) for e in entries)
        for name, entries in doc["gpus"].items()
    }


def spec_for(product_name: str, memory_mib: int | None = None,
             table: dict[str, tuple[GpuPerfSpec, ...]] | None = None) -> GpuPerfSpec | None:
    """The spec entry of an NVML/nvidia-smi product name ("NVIDIA H100 80GB HBM3"), or None."""
    table = load_specs() if table is None else table
    for entry in table.get(canonical_gpu_name(product_name, memory_mib), ()):
        if re.search(entry.match, product_name, flags=re.IGNORECASE):
            return entry
    return None


# metric name -> spec key
METRIC_SPEC = {"matmul_fp32_tflops": "fp32", "matmul_tf32_tflops": "tf32", "matmul_bf16_tflops": "bf16",
               "matmul_fp16_tflops": "fp16", "device_copy_gbs": "mem_gbs"}


def gpu_name(doc: PerfDocument) -> tuple[str | None, int | None]:
    """The product name (and memory) of GPU 0 in a perf document: NVML context, else the matmul block."""
    gpus = ((doc.get("context") or {}).get("gpu") or {}).get("gpus") or []
    if gpus:
        return gpus[0].get("name"), gpus[0].get("memory_mib")
    info = ((doc.get("blocks") or {}).get("gpu_matmul") or {}).get("info") or {}
    return info.get("gpu"), None


def efficiency(doc: PerfDocument, metric: str, table: dict[str, tuple[GpuPerfSpec, ...]] | None = None) -> tuple[float, GpuPerfSpec] | None:
    """Measured median / published dense peak for a GPU metric; None when unknown."""
    key = METRIC_SPEC.get(metric)
    name, mem = gpu_name(doc)
    if key is None or not name:
        return None
    spec = spec_for(name, mem, table)
    if spec is None or not spec.figure(key):
        return None
    for block in (doc.get("blocks") or {}).values():
        m = (block.get("metrics") or {}).get(metric)
        if m:
            return m["median"] / float(spec.figure(key) or 1), spec
    return None


def annotate(doc: PerfDocument, table: dict[str, tuple[GpuPerfSpec, ...]] | None = None) -> PerfDocument:
    """Add ``efficiency`` and ``spec`` (figure, variant, source) to GPU metrics, in place."""
    for block in (doc.get("blocks") or {}).values():
        for name, m in (block.get("metrics") or {}).items():
            got = efficiency(doc, name, table)
            if got:
                eff, spec = got
                m["efficiency"] = round(eff, 4)
                m["spec"] = {"figure": spec.figure(METRIC_SPEC[name]), "variant": spec.variant, "source": spec.source}
    return doc
