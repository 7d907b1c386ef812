"""probe(): this machine as a stack report, in the same shape the VM's startup script writes.

The report is schema 1 of /var/lib/trainvm/report.json (see provisioner.verify.compare), with
``source: "local"`` and ``status: "ready"``. Keys beyond the shared contract (the VM may omit
them): ``cuda_runtime``, ``blas``, ``package_sources``, ``python_env``, ``notes``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from provisioner.probe.gpu import GpuProbe, Runner, probe_gpus, run_command
from provisioner.probe.python_env import PythonEnv, ScriptRunner, normalize_cudnn, probe_python, run_script
from provisioner.probe.system import (
    cpu_info,
    disk_info,
    glibc_version,
    memory_gib,
    nvcc_version,
    os_release,
    system_cudnn,
)

SCHEMA = 1


def major_minor(version: str | None) -> str | None:
    """"12.4.131" -> "12.4"; None stays None."""
    if not version:
        return None
    m = re.match(r"(\d+)(?:\.(\d+))?", str(version))
    if not m:
        return None
    return f"{m.group(1)}.{m.group(2) or 0}"


def _dist_version(env: PythonEnv, pattern: str) -> str | None:
    for dist in env.distributions:
        if re.fullmatch(pattern, dist.name):
            return dist.version
    return None


def cuda_runtime(env: PythonEnv) -> str | None:
    """CUDA the framework uses; without a framework, the pip CUDA runtime wheel (major.minor)."""
    if env.framework and env.framework.get("cuda"):
        return major_minor(str(env.framework["cuda"]))
    return major_minor(_dist_version(env, r"nvidia-cuda-runtime(-cu\d+)?"))


def cudnn_version(env: PythonEnv, root: Path = Path("/")) -> str | None:
    """cuDNN the framework uses ("9.1.0"); else the pip cuDNN wheel; else the system header."""
    if env.framework and env.framework.get("cudnn"):
        return normalize_cudnn(env.framework["cudnn"])
    wheel = _dist_version(env, r"nvidia-cudnn(-cu\d+)?")
    if wheel:
        return ".".join(wheel.split(".")[:3])
    return system_cudnn(root)


def data_status(dest: str) -> str:
    """"staged" (non-empty), "empty" or "missing" for one data destination."""
    if not os.path.exists(dest):
        return "missing"
    if os.path.isdir(dest):
        with os.scandir(dest) as entries:
            return "staged" if any(True for _ in entries) else "empty"
    return "staged" if os.path.getsize(dest) > 0 else "empty"


def build_report(gpu: GpuProbe, env: PythonEnv, *, os_info: dict[str, Any], cpu: dict[str, Any],
                 memory: float | None, disk: dict[str, Any], toolkit: str | None, cudnn: str | None,
                 data: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """Assemble the report dict from probe parts (pure; tests build reports with this)."""
    framework = None
    if env.framework:
        fw = env.framework
        framework = {"name": fw.get("name"), "version": fw.get("version"),
                     "cuda": major_minor(fw.get("cuda")) if fw.get("cuda") else None,
                     "cudnn": None if fw.get("cudnn") is None else str(fw.get("cudnn")),
                     "cuda_available": bool(fw.get("cuda_available"))}
    sources = {d.name: d.source_info() for d in env.distributions if d.notable}
    return {
        "schema": SCHEMA,
        "source": "local",
        "status": "ready",
        "gpus": [g.as_report() for g in gpu.gpus],
        "driver": gpu.driver,
        "cuda_driver_max": gpu.cuda_driver_max,
        "framework": framework,
        "cuda_runtime": cuda_runtime(env),
        "cuda_toolkit": toolkit,
        "cudnn": cudnn,
        "python": env.python,
        "packages": env.packages(),
        "package_sources": sources,
        "python_env": {"executable": env.executable, "conda": env.is_conda,
                       "conda_packages": dict(env.conda_packages)},
        "os": os_info,
        "cpu": cpu,
        "memory_gib": memory,
        "disk": disk,
        "blas": env.blas,
        "data": list(data),
        "phases": {},
        "notes": [*gpu.notes, *env.notes],
    }


def probe(python: str | None = None, data_path: str = ".", data_dests: Sequence[str] = (), *,
          runner: Runner = run_command, script_runner: ScriptRunner = run_script,
          root: Path = Path("/")) -> dict[str, Any]:
    """Probe this machine. ``python``: interpreter to inspect (default: the running one);
    ``data_path``: where training data lives (its disk is reported); ``data_dests``: data
    destinations to report as staged/empty/missing. Never raises for missing GPU/tools."""
    gpu = probe_gpus(runner)
    env = probe_python(python, script_runner)
    os_info = {**os_release(root), "glibc": glibc_version()}
    disk = disk_info(data_path, root)
    return build_report(
        gpu, env,
        os_info=os_info,
        cpu=cpu_info(root),
        memory=memory_gib(root),
        disk={"path": disk.path, "kind": disk.kind, "free_gib": disk.free_gib},
        toolkit=nvcc_version(runner),
        cudnn=cudnn_version(env, root),
        data=[{"dest": d, "status": data_status(d)} for d in data_dests],
    )
