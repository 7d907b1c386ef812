"""Synthetic perf documents for the pure parity tests (schema trainvm.perf/1)."""

from __future__ import annotations

import copy
from typing import Any


def m(median: float, klass: str, unit: str = "x", cv: float = 0.01, **extra: Any) -> dict[str, Any]:
    return {"unit": unit, "class": klass, "higher_is_better": True, "repeats": [median] * 3, "median": median,
            "cv": cv, "max": median, **extra}


def gpu(name: str = "NVIDIA H100 80GB HBM3", **over: Any) -> dict[str, Any]:
    g = {"index": 0, "name": name, "memory_mib": 81559, "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980,
         "mem_clock_mhz": 2619, "mem_clock_max_mhz": 2619, "throttle_reasons": [], "power_limit_w": 700.0,
         "power_default_limit_w": 700.0, "temperature_c": 50, "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 16,
         "pcie_width_max": 16, "ecc": True, "mig": False, "persistence": 1}
    g.update(over)
    return g


def doc(*, gpus: list[dict[str, Any]] | None = None, host: dict[str, Any] | None = None,
        blas: list[dict[str, Any]] | None = None, **metrics: dict[str, Any]) -> dict[str, Any]:
    h = {"cpu_count": 16, "affinity": 16, "cgroup_cpu_quota": None, "governors": ["performance"], "shm_gib": 32.0,
         "thread_env": {}, "data_fs": {"path": "/data", "fstype": "ext4", "mount_point": "/", "network": False}}
    h.update(host or {})
    blocks: dict[str, Any] = {}
    for name, metric in metrics.items():
        blk = {"gpu_compute": "gpu_matmul", "gpu_memory": "gpu_memory", "host_device": "host_device",
               "interconnect": "allreduce", "disk": "disk", "loader": "loader", "cpu": "cpu", "blas": "cpu"}[metric["class"]]
        blocks.setdefault(blk, {"status": "ok", "reason": None, "metrics": {}, "info": {}})["metrics"][name] = copy.deepcopy(metric)
    return {"schema": "trainvm.perf/1", "created": "2026-11-24T00:00:00+00:00",
            "python": {"version": "3.11.9", "executable": "/usr/bin/python3"}, "platform": "Linux", "budget_s": 30,
            "elapsed_s": 30, "context": {"host": h, "gpu": {"status": "ok", "reason": None, "gpus": gpus or []},
                                         "torch": {}, "blas": {"status": "ok", "libraries": blas or []}},
            "blocks": blocks}
