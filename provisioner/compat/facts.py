"""Typed, read-only view of the compatibility facts in ``provisioner/compat/data/*.yaml``.

The YAML files are the single place to edit when a new driver, CUDA, torch, TensorFlow or JAX
release appears; this module only parses them. Every table carries ``sources`` that messages cite.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, NamedTuple

from packaging.version import Version

from provisioner import settings
from provisioner.cache import cached

DATA_DIR = Path(__file__).with_name("data")


FILES = ("gpus", "cuda", "torch", "tensorflow", "jax", "os")


def facts_dir() -> Path:
    return Path(settings.text("TRAINVM_FACTS_DIR") or DATA_DIR)


def _load(name: str) -> dict[str, Any]:
    from ruamel.yaml import YAML  # lazy: startup

    with (facts_dir() / f"{name}.yaml").open(encoding="utf-8") as fh:
        data = YAML(typ="safe").load(fh)
    return data


def cc_tuple(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)


#: nvidia-smi reports usable GPU memory, and MemTotal usable RAM, 2-7% under the nominal size that catalogs
#: and profiles use (T4: 15360 MiB for "16 GB"): a memory requirement is met down to this fraction of it.
#: verify/compare.py judges reports with it, the rendered script's own GPU check (render/context.py) too.
NOMINAL_TOLERANCE = 0.92


class GpuFact(NamedTuple):
    name: str
    vendor: str
    arch: str
    memory_gib: float
    cc: tuple[int, int] | None
    last_branch: int | None
    min_driver: str | None
    modules: str | None
    cloud: bool

    @property
    def cc_str(self) -> str | None:
        return f"{self.cc[0]}.{self.cc[1]}" if self.cc else None


class CudaRelease(NamedTuple):
    version: str
    min_driver: str
    cc_min: tuple[int, int]
    cc_max: tuple[int, int]


class ArchTarget(NamedTuple):
    """One entry of a build's arch list: SASS for ``sm`` (cubin), plus PTX for it when ``ptx``.

    ``specific``: arch-specific SASS (sm_90a, sm_100a) that runs only on exactly that compute capability."""

    sm: int
    ptx: bool
    specific: bool = False

    @classmethod
    def parse(cls, raw: int | str) -> ArchTarget:
        """Torch notation (``86``, ``"8.6"``, ``"120+PTX"``, ``"9.0a"``) or XLA/nvcc notation (``"sm_80"``,
        ``"sm_90a"``, ``"compute_90"``; in TensorFlow/JAX builds ``compute_XY`` means SASS and PTX for XY)."""
        text = str(raw).strip()
        ptx = text.endswith("+PTX") or text.startswith("compute_")
        text = text.removesuffix("+PTX").removeprefix("compute_").removeprefix("sm_")
        specific = text.endswith("a")
        text = text.removesuffix("a")
        if "." in text:
            major, _, minor = text.partition(".")
            text = f"{int(major)}{int(minor)}"
        return cls(int(text), ptx, specific)

    def __str__(self) -> str:
        return f"sm_{self.sm}{'a' if self.specific else ''}{'+PTX' if self.ptx else ''}"


def parse_arch(raw: list[int | str] | str | None) -> tuple[ArchTarget, ...] | None:
    """An arch list as the YAML holds it: a list, or one string split on ``;`` / ``,`` / spaces."""
    if raw is None:
        return None
    items = re.split(r"[;,\s]+", raw.strip()) if isinstance(raw, str) else raw
    return tuple(ArchTarget.parse(a) for a in items if str(a))


class TorchVariant(NamedTuple):
    name: str  # cu124
    cuda: str  # 12.4
    arch: tuple[ArchTarget, ...]
    cudnn: str | None
    arch_source: str | None = None  # where the arch list was read (messages cite it)


class TorchRelease(NamedTuple):
    version: str  # "2.4"
    python: tuple[str, ...]
    pypi_default: str
    glibc: str
    variants: dict[str, TorchVariant]


class TensorflowRelease(NamedTuple):
    version: str
    python: tuple[str, ...]
    cuda: str
    cudnn: str
    min_cc: tuple[int, int] | None
    ptx: tuple[int, int] | None
    glibc: str
    and_cuda: bool
    arch: tuple[ArchTarget, ...] | None = None  # TF_CUDA_COMPUTE_CAPABILITIES of the official wheels, if recorded
    arch_source: str | None = None


class JaxExtra(NamedTuple):
    name: str
    cuda_major: str
    min_cuda: str
    min_driver: str
    min_cc: tuple[int, int]
    cudnn: tuple[str, ...]
    arch: tuple[ArchTarget, ...] | None = None  # HERMETIC_CUDA_COMPUTE_CAPABILITIES of the jaxlib CUDA plugin
    arch_source: str | None = None


class OsImage(NamedTuple):
    name: str
    glibc: str
    nvidia_repo: str  # each cloud's image of this OS: providers/registry.py


def variant_cuda(variant: str) -> str:
    """``cu124`` -> ``12.4``; ``cu118`` -> ``11.8``; ``cu130`` -> ``13.0``."""
    digits = variant[2:]
    return f"{digits[:2]}.{digits[2:]}"


class Facts(NamedTuple):
    gpus: dict[str, GpuFact]
    gpu_aliases: dict[str, str]
    gpu_sources: dict[str, str]
    cuda_families: dict[str, str]
    cuda_releases: dict[str, CudaRelease]
    cuda_sources: dict[str, str]
    torch: dict[str, TorchRelease]
    torch_sources: dict[str, str]
    tensorflow: dict[str, TensorflowRelease]
    tf_sources: dict[str, str]
    jax_extras: dict[str, JaxExtra]
    jax_python_floor: tuple[tuple[str, str], ...]
    jax_glibc: str
    jax_sources: dict[str, str]
    os_images: dict[str, OsImage]
    os_sources: dict[str, str]

    def canonical_gpu(self, name: str) -> str | None:
        if name in self.gpus:
            return name
        return self.gpu_aliases.get(name)

    def cloud_gpu_names(self) -> list[str]:
        return [n for n, g in self.gpus.items() if g.cloud]

    def cuda_family_floor(self, cuda: str) -> str | None:
        return self.cuda_families.get(cuda.split(".")[0])

    def torch_release(self, version: Version) -> TorchRelease | None:
        return self.torch.get(f"{version.major}.{version.minor}")

    def tf_release(self, version: Version) -> TensorflowRelease | None:
        return self.tensorflow.get(f"{version.major}.{version.minor}")


def _cc_or_none(raw: str | None) -> tuple[int, int] | None:
    return cc_tuple(str(raw)) if raw else None


def _source(key: str | None, sources: dict[str, str]) -> str | None:
    """``arch_source`` names an entry of the file's ``sources:`` (or is the citation itself)."""
    return sources.get(key, key) if key else None


