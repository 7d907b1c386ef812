"""System probe: OS and glibc, CPU, RAM, the disk under a data path, data destinations, nvcc,
system cuDNN (its header, else its Debian package).

Every function reads from paths that tests and the stub harness redirect (``root``: the VM's
``$TRAINVM_ROOT``) and never raises on a missing file: an unknown value is ``None``.

Part of the agent: standard library only, CPython >= 3.8.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from provisioner.agent.gpu import Runner, run_command


@dataclass(frozen=True)
class DiskInfo:
    path: str
    kind: str | None  # "nvme" | "ssd" | "hdd" | None (network, overlay, tmpfs, unknown)
    free_gib: float | None
    device: str | None = None  # block device name, e.g. "nvme0n1"
    fstype: str | None = None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def os_release(root: Path = Path("/")) -> dict[str, str | None]:
    """``{"id": "ubuntu", "version": "22.04"}`` from /etc/os-release (or /usr/lib/os-release)."""
    text = _read(root / "etc/os-release") or _read(root / "usr/lib/os-release") or ""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("'\"")
    return {"id": values.get("ID"), "version": values.get("VERSION_ID")}


def glibc_version() -> str | None:
    """glibc of this machine: os.confstr("CS_GNU_LIBC_VERSION") -> "glibc 2.35" -> "2.35"."""
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        value = None
    if value:
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", value)
        if m:
            return m.group(1)
    lib, version = platform.libc_ver()
    return version if lib == "glibc" and version else None


def cpu_info(root: Path = Path("/")) -> dict[str, object]:
    """``{"model": "...", "count": N}`` with N logical CPUs (the cloud's vCPUs): the processors
    /proc/cpuinfo lists, else ``os.cpu_count()``."""
    model: str | None = None
    count = 0
    for line in (_read(root / "proc/cpuinfo") or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "processor":
            count += 1
        if sep and model is None and key.strip() in ("model name", "Model", "cpu model"):
            model = value.strip()
    return {"model": model or platform.processor() or None, "count": count or os.cpu_count()}


def memory_gib(root: Path = Path("/")) -> float | None:
    """MemTotal from /proc/meminfo in GiB (one decimal)."""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", _read(root / "proc/meminfo") or "", flags=re.MULTILINE)
    return round(int(m.group(1)) / 1024**2, 1) if m else None


def _unescape_mount(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_for(path: str, root: Path = Path("/")) -> tuple[str, str, str] | None:
    """(device, mount point, fstype) of the longest /proc/mounts entry containing ``path``."""
    best: tuple[str, str, str] | None = None
    for line in (_read(root / "proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        device, point, fstype = _unescape_mount(parts[0]), _unescape_mount(parts[1]), parts[2]
        inside = path == point or path.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best[1])):
            best = (device, point, fstype)
    return best


def _disk_of(name: str, root: Path) -> str:
    """A partition's parent disk ("nvme0n1p2" -> "nvme0n1"); a whole disk stays itself."""
    sys_class = root / "sys/class/block" / name
    if (sys_class / "partition").exists():
        try:
            return os.path.basename(os.path.dirname(os.path.realpath(sys_class)))
        except OSError:
            pass
    if (root / "sys/block" / name).exists():
        return name
    m = re.match(r"^(nvme\d+n\d+|mmcblk\d+)p\d+$", name) or re.match(r"^([a-z]+)\d+$", name)
    return m.group(1) if m else name


def _block_name(device: str, root: Path) -> str | None:
    """/dev/nvme0n1p2 -> "nvme0n1"; /dev/mapper/vg-lv -> "dm-0" (via its symlink)."""
    if not device.startswith("/dev/"):
        return None
    dev_path = root / device.lstrip("/")
    try:
        name = os.path.basename(os.path.realpath(dev_path)) if dev_path.is_symlink() else os.path.basename(device)
    except OSError:
        name = os.path.basename(device)
    return _disk_of(name, root)


_WORST_FIRST: tuple[str | None, ...] = ("hdd", None, "ssd", "nvme")


def _kind_of(block: str, root: Path, depth: int = 0) -> str | None:
    """nvme by name; device-mapper/md by their slowest member; else queue/rotational."""
    if block.startswith("nvme"):
        return "nvme"
    slaves = root / "sys/block" / block / "slaves"
    if slaves.is_dir() and depth < 4:
        kinds = [_kind_of(_disk_of(s.name, root), root, depth + 1) for s in sorted(slaves.iterdir())]
        for worst in _WORST_FIRST:
            if kinds and worst in kinds:
                return worst
    rotational = (_read(root / "sys/block" / block / "queue/rotational") or "").strip()
    return {"0": "ssd", "1": "hdd"}.get(rotational)


def disk_info(path: str, root: Path = Path("/")) -> DiskInfo:
    """Kind and free space of the disk holding ``path`` (the nearest existing parent is used)."""
    target = os.path.abspath(path)
    existing = target
    while not os.path.exists(root / existing.lstrip("/")) and existing != "/":
        existing = os.path.dirname(existing)
    try:
        free: float | None = round(shutil.disk_usage(root / existing.lstrip("/")).free / 1024**3, 1)
    except OSError:
        free = None
    resolved = os.path.realpath(existing) if root == Path("/") else existing
    mount = mount_for(resolved, root)
    if mount is None:
        return DiskInfo(target, None, free)
    device, _, fstype = mount
    block = _block_name(device, root)
    kind = _kind_of(block, root) if block else None
    return DiskInfo(target, kind, free, block, fstype)


def nvcc_version(runner: Runner = run_command, root: Path = Path("/")) -> str | None:
    """Toolkit version from ``nvcc --version`` ("release 12.4, V12.4.131" -> "12.4.131"): nvcc on PATH,
    else /usr/local/cuda/bin/nvcc, else the newest /usr/local/cuda-X.Y/bin/nvcc."""
    installed = sorted(root.glob("usr/local/cuda-*/bin/nvcc"), key=lambda p: _numbers(p.parent.parent.name), reverse=True)
    candidates = [shutil.which("nvcc") if root == Path("/") else None, str(root / "usr/local/cuda/bin/nvcc"),
                  *(str(p) for p in installed)]
    for nvcc in [c for c in candidates if c and os.path.exists(c)]:
        done = runner([nvcc, "--version"])
        if done.returncode == 0:
            return parse_nvcc(done.stdout)
    return None


def parse_nvcc(text: str) -> str | None:
    m = re.search(r"release [\d.]+, V(\d+\.\d+\.\d+)", text) or re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


_CUDNN_HEADERS = (
    "usr/include/cudnn_version.h",
    "usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
    "usr/include/x86_64-linux-gnu/cudnn_version_v8.h",
    "usr/local/cuda/include/cudnn_version.h",
)


def system_cudnn(root: Path = Path("/"), runner: Runner = run_command) -> str | None:
    """cuDNN installed system-wide: its Debian package's version ("9.1.0.70", libcudnn9-cuda-12
    9.1.0.70-1), else its version header ("9.1.0"), else None."""
    done = runner(["dpkg-query", "-W", "-f=${Package} ${Version}\\n", "libcudnn*"])
    if done.returncode == 0:
        m = re.search(r"^libcudnn\d+(?:-cuda-\d+)? (\d+(?:\.\d+){2,3})", done.stdout, re.M)
        if m:
            return m.group(1)
    for header in _CUDNN_HEADERS:
        text = _read(root / header)
        if not text:
            continue
        parts = [re.search(rf"#define\s+CUDNN_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCHLEVEL")]
        if all(parts):
            return ".".join(m.group(1) for m in parts if m)
    return None


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text))


def data_status(dest: str, root: Path = Path("/")) -> str:
    """"staged" (non-empty), "empty" or "missing" for one data destination."""
    path = root / dest.lstrip("/")
    if not path.exists():
        return "missing"
    if path.is_dir():
        with os.scandir(path) as entries:
            return "staged" if any(True for _ in entries) else "empty"
    return "staged" if path.stat().st_size > 0 else "empty"
