"""GPU probe: NVML (nvidia-ml-py's ``pynvml``) first, ``nvidia-smi`` second.

No GPU, no driver, no ``pynvml`` and no ``nvidia-smi`` are normal states: every entry point
returns a :class:`GpuProbe` (possibly empty, with ``notes`` saying why) and never raises.

Also holds the GPU name table: nvidia-smi product names -> canonical names used in profiles,
and :func:`cloud_gpus`, the GPUs the clouds rent with their compute capability and VRAM.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


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


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as seen on this machine (``name`` is nvidia-smi's product name)."""

    name: str
    memory_mib: int
    compute_capability: str | None

    def as_report(self) -> dict[str, Any]:
        return {"name": self.name, "memory_mib": self.memory_mib, "compute_capability": self.compute_capability}


@dataclass(frozen=True)
class GpuProbe:
    gpus: tuple[GpuInfo, ...] = ()
    driver: str | None = None
    cuda_driver_max: str | None = None
    source: str | None = None  # "nvml" | "nvidia-smi" | None
    notes: tuple[str, ...] = field(default=())


# Source: /work/shared/data/compat-facts.yaml `gpu.entries` (NVIDIA CUDA GPU tables; VRAM from cloud
# GPU tables). The compat engine will expose the same data; swap the body of cloud_gpus() then.
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
    from provisioner.compat.facts import load_facts

    return {n: GpuSpec(n, g.cc_str, g.memory_gib) for n, g in load_facts().gpus.items() if g.cloud and g.cc_str}


def known_gpus() -> Mapping[str, GpuSpec]:
    """Cloud GPUs plus the workstation/consumer parts we recognise."""
    return {**_LOCAL_GPUS, **cloud_gpus()}


def parse_cc(value: str) -> tuple[int, int]:
    major, _, minor = value.strip().partition(".")
    return int(major), int(minor or 0)


# (regex on the name with "NVIDIA "/"Tesla " prefixes removed, canonical name or None = use memory)
_NAME_RULES: tuple[tuple[str, str | None], ...] = (
    (r"^K80\b", "K80"),
    (r"^M60\b", "M60"),
    (r"^P4\b", "P4"),
    (r"^P100\b", "P100"),
    (r"^V100S?\b.*32\s*GB", "V100-32GB"),
    (r"^V100S?\b.*16\s*GB", "V100"),
    (r"^V100S?\b", None),
    (r"^T4\b", "T4"),
    (r"^A10G\b", "A10G"),
    (r"^A10\b", "A10"),
    (r"^A100\b.*80\s*GB", "A100-80GB"),
    (r"^A100\b.*40\s*GB", "A100"),
    (r"^A100\b", None),
    (r"^H100\b", "H100"),
    (r"^H200\b", "H200"),
    (r"^B200\b", "B200"),
    (r"^L40S\b", "L40S"),
    (r"^L40\b", "L40"),
    (r"^L4\b", "L4"),
    (r"^A40\b", "A40"),
    (r"^RTX 6000 Ada\b", "RTX 6000 Ada"),
    (r"^RTX A6000\b", "RTX A6000"),
    (r"^(?:GeForce )?RTX (\d{4}(?: Ti)?)\b", "RTX {0}"),
    (r"^(?:GeForce |NVIDIA )?TITAN (RTX|V)\b", "TITAN {0}"),
)

# Parts whose name does not say the memory size: pick by memory (MiB threshold -> big, small).
_BY_MEMORY: Mapping[str, tuple[int, str, str]] = {"V100": (24 * 1024, "V100-32GB", "V100"), "A100": (60 * 1024, "A100-80GB", "A100")}


def canonical_gpu_name(name: str, memory_mib: int | None = None) -> str:
    """Map an nvidia-smi/NVML product name to the canonical profile name.

    "Tesla T4" -> "T4", "NVIDIA A100-SXM4-80GB" -> "A100-80GB", "NVIDIA H100 80GB HBM3" -> "H100",
    "NVIDIA GeForce RTX 4090" -> "RTX 4090". Unknown names come back with the vendor prefix removed.
    """
    short = re.sub(r"^(?:NVIDIA\s+)?(?:Tesla\s+)?", "", name.strip())
    for pattern, canonical in _NAME_RULES:
        m = re.search(pattern, short, flags=re.IGNORECASE)
        if not m:
            continue
        if canonical is None:
            key = m.group(0).strip().upper().rstrip("S")
            threshold, big, small = _BY_MEMORY[key]
            return big if memory_mib is not None and memory_mib >= threshold else small
        return canonical.format(*m.groups())
    return short


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


# ---------------------------------------------------------------------------------------------
# Running commands (injectable for tests)


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str = ""


Runner = Callable[[Sequence[str]], CommandResult]