@functools.cache
def load_facts() -> Facts:
    """The facts, parsed once per process (and cached on disk by content hash: the data files, this module and
    the schema module facts_schema.py, whose change must miss the cache too)."""
    folder = facts_dir()
    return cached("facts", [folder / f"{n}.yaml" for n in FILES] + [Path(__file__).with_name("facts_schema.py")],
                  _parse_facts)


def _parse_facts() -> Facts:
    """Each file validated (facts_schema.py: a malformed one is a located InputError), then mapped to the tables."""
    from provisioner.compat import facts_schema as S  # lazy: startup

    folder = facts_dir()
    docs = {n: S.load_doc(folder / f"{n}.yaml", S.DOCS[n]) for n in FILES}
    gpus_doc, cuda_doc, torch_doc = docs["gpus"], docs["cuda"], docs["torch"]
    tf_doc, jax_doc, os_doc = docs["tensorflow"], docs["jax"], docs["os"]
    gpus = {
        name: GpuFact(name=name, vendor=g.vendor, arch=g.arch, memory_gib=float(g.memory_gib), cc=_cc_or_none(g.cc),
                      last_branch=g.last_branch, min_driver=g.min_driver, modules=g.modules, cloud=g.cloud)
        for name, g in gpus_doc.gpus.items()
    }
    releases = {
        v: CudaRelease(v, r.min_driver, cc_tuple(r.cc[0]), cc_tuple(r.cc[1]))
        for v, r in cuda_doc.releases.items()
    }
    torch = {}
    tsrc, tfsrc, jsrc = dict(torch_doc.sources), dict(tf_doc.sources), dict(jax_doc.sources)
    for v, r in torch_doc.versions.items():
        variants = {
            name: TorchVariant(name, variant_cuda(name), parse_arch(d.arch) or (), d.cudnn,
                               _source(d.arch_source or r.arch_source, tsrc))
            for name, d in r.variants.items()
        }
        torch[v] = TorchRelease(v, tuple(r.python), r.pypi_default, r.glibc, variants)
    tf = {
        v: TensorflowRelease(
            v, tuple(r.python), r.cuda, r.cudnn, _cc_or_none(r.min_cc), _cc_or_none(r.ptx), r.glibc, r.and_cuda,
            parse_arch(r.arch), _source(r.arch_source, tfsrc),
        )
        for v, r in tf_doc.versions.items()
    }
    jax_extras = {
        n: JaxExtra(n, e.cuda_major, e.min_cuda, e.min_driver, cc_tuple(e.min_cc), tuple(e.cudnn),
                    parse_arch(e.arch), _source(e.arch_source, jsrc))
        for n, e in jax_doc.extras.items()
    }
    os_images = {n: OsImage(n, o.glibc, o.nvidia_repo) for n, o in os_doc.os.items()}
    return Facts(
        gpus=gpus,
        gpu_aliases=dict(gpus_doc.aliases or {}),
        gpu_sources=dict(gpus_doc.sources),
        cuda_families={k: f.floor for k, f in cuda_doc.families.items()},
        cuda_releases=releases,
        cuda_sources=dict(cuda_doc.sources),
        torch=torch,
        torch_sources=tsrc,
        tensorflow=tf,
        tf_sources=tfsrc,
        jax_extras=jax_extras,
        jax_python_floor=tuple((p.versions, p.python_min) for p in jax_doc.python_floor),
        jax_glibc=jax_doc.glibc,
        jax_sources=jsrc,
        os_images=os_images,
        os_sources=dict(os_doc.sources),
    )
