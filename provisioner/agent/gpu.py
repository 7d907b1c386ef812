"""GPU probe: NVML (nvidia-ml-py's ``pynvml``, when importable) first, ``nvidia-smi`` second, and the
loaded kernel module from /proc/driver/nvidia/version.

No GPU, no driver, no ``pynvml`` and no ``nvidia-smi`` are normal states: every entry point returns
a :class:`GpuProbe` (possibly empty, with ``notes`` saying why) and never raises.

Also holds the GPU name rules (nvidia-smi product names -> the canonical names profiles use) and the
compute capability of each canonical name (for drivers whose nvidia-smi does not report it). The
compatibility facts (provisioner/compat/data/gpus.yaml) are the source; a test keeps them equal.

Part of the agent: standard library only, CPython >= 3.8 syntax.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as seen on this machine (``name`` is nvidia-smi's product name)."""

    name: str
    memory_mib: int
    compute_capability: Optional[str]

    def as_report(self) -> Dict[str, Any]:
        return {"name": self.name, "memory_mib": self.memory_mib, "compute_capability": self.compute_capability}


@dataclass(frozen=True)
class GpuProbe:
    gpus: Tuple[GpuInfo, ...] = ()
    driver: Optional[str] = None
    cuda_driver_max: Optional[str] = None
    source: Optional[str] = None  # "nvml" | "nvidia-smi" | None
    notes: Tuple[str, ...] = field(default=())
    kernel_module: Optional[str] = None  # the loaded module's version (/proc/driver/nvidia/version)


# canonical name -> compute capability (compat facts `gpus`, plus the workstation parts we recognise)
COMPUTE_CAPABILITY: Dict[str, str] = {
    "K80": "3.7", "M60": "5.2", "P4": "6.1", "P100": "6.0", "V100": "7.0", "V100-32GB": "7.0", "T4": "7.5",
    "A10": "8.6", "A10G": "8.6", "A100": "8.0", "A100-80GB": "8.0", "L4": "8.9", "L40S": "8.9", "L40": "8.9",
    "A40": "8.6", "H100": "9.0", "H200": "9.0", "B200": "10.0", "RTX 6000 Ada": "8.9", "RTX A6000": "8.6",
    "RTX 5090": "12.0", "RTX 5080": "12.0", "RTX 4090": "8.9", "RTX 4080": "8.9", "RTX 3090": "8.6",
    "RTX 3090 Ti": "8.6", "RTX 3080": "8.6", "TITAN RTX": "7.5", "TITAN V": "7.0",
}

# (regex on the name with "NVIDIA "/"Tesla " prefixes removed, canonical name or None = use memory)
_NAME_RULES: Tuple[Tuple[str, Optional[str]], ...] = (
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
_BY_MEMORY: Dict[str, Tuple[int, str, str]] = {"V100": (24 * 1024, "V100-32GB", "V100"), "A100": (60 * 1024, "A100-80GB", "A100")}


def canonical_gpu_name(name: str, memory_mib: Optional[int] = None) -> str:
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


def compute_capability(name: str, memory_mib: Optional[int] = None) -> Optional[str]:
    """The compute capability of a GPU by its (product or canonical) name, or None when unknown."""
    canonical = canonical_gpu_name(name, memory_mib)
    return COMPUTE_CAPABILITY.get(canonical) or COMPUTE_CAPABILITY.get(canonical.replace("-", " "))


# ---------------------------------------------------------------------------------------------
# Running commands (injectable for tests)


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str = ""


Runner = Callable[[Sequence[str]], CommandResult]


def run_command(argv: Sequence[str], timeout: float = 30.0, *, cwd: Optional[str] = None,
                env: Optional[Dict[str, str]] = None) -> CommandResult:
    """Run a command; a missing program is rc 127, a timeout rc 124. Never raises."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=cwd, env=env)
    except FileNotFoundError:
        return CommandResult(127, "", "%s: not found" % argv[0])
    except subprocess.TimeoutExpired:
        return CommandResult(124, "", "%s: timed out after %.0fs" % (argv[0], timeout))
    except OSError as exc:
        return CommandResult(126, "", "%s: %s" % (argv[0], exc))
    return CommandResult(done.returncode, done.stdout, done.stderr)


def version_from_int(value: int) -> str:
    """NVML/CUDA integer versions: 12040 -> "12.4", 11080 -> "11.8"."""
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


# ---------------------------------------------------------------------------------------------
# NVML


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_nvml() -> Optional[GpuProbe]:
    """Probe through ``pynvml``; None when the module is missing or NVML cannot start."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return None
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded / ...
        return GpuProbe(notes=("NVML unavailable: %s" % exc,))
    notes: List[str] = []
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda_max: Optional[str] = None
        try:
            cuda_max = version_from_int(int(nvml.nvmlSystemGetCudaDriverVersion()))
        except Exception as exc:
            notes.append("NVML CUDA driver version: %s" % exc)
        gpus: List[GpuInfo] = []
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(nvml.nvmlDeviceGetName(handle))
            memory_mib = int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024)
            cc: Optional[str]
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                cc = "%d.%d" % (int(major), int(minor))
            except Exception:
                cc = compute_capability(name, memory_mib)
            gpus.append(GpuInfo(name, memory_mib, cc))
    except Exception as exc:
        return GpuProbe(notes=tuple(notes) + ("NVML query failed: %s" % exc,))
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
        raise ValueError("not a memory size: %r" % value)
    number = float(m.group(1))
    return int(number * 1024) if m.group(2) == "GiB" else int(number)


