"""capture: turn a probe report of this workstation into a profile.

``gpu:`` lists the cloud GPUs that run this machine's binaries at least as well. The rule is
SASS binary compatibility: a cubin built for sm_XY runs on a GPU with the same major X and
minor >= Y (sm_86 runs on 8.9, never on 9.0); a newer major would only run embedded PTX through
the driver's JIT, which is slower at first start and not guaranteed to be in every wheel, so
those GPUs are not listed. A candidate must also have at least the local GPU's VRAM (nominal).
An RTX 4090 (8.9, 24 GiB) gives [L4, L40S]: not T4 (7.5), not A10G (8.6 < 8.9), not H100 (9.0).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from datetime import date
from io import StringIO
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from provisioner.agent.compare import framework_cuda
from provisioner.probe.gpu import (
    GpuSpec,
    canonical_gpu_name,
    cloud_gpus,
    is_consumer,
    nominal_memory_gib,
    parse_cc,
)
from provisioner.probe.python_env import PYTORCH_INDEX, normalize_cudnn
from provisioner.probe.report import major_minor

SUPPORTED_OS = ("ubuntu-22.04", "ubuntu-24.04", "debian-12")
OS_GLIBC = {"ubuntu-22.04": "2.35", "debian-12": "2.36", "ubuntu-24.04": "2.39"}
# Used when this machine has no NVIDIA driver (stack.driver is required): the R580 LTSB release
# of compat-facts.yaml (CUDA 13.0 "latest_update"); backward compatible with every CUDA 11.x-13.0 build.
DEFAULT_DRIVER = "580.95.05"
# Oldest driver the cloud images' NVIDIA repositories still install for the supported OSes
# (the CUDA 12.0 floor; compat-facts.yaml cuda_min_driver_linux "12.0" GA). Older drivers are
# legacy branches (R470 and before) that trainvm cannot pin on a new VM.
MIN_CLOUD_DRIVER = "525.60.13"
# conda packages that every conda env has: not worth a warning.
_CONDA_BASE = frozenset({
    "python", "pip", "setuptools", "wheel", "openssl", "ca-certificates", "certifi", "tk", "xz", "zlib",
    "ncurses", "readline", "sqlite", "bzip2", "tzdata", "ld_impl_linux-64", "libffi", "libgcc-ng",
    "libstdcxx-ng", "libgomp", "libuuid", "libnsl", "libzlib", "libsqlite", "libxcrypt", "_libgcc_mutex",
    "_openmp_mutex", "libgcc", "libstdcxx", "liblzma", "libmpdec", "libexpat", "python_abi", "zstd",
})


def compatible_cloud_gpus(cc: str, min_vram_gib: float, table: Mapping[str, GpuSpec] | None = None) -> list[str]:
    """Cloud GPUs with the same major compute capability, minor >= ours, and >= min_vram_gib."""
    major, minor = parse_cc(cc)
    specs = (table if table is not None else cloud_gpus()).values()
    chosen = [s for s in specs if s.cc[0] == major and s.cc[1] >= minor and s.vram_gib >= min_vram_gib]
    return [s.name for s in sorted(chosen, key=lambda s: (s.cc, s.vram_gib, s.name))]


def main_gpus(gpus: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The GPUs a profile mirrors: those of the model with the most memory (then the most units).
    A display card beside the compute GPUs is not what training runs on."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for g in gpus:
        groups.setdefault((str(g.get("name")), str(g.get("compute_capability"))), []).append(g)

    def weight(key: tuple[str, str]) -> tuple[int, int]:
        first = groups[key][0]
        return nominal_memory_gib(key[0], int(first.get("memory_mib") or 0)), len(groups[key])

    return groups[max(groups, key=weight)] if groups else []


def _gpu_requirements(gpus: Sequence[Mapping[str, Any]], warnings: list[str]) -> dict[str, Any]:
    if not gpus:
        warnings.append("no NVIDIA GPU found on this machine: the profile has no GPU requirement; "
                        "add hardware.gpu or hardware.min_gpu_memory_gib by hand")
        return {}
    chosen = main_gpus(gpus)
    name, cc = str(chosen[0].get("name")), chosen[0].get("compute_capability")
    others = sorted({str(g.get("name")) for g in gpus if g.get("name") != name})
    if others:
        warnings.append(f"GPUs of other models are not mirrored ({', '.join(others)}): the profile asks for "
                        f"{len(chosen)} GPU(s) like the {name}")
    nominal = nominal_memory_gib(name, int(chosen[0].get("memory_mib") or 0))
    hardware: dict[str, Any] = {}
    if is_consumer(name):
        warnings.append(f"{name} is a consumer GPU that no cloud rents; gpu: lists cloud GPUs that run "
                        "the same binaries (same architecture major, equal or newer minor, as much VRAM)")
    elif canonical_gpu_name(name, chosen[0].get("memory_mib")) not in cloud_gpus():
        warnings.append(f"{name} is not offered by the supported clouds; gpu: lists compatible ones")
    if not cc:
        warnings.append(f"compute capability of {name} unknown: gpu: not set, only min_gpu_memory_gib")
    else:
        choices = compatible_cloud_gpus(str(cc), nominal)
        if choices:
            hardware["gpu"] = choices
        else:
            warnings.append(f"no cloud GPU has the same architecture major as {name} ({cc}) and {nominal} GiB: "
                            "gpu: not set, only min_gpu_memory_gib")
    hardware["gpu_count"] = len(chosen)
    hardware["min_gpu_memory_gib"] = nominal
    return hardware


def closest_os(glibc: str | None) -> str:
    """The supported OS image with the oldest glibc that is not older than ``glibc``."""
    try:
        local = Version(glibc) if glibc else None
    except InvalidVersion:
        local = None
    for name, image_glibc in sorted(OS_GLIBC.items(), key=lambda kv: Version(kv[1])):
        if local is None or Version(image_glibc) >= local:
            return name
    return max(OS_GLIBC, key=lambda n: Version(OS_GLIBC[n]))


def _older(version: str, floor: str) -> bool:
    try:
        return Version(version) < Version(floor)
    except InvalidVersion:
        return False


def _packages(report: Mapping[str, Any], warnings: list[str]) -> list[str]:
    sources = {str(canonicalize_name(k)): v for k, v in (report.get("package_sources") or {}).items()}
    pins: list[str] = []
    editable, direct, conda, invalid = [], [], [], []
    packages = {str(canonicalize_name(k)): str(v) for k, v in (report.get("packages") or {}).items()}
    for name, version in sorted(packages.items()):
        info = sources.get(name) or {}
        if info.get("editable"):
            editable.append(name)
            continue
        try:
            Version(version)
        except InvalidVersion:
            invalid.append(f"{name} {version}")
            continue
        if info.get("conda_package") or info.get("installer") == "conda":
            conda.append(name)
        elif info.get("vcs") or (info.get("url") and not str(info.get("url")).startswith(PYTORCH_INDEX)):
            direct.append(f"{name} ({info.get('url')})")
        pins.append(f"{name}=={version}")
    if editable:
        warnings.append("editable installs are not in the profile (no index has them; install them from your "
                        "repository on the VM): " + ", ".join(editable))
    if invalid:
        warnings.append("versions that are not PEP 440 cannot be pinned and are left out: " + ", ".join(invalid))
    if direct:
        warnings.append("installed from a URL, local path or VCS, so the pin may not resolve from an index on the VM: "
                        + ", ".join(direct))
    if conda:
        warnings.append("installed by conda; the VM installs with pip, where this exact version may not exist: "
                        + ", ".join(conda))
    conda_only = [n for n in sorted(_conda_packages(report))
                  if n not in _CONDA_BASE and not n.startswith(("lib", "_"))
                  and canonicalize_name(n) not in packages
                  and not any(v.get("conda_package") == n for v in sources.values())]
    if conda_only:
        shown = ", ".join(conda_only[:12]) + (f" and {len(conda_only) - 12} more" if len(conda_only) > 12 else "")
        warnings.append(f"conda-only packages (no pip equivalent; not reproduced on the VM): {shown}")
    return pins


def _conda_packages(report: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((report.get("python_env") or {}).get("conda_packages")) or {}


def _stack(report: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    stack: dict[str, Any] = {}
    os_info = report.get("os") or {}
    os_name = f"{os_info.get('id')}-{os_info.get('version')}"
    if os_name in SUPPORTED_OS:
        stack["os"] = os_name
    else:
        stack["os"] = closest_os(os_info.get("glibc"))
        warnings.append(f"this machine runs {os_name} (glibc {os_info.get('glibc')}), not a cloud image trainvm "
                        f"supports: stack.os is {stack['os']}, the oldest supported image whose glibc is at least "
                        "as new (wheels built here need it)")
    driver = report.get("driver")
    if driver:
        stack["driver"] = driver
        if _older(str(driver), MIN_CLOUD_DRIVER):
            warnings.append(f"driver {driver} is older than cloud images support ({MIN_CLOUD_DRIVER}, the CUDA 12 "
                            "floor): pick a newer driver in stack.driver")
    else:
        stack["driver"] = DEFAULT_DRIVER
        warnings.append(f"no NVIDIA driver on this machine: stack.driver is {DEFAULT_DRIVER} (R580 LTSB; runs every "
                        "CUDA up to 13.0 and GPUs from Maxwell to Blackwell); change it if you need another")
    framework = report.get("framework") or None
    cuda = framework_cuda(report)
    toolkit = report.get("cuda_toolkit")
    if cuda:
        stack["cuda"] = cuda
    elif framework is not None:
        warnings.append(f"{framework.get('name')} {framework.get('version')} is a CPU-only build: no stack.cuda")
    if framework is None:
        warnings.append("no framework (torch, tensorflow, jax) importable in the probed interpreter")
    if toolkit:
        stack["cuda_toolkit"] = True
        if cuda and major_minor(toolkit) != cuda:
            warnings.append(f"local nvcc is {toolkit} but the framework uses CUDA {cuda}: the VM gets toolkit {cuda}")
    cudnn = normalize_cudnn((framework or {}).get("cudnn")) or report.get("cudnn")
    if cudnn:
        stack["cudnn"] = cudnn
    if report.get("python"):
        stack["python"] = report["python"]
    stack["packages"] = _packages(report, warnings)
    return stack


def build_profile(report: Mapping[str, Any], name: str,
                  captured: date | None = None) -> tuple[dict[str, Any], str, list[str]]:
    """(profile dict, comment block, warnings) from a probe report; ``captured`` dates the comment."""
    warnings: list[str] = []
    hardware = _gpu_requirements(report.get("gpus") or [], warnings)
    cpus = (report.get("cpu") or {}).get("count")
    if cpus:
        hardware["min_vcpus"] = int(cpus)
    if report.get("memory_gib"):
        hardware["min_memory_gib"] = int(math.floor(float(report["memory_gib"])))
    profile: dict[str, Any] = {"name": name, "hardware": hardware, "stack": _stack(report, warnings)}
    return profile, comment_block(report, profile, warnings, captured), warnings


def comment_block(report: Mapping[str, Any], profile: Mapping[str, Any], warnings: Sequence[str],
                  captured: date | None = None) -> str:
    """What a cloud VM cannot copy exactly: the local GPU, BLAS, disk; and the gpu: rule."""
    lines = ["Captured by `trainvm capture`" + (f" on {captured.isoformat()}" if captured else "") + "."]
    gpus = report.get("gpus") or []
    for gname in sorted({str(g.get("name")) for g in gpus}):  # every local GPU, mirrored or not
        same = [g for g in gpus if g.get("name") == gname]
        g = same[0]
        lines.append(f"Local GPU: {len(same)} x {gname} (compute capability {g.get('compute_capability')}, "
                     f"{g.get('memory_mib')} MiB), driver {report.get('driver')}, "
                     f"driver CUDA {report.get('cuda_driver_max')}")
    if not gpus:
        lines.append("Local GPU: none")
    chosen = (profile.get("hardware") or {}).get("gpu")
    if chosen and gpus:
        cc = main_gpus(gpus)[0].get("compute_capability")
        lines.append(f"gpu: cloud GPUs that run sm_{str(cc).replace('.', '')} binaries natively: same major "
                     f"compute capability, minor >= local, VRAM >= {profile['hardware'].get('min_gpu_memory_gib')} GiB.")
        lines.append("Newer architectures only run PTX through the driver's JIT and are not listed.")
    blas = report.get("blas") or {}
    lines.append(f"BLAS (numpy): {blas.get('name')} {blas.get('version') or ''}".rstrip() if blas else "BLAS: unknown")
    disk = report.get("disk") or {}
    lines.append(f"Disk: {disk.get('path')} on {disk.get('kind') or 'unknown'} storage, {disk.get('free_gib')} GiB free")
    cpu = report.get("cpu") or {}
    os_info = report.get("os") or {}
    lines.append(f"CPU: {cpu.get('model')} ({cpu.get('count')} logical); RAM {report.get('memory_gib')} GiB; "
                 f"OS {os_info.get('id')} {os_info.get('version')}, glibc {os_info.get('glibc')}")
    if warnings:
        lines.append("Not reproducible on the cloud:")
        for w in warnings:
            lines.extend(textwrap.wrap(w, 96, initial_indent="  - ", subsequent_indent="    "))
    return "\n".join(lines)


def _to_commented(value: Any, key: str | None = None) -> Any:
    if isinstance(value, Mapping):
        node = CommentedMap()
        for k, v in value.items():
            node[k] = _to_commented(v, k)
        return node
    if isinstance(value, list | tuple):
        seq = CommentedSeq(_to_commented(v) for v in value)
        if key == "gpu":
            seq.fa.set_flow_style()
        return seq
    if key in _QUOTED and isinstance(value, str):
        return DoubleQuotedScalarString(value)
    return value


_QUOTED = frozenset({"driver", "cuda", "cudnn", "python"})


def to_yaml(profile: Mapping[str, Any], comment: str = "") -> str:
    """The profile as YAML, with ``comment`` as a `#` block at the top."""
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    doc = _to_commented(profile)
    if comment:
        doc.yaml_set_start_comment(comment)
    out = StringIO()
    yaml.dump(doc, out)
    return out.getvalue()
