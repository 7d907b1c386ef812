"""Producer -> parity: the context that ``provisioner.perfprobe.context`` really produces (from a fake
root file system, a recorded NVML and a recorded threadpoolctl) drives every documented cause rule of
``trainvm parity``.

The other parity tests hand-write block 0; they keep passing when the producer renames a key (the
issue's "mutation 1": renaming ``governors`` or ``shm_gib`` silently disabled two documented causes).
Here the documents come out of the producer's own functions, so a key renamed on either side fails.
Not modelled: the real /proc and /sys of a machine (the files are written by the test) and statvfs of
/dev/shm (answered for that one path).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from provisioner.perfprobe import context as ctx
from provisioner.verify.parity import compare
from tests.perf.docs import doc, m
from tests.perf.fakes import FakeNvml

GIB = 1024**3


def _root(tmp: Path, *, governor: str, quota: str | None, data_fs: str) -> Path:
    (tmp / "proc/self").mkdir(parents=True)
    (tmp / "proc/self/mountinfo").write_text(
        "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
        f"40 22 0:50 / /data rw,relatime - {data_fs} 10.0.0.2:/export rw\n")
    for cpu in ("cpu0", "cpu1"):
        d = tmp / "sys/devices/system/cpu" / cpu / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(governor + "\n")
    if quota:
        (tmp / "sys/fs/cgroup").mkdir(parents=True)
        (tmp / "sys/fs/cgroup/cpu.max").write_text(quota + "\n")
    (tmp / "dev/shm").mkdir(parents=True)
    return tmp


def _nvml_gpu(*, throttle_mask: int, width: int, power_mw: int) -> dict[str, Any]:
    return {"name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * GIB, "clock": {"sm": 1290, "mem": 2619},
            "max_clock": {"sm": 1980, "mem": 2619}, "throttle_mask": throttle_mask,
            "enforced_power_limit_mw": power_mw, "default_power_limit_mw": 700_000, "temperature_c": 60,
            "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": width, "pcie_width_max": 16,
            "ecc": [1, 1], "mig": [0, 0], "persistence": 1}


class _Threadpoolctl:
    def __init__(self, blas: str) -> None:
        self.blas = blas

    def threadpool_info(self) -> list[dict[str, Any]]:
        return [{"user_api": "blas", "internal_api": self.blas, "num_threads": 16, "version": "0.3.27",
                 "threading_layer": "pthreads"}]


def _produced(tmp: Path, monkeypatch: pytest.MonkeyPatch, *, slow: bool) -> dict[str, Any]:
    root = _root(tmp, governor="powersave" if slow else "performance", quota="200000 100000" if slow else None,
                 data_fs="nfs4" if slow else "ext4")
    real_statvfs = os.statvfs
    shm_bytes = (GIB // 2) if slow else 32 * GIB

    def statvfs(path: Any) -> Any:
        if str(path) == str(root / "dev/shm"):
            return os.statvfs_result((4096, 4096, shm_bytes // 4096, 0, 0, 0, 0, 0, 0, 255))
        return real_statvfs(path)

    monkeypatch.setattr(ctx.os, "statvfs", statvfs)
    monkeypatch.setattr(ctx, "affinity_count", lambda: 16)
    env = {"OMP_NUM_THREADS": "1"} if slow else {}
    gpu = _nvml_gpu(throttle_mask=0x4 if slow else 0, width=8 if slow else 16, power_mw=400_000 if slow else 700_000)
    produced = {
        "host": ctx.host_context("/data/train", root=root, environ=env),
        "gpu": ctx.gpu_context(FakeNvml({"gpus": [gpu]})),
        "blas": ctx.blas_info(_Threadpoolctl("openblas" if slow else "mkl")),
    }
    monkeypatch.setattr(ctx.os, "statvfs", real_statvfs)
    return produced


def _doc(context: dict[str, Any], **metrics: dict[str, Any]) -> dict[str, Any]:
    d = doc(**metrics)
    d["context"].update(context)
    return d


METRICS_A = {"matmul_bf16_tflops": m(740, "gpu_compute"), "h2d_pinned_gbs": m(25, "host_device"),
             "loader_data_wN_items_s": m(5000, "loader", workers=16), "blas_default_gflops": m(400, "blas"),
             "cpu_all_ops_s": m(1000, "cpu")}
METRICS_B = {"matmul_bf16_tflops": m(480, "gpu_compute"), "h2d_pinned_gbs": m(12, "host_device"),
             "loader_data_wN_items_s": m(1000, "loader", workers=16), "blas_default_gflops": m(40, "blas"),
             "cpu_all_ops_s": m(300, "cpu")}


def test_every_cause_rule_fires_from_what_the_producer_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _doc(_produced(tmp_path / "a", monkeypatch, slow=False), **METRICS_A)
    b = _doc(_produced(tmp_path / "b", monkeypatch, slow=True), **METRICS_B)
    verdicts = {v.metric: v for v in compare(a, b)}
    assert all(v.verdict == "worse" for v in verdicts.values()), {k: v.verdict for k, v in verdicts.items()}
    causes = {k: " | ".join(c.cause for c in v.causes) for k, v in verdicts.items()}
    # gpu_context -> gpus[].throttle_reasons / power_limit_w / power_default_limit_w
    assert "power-capped" in causes["matmul_bf16_tflops"]
    # gpus[].pcie_width / pcie_width_max
    assert "PCIe link x8 (max x16" in causes["h2d_pinned_gbs"]
    # host.data_fs (filesystem -> network), host.shm_gib
    assert "network file system (nfs4" in causes["loader_data_wN_items_s"]
    assert "/dev/shm is 0.5 GiB" in causes["loader_data_wN_items_s"]
    # host.thread_env, blas.libraries[].internal_api, host.cgroup_cpu_quota, host.governors, host.affinity
    assert "OMP_NUM_THREADS=1" in causes["blas_default_gflops"]
    assert "BLAS is openblas here, mkl on the reference" in causes["blas_default_gflops"]
    assert "cgroup CPU quota of 2.0 CPUs" in causes["cpu_all_ops_s"]
    assert "2 usable CPUs here, 16 on the reference" in causes["cpu_all_ops_s"]
    assert "governor is powersave" in causes["cpu_all_ops_s"]


def test_a_healthy_machine_produces_no_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same producer on the healthy root gives none of the causes: the rules read values, not key presence."""
    a = _doc(_produced(tmp_path / "a", monkeypatch, slow=False), **METRICS_A)
    b = _doc(_produced(tmp_path / "b", monkeypatch, slow=False), **METRICS_B)
    text = " | ".join(c.cause for v in compare(a, b) for c in v.causes)
    for rule in ("power-capped", "PCIe link", "network file system", "/dev/shm", "OMP_NUM_THREADS", "BLAS is",
                 "cgroup CPU quota", "powersave"):
        assert rule not in text