def run_command(argv: Sequence[str], timeout: float = 30.0, *, cwd: str | None = None,
                env: dict[str, str] | None = None) -> CommandResult:
    """Run a command; a missing program is rc 127, a timeout rc 124. Never raises."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=cwd, env=env)
    except FileNotFoundError:
        return CommandResult(127, "", f"{argv[0]}: not found")
    except subprocess.TimeoutExpired:
        return CommandResult(124, "", f"{argv[0]}: timed out after {timeout:.0f}s")
    except OSError as exc:
        return CommandResult(126, "", f"{argv[0]}: {exc}")
    return CommandResult(done.returncode, done.stdout, done.stderr)


def version_from_int(value: int) -> str:
    """NVML/CUDA integer versions: 12040 -> "12.4", 11080 -> "11.8"."""
    return f"{value // 1000}.{(value % 1000) // 10}"


# ---------------------------------------------------------------------------------------------
# NVML


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_nvml() -> GpuProbe | None:
    """Probe through ``pynvml``; None when the module is missing or NVML cannot start."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return None
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded / ...
        return GpuProbe(notes=(f"NVML unavailable: {exc}",))
    notes: list[str] = []
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda_max: str | None = None
        try:
            cuda_max = version_from_int(int(nvml.nvmlSystemGetCudaDriverVersion()))
        except Exception as exc:
            notes.append(f"NVML CUDA driver version: {exc}")
        gpus: list[GpuInfo] = []
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(nvml.nvmlDeviceGetName(handle))
            memory_mib = int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024)
            cc: str | None
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                cc = f"{int(major)}.{int(minor)}"
            except Exception:
                spec = gpu_spec(name, memory_mib)
                cc = spec.compute_capability if spec else None
            gpus.append(GpuInfo(name, memory_mib, cc))
    except Exception as exc:
        return GpuProbe(notes=(*notes, f"NVML query failed: {exc}"))
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return GpuProbe(tuple(gpus), driver, cuda_max, "nvml", tuple(notes))


# ---------------------------------------------------------------------------------------------
# nvidia-smi

SMI_FIELDS = ("name", "memory.total", "driver_version", "compute_cap", "pci.bus_id")
SMI_CSV_ARGS = ("--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits")


def _mib(value: str) -> int:
    m = re.match(r"\s*([\d.]+)\s*(MiB|GiB)?", value)
    if not m:
        raise ValueError(f"not a memory size: {value!r}")
    number = float(m.group(1))
    return int(number * 1024) if m.group(2) == "GiB" else int(number)


def parse_smi_csv(text: str, fields: Sequence[str] = SMI_FIELDS) -> tuple[list[GpuInfo], str | None]:
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``.

    Returns the GPUs and the driver version. A header line and unit suffixes ("15360 MiB") are
    accepted; "[N/A]" compute capability falls back to the name table.
    """
    gpus: list[GpuInfo] = []
    driver: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if cells[0] == "name" or len(cells) < len(fields):
            continue  # header line or noise
        row = dict(zip(fields, cells, strict=False))
        name = row["name"]
        memory = _mib(row.get("memory.total", "0"))
        cc: str | None = row.get("compute_cap")
        if cc is None or not re.fullmatch(r"\d+\.\d+", cc):
            spec = gpu_spec(name, memory)
            cc = spec.compute_capability if spec else None
        gpus.append(GpuInfo(name, memory, cc))
        driver = row.get("driver_version") or driver
    return gpus, driver


def parse_smi_xml(text: str) -> tuple[list[GpuInfo], str | None, str | None]:
    """Parse ``nvidia-smi -q -x``: GPUs (CC from the name table), driver, CUDA version."""
    root = ET.fromstring(text)
    driver = (root.findtext("driver_version") or "").strip() or None
    cuda = (root.findtext("cuda_version") or "").strip() or None
    gpus: list[GpuInfo] = []
    for gpu in root.findall("gpu"):
        name = (gpu.findtext("product_name") or "").strip()
        memory = _mib(gpu.findtext("fb_memory_usage/total") or "0")
        spec = gpu_spec(name, memory)
        gpus.append(GpuInfo(name, memory, spec.compute_capability if spec else None))
    return gpus, driver, cuda


def probe_smi(runner: Runner = run_command) -> GpuProbe:
    """Probe through ``nvidia-smi`` (CSV query, then ``-q -x`` for the CUDA version)."""
    notes: list[str] = []
    gpus: list[GpuInfo] = []
    driver: str | None = None
    csv = runner(["nvidia-smi", *SMI_CSV_ARGS])
    if csv.returncode == 127:
        return GpuProbe(notes=("nvidia-smi not found",))
    if csv.returncode != 0 and "compute_cap" in csv.stdout + csv.stderr:
        # Drivers before R510 do not know the compute_cap field.
        fields = tuple(f for f in SMI_FIELDS if f != "compute_cap")
        csv = runner(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    else:
        fields = SMI_FIELDS
    if csv.returncode == 0:
        try:
            gpus, driver = parse_smi_csv(csv.stdout, fields)
        except ValueError as exc:
            notes.append(f"nvidia-smi CSV unreadable: {exc}")
    else:
        message = (csv.stdout + csv.stderr).strip().splitlines()
        notes.append(f"nvidia-smi failed (rc {csv.returncode}): {message[0] if message else ''}".rstrip(": "))
    cuda: str | None = None
    xml = runner(["nvidia-smi", "-q", "-x"])
    if xml.returncode == 0 and xml.stdout.strip():
        try:
            xml_gpus, xml_driver, cuda = parse_smi_xml(xml.stdout)
            driver = driver or xml_driver
            gpus = gpus or xml_gpus
        except (ET.ParseError, ValueError) as exc:
            notes.append(f"nvidia-smi XML unreadable: {exc}")
    if not gpus and driver is None:
        return GpuProbe(notes=tuple(notes))
    return GpuProbe(tuple(gpus), driver, cuda, "nvidia-smi", tuple(notes))


def probe_gpus(runner: Runner = run_command) -> GpuProbe:
    """NVML when ``pynvml`` imports and works, otherwise ``nvidia-smi``."""
    nvml = probe_nvml()
    if nvml is not None and nvml.source == "nvml":
        return nvml
    smi = probe_smi(runner)
    if nvml is not None:
        return GpuProbe(smi.gpus, smi.driver, smi.cuda_driver_max, smi.source, nvml.notes + smi.notes)
    return smi
