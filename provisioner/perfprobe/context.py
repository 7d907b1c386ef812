"""Block 0: the context that explains a slow run. No timing; every reader takes the paths it reads
(``root``) or the module it calls (``nvml``, ``torch``) so tests can hand it recorded values."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, TypedDict

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "TORCH_NUM_THREADS")
# File systems whose reads cross a network (parity calls a loader/disk slowdown on them "network").
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.gcsfuse", "fuse.blobfuse", "fuse.blobfuse2",
              "fuse.s3fs", "fuse.goofys", "fuse.mountpoint-s3", "fuse.sshfs", "9p", "ceph", "glusterfs",
              "lustre", "fuse.rclone", "fuse.juicefs", "beegfs", "gpfs", "virtiofs")


class DataFs(TypedDict):
    """Where the data path lives (parity: a network file system slows disk and loader blocks)."""

    path: str
    fstype: Optional[str]
    mount_point: Optional[str]
    network: bool


class HostContext(TypedDict):
    """``context.host`` of a perf document: written by :func:`host_context`, read by
    ``provisioner.verify.parity`` through these keys (mypy checks both sides)."""

    cpu_count: Optional[int]
    affinity: Optional[int]
    cgroup_cpu_quota: Optional[float]
    governors: List[str]
    shm_gib: Optional[float]
    thread_env: Dict[str, str]
    data_fs: DataFs


class GpuState(TypedDict):
    """One GPU of ``context.gpu.gpus`` (and of ``context_under_load``): :func:`nvml_gpus`."""

    index: int
    name: str
    memory_mib: int
    sm_clock_mhz: Optional[int]
    sm_clock_max_mhz: Optional[int]
    mem_clock_mhz: Optional[int]
    mem_clock_max_mhz: Optional[int]
    throttle_reasons: Optional[List[str]]
    power_limit_w: Optional[float]
    power_default_limit_w: Optional[float]
    temperature_c: Optional[int]
    pcie_gen: Optional[int]
    pcie_gen_max: Optional[int]
    pcie_width: Optional[int]
    pcie_width_max: Optional[int]
    ecc: Optional[bool]
    mig: Optional[bool]
    persistence: Optional[int]


class BlasLibrary(TypedDict):
    user_api: Optional[str]
    internal_api: Optional[str]
    num_threads: Optional[int]
    version: Optional[str]
    threading_layer: Optional[str]


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_of(path: str, mountinfo: str) -> Optional[Dict[str, str]]:
    """The mount holding ``path`` (longest mount-point prefix) from /proc/self/mountinfo text."""
    best: Optional[Dict[str, str]] = None
    target = os.path.abspath(path)
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 2:
            continue
        point = _unescape(fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) > len(best["mount_point"])):
            best = {"mount_point": point, "fstype": rfields[0], "source": _unescape(rfields[1])}
    return best


def filesystem(path: str, root: Path = Path("/")) -> DataFs:
    mount = mount_of(os.path.realpath(path), _read(root / "proc/self/mountinfo") or "")
    fstype = mount["fstype"] if mount else None
    return {"path": path, "fstype": fstype, "mount_point": mount["mount_point"] if mount else None,
            "network": bool(fstype and (fstype in NETWORK_FS or fstype.startswith("nfs")))}


def cgroup_cpu_quota(root: Path = Path("/")) -> Optional[float]:
    """CPUs allowed by the cgroup quota (v2 cpu.max, v1 cfs_quota/period); None = unlimited/unknown."""
    v2 = _read(root / "sys/fs/cgroup/cpu.max")
    if v2:
        quota, _, period = v2.strip().partition(" ")
        if quota != "max" and period:
            return round(int(quota) / int(period), 2)
        return None
    quota_text = _read(root / "sys/fs/cgroup/cpu/cpu.cfs_quota_us") or _read(root / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us")
    period_text = _read(root / "sys/fs/cgroup/cpu/cpu.cfs_period_us") or _read(root / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us")
    if quota_text and period_text and int(quota_text) > 0:
        return round(int(quota_text) / int(period_text), 2)
    return None


def governors(root: Path = Path("/")) -> List[str]:
    found = set()
    for path in sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")):
        text = _read(path)
        if text:
            found.add(text.strip())
    return sorted(found)


def shm_gib(root: Path = Path("/")) -> Optional[float]:
    try:
        st = os.statvfs(str(root / "dev/shm"))
    except OSError:
        return None
    return round(st.f_blocks * st.f_frsize / 1024**3, 2)


def affinity_count() -> Optional[int]:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def blas_info(threadpoolctl: Any = None) -> Dict[str, Any]:
    """BLAS/OpenMP libraries and their thread counts via threadpoolctl (imports numpy first so
    its BLAS is loaded)."""
    if threadpoolctl is None:
        try:
            threadpoolctl = importlib.import_module("threadpoolctl")
        except ImportError:
            return {"status": "skipped", "reason": "threadpoolctl not importable", "libraries": []}
    try:
        importlib.import_module("numpy")
    except ImportError:
        pass
    libs: List[BlasLibrary] = []
    for lib in threadpoolctl.threadpool_info():
        libs.append({"user_api": lib.get("user_api"), "internal_api": lib.get("internal_api"),
                     "num_threads": lib.get("num_threads"), "version": lib.get("version"),
                     "threading_layer": lib.get("threading_layer")})
    return {"status": "ok", "reason": None, "libraries": libs}


def blas_vendor(blas: Dict[str, Any]) -> Optional[str]:
    for lib in blas.get("libraries") or []:
        if lib.get("user_api") == "blas":
            return lib.get("internal_api")
    return None


def torch_info(torch: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"version": getattr(torch, "__version__", None)}
    try:
        out["num_threads"] = int(torch.get_num_threads())
        out["num_interop_threads"] = int(torch.get_num_interop_threads())
    except Exception as exc:  # noqa: BLE001 - a broken build still reports what it can
        out["threads_error"] = str(exc)
    try:
        out["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        out["tf32_cudnn"] = bool(torch.backends.cudnn.allow_tf32)
        out["float32_matmul_precision"] = str(torch.get_float32_matmul_precision())
    except Exception:  # noqa: BLE001
        pass
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        out["cuda_available"] = False
    return out


def _call(fn, *args, default=None):
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - NVML answers NotSupported per field on many boards
        return default


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_gpus(nvml: Any) -> List[GpuState]:
    """Per-GPU clocks, throttle reasons, power, PCIe, ECC, MIG, persistence through pynvml.
    Fields a board does not support are None. ``nvml`` is pynvml or a recording of it."""
    nvml.nvmlInit()
    try:
        gpus: List[GpuState] = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            sm, mem = nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
            power = _call(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
            default_power = _call(nvml.nvmlDeviceGetPowerManagementDefaultLimit, h)
            ecc = _call(nvml.nvmlDeviceGetEccMode, h)
            mig = _call(nvml.nvmlDeviceGetMigMode, h)
            reasons = _call(nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)
            gpus.append({
                "index": i,
                "name": _text(nvml.nvmlDeviceGetName(h)),
                "memory_mib": int(nvml.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024),
                "sm_clock_mhz": _call(nvml.nvmlDeviceGetClockInfo, h, sm),
                "sm_clock_max_mhz": _call(nvml.nvmlDeviceGetMaxClockInfo, h, sm),
                "mem_clock_mhz": _call(nvml.nvmlDeviceGetClockInfo, h, mem),
                "mem_clock_max_mhz": _call(nvml.nvmlDeviceGetMaxClockInfo, h, mem),
                "throttle_reasons": decode_throttle(reasons, nvml) if reasons is not None else None,
                "power_limit_w": round(power / 1000, 1) if power else None,
                "power_default_limit_w": round(default_power / 1000, 1) if default_power else None,
                "temperature_c": _call(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU),
                "pcie_gen": _call(nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "pcie_gen_max": _call(nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                "pcie_width": _call(nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                "pcie_width_max": _call(nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
                "ecc": bool(ecc[0]) if ecc else None,
                "mig": bool(mig[0]) if mig else None,
                "persistence": _call(nvml.nvmlDeviceGetPersistenceMode, h),
            })
        return gpus
    finally:
        _call(nvml.nvmlShutdown)


# pynvml's nvmlClocksThrottleReason* constants (nvml.h); names kept as NVIDIA spells them.
THROTTLE_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def decode_throttle(mask: int, nvml: Any = None) -> List[str]:
    return [name for bit, name in sorted(THROTTLE_BITS.items()) if int(mask) & bit]


def gpu_context(nvml: Any = None) -> Dict[str, Any]:
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return {"status": "skipped", "reason": "pynvml (nvidia-ml-py) not importable", "gpus": []}
    try:
        return {"status": "ok", "reason": None, "gpus": nvml_gpus(nvml)}
    except Exception as exc:  # noqa: BLE001 - NVML_ERROR_LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED, ...
        return {"status": "skipped", "reason": f"NVML unavailable: {exc}", "gpus": []}


def host_context(data_path: str, root: Path = Path("/"), environ: Optional[Dict[str, str]] = None) -> HostContext:
    env = os.environ if environ is None else environ
    return {
        "cpu_count": os.cpu_count(),
        "affinity": affinity_count(),
        "cgroup_cpu_quota": cgroup_cpu_quota(root),
        "governors": governors(root),
        "shm_gib": shm_gib(root),
        "thread_env": {k: env[k] for k in THREAD_VARS if k in env},
        "data_fs": filesystem(data_path, root),
    }