def parse_smi_csv(text: str, fields: Sequence[str] = SMI_FIELDS) -> Tuple[List[GpuInfo], Optional[str]]:
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``.

    Returns the GPUs and the driver version. A header line and unit suffixes ("15360 MiB") are
    accepted; "[N/A]" compute capability falls back to the name table.
    """
    gpus: List[GpuInfo] = []
    driver: Optional[str] = None
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if cells[0] == "name" or len(cells) < len(fields):
            continue  # header line or noise
        row = dict(zip(fields, cells))
        name = row["name"]
        memory = _mib(row.get("memory.total", "0"))
        cc = row.get("compute_cap")
        if cc is None or not re.match(r"^\d+\.\d+$", cc):
            cc = compute_capability(name, memory)
        gpus.append(GpuInfo(name, memory, cc))
        driver = row.get("driver_version") or driver
    return gpus, driver


def parse_smi_xml(text: str) -> Tuple[List[GpuInfo], Optional[str], Optional[str]]:
    """Parse ``nvidia-smi -q -x``: GPUs (CC from the name table), driver, CUDA version."""
    root = ET.fromstring(text)
    driver = (root.findtext("driver_version") or "").strip() or None
    cuda = (root.findtext("cuda_version") or "").strip() or None
    gpus: List[GpuInfo] = []
    for gpu in root.findall("gpu"):
        name = (gpu.findtext("product_name") or "").strip()
        memory = _mib(gpu.findtext("fb_memory_usage/total") or "0")
        gpus.append(GpuInfo(name, memory, compute_capability(name, memory)))
    return gpus, driver, cuda


def probe_smi(runner: Runner = run_command) -> GpuProbe:
    """Probe through ``nvidia-smi`` (CSV query, then ``-q -x`` for the CUDA version)."""
    notes: List[str] = []
    gpus: List[GpuInfo] = []
    driver: Optional[str] = None
    csv = runner(["nvidia-smi", *SMI_CSV_ARGS])
    if csv.returncode == 127:
        return GpuProbe(notes=("nvidia-smi not found",))
    if csv.returncode != 0 and "compute_cap" in csv.stdout + csv.stderr:
        # Drivers before R510 do not know the compute_cap field.
        fields: Sequence[str] = tuple(f for f in SMI_FIELDS if f != "compute_cap")
        csv = runner(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    else:
        fields = SMI_FIELDS
    if csv.returncode == 0:
        try:
            gpus, driver = parse_smi_csv(csv.stdout, fields)
        except ValueError as exc:
            notes.append("nvidia-smi CSV unreadable: %s" % exc)
    else:
        message = (csv.stdout + csv.stderr).strip().splitlines()
        notes.append(("nvidia-smi failed (rc %d): %s" % (csv.returncode, message[0] if message else "")).rstrip(": "))
    cuda: Optional[str] = None
    xml = runner(["nvidia-smi", "-q", "-x"])
    if xml.returncode == 0 and xml.stdout.strip():
        try:
            xml_gpus, xml_driver, cuda = parse_smi_xml(xml.stdout)
            driver = driver or xml_driver
            gpus = gpus or xml_gpus
        except (ET.ParseError, ValueError) as exc:
            notes.append("nvidia-smi XML unreadable: %s" % exc)
    if not gpus and driver is None:
        return GpuProbe(notes=tuple(notes))
    return GpuProbe(tuple(gpus), driver, cuda, "nvidia-smi", tuple(notes))


def kernel_module(root: str = "") -> Optional[str]:
    """The version of the loaded NVIDIA kernel module (``NVRM version: ... 550.127.05 ...``), or None."""
    try:
        with open(root + "/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    m = re.search(r"NVRM version:.*?\s(\d{3}\.\d{2,3}(?:\.\d{2})?)\s", text)
    return m.group(1) if m else None


def probe_gpus(runner: Runner = run_command, root: str = "") -> GpuProbe:
    """NVML when ``pynvml`` imports and works, otherwise ``nvidia-smi``; with the loaded kernel module."""
    nvml = probe_nvml()
    if nvml is not None and nvml.source == "nvml":
        found = nvml
    else:
        smi = probe_smi(runner)
        notes = (nvml.notes if nvml is not None else ()) + smi.notes
        found = GpuProbe(smi.gpus, smi.driver, smi.cuda_driver_max, smi.source, notes)
    return GpuProbe(found.gpus, found.driver, found.cuda_driver_max, found.source, found.notes, kernel_module(root))
