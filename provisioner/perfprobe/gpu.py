"""Blocks 1-4: GPU matmul TFLOPS by dtype, GPU memory bandwidth, host<->device bandwidth (pinned
and pageable), all-reduce bus bandwidth. Timing uses CUDA events after a warm-up.

Each block takes the ``torch`` module (tests pass a recording of one) and turns event timings
into figures with the pure helpers below. Efficiency against the GPU's published spec is added on
the host side (``provisioner.verify.perfspec``), which reads the sourced table in the facts.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

from provisioner.perfprobe.stats import block, metric, skipped

MATMUL_N = 8192
DTYPES = ("fp32", "tf32", "bf16", "fp16")


def matmul_tflops(n: int, iters: int, ms: float) -> float:
    """2*n^3 flops per square matmul."""
    return 2.0 * n**3 * iters / (ms / 1e3) / 1e12


def gb_per_s(nbytes: int, iters: int, ms: float) -> float:
    return nbytes * iters / (ms / 1e3) / 1e9


def bus_bandwidth(nbytes: int, ms: float, world: int) -> float:
    """NCCL-tests' busbw for all-reduce: algbw * 2(n-1)/n (docs: nccl-tests PERFORMANCE.md)."""
    return nbytes / (ms / 1e3) / 1e9 * 2 * (world - 1) / world


def event_ms(torch: Any, fn: Callable[[], Any], iters: int) -> float:
    """Milliseconds for ``iters`` calls of ``fn`` between two CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end))


def _repeats(torch: Any, fn: Callable[[], Any], iters: int, budget_s: float, warmup: int = 2) -> List[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out: List[float] = []
    deadline = time.perf_counter() + budget_s
    while len(out) < 3 or (time.perf_counter() < deadline and len(out) < 10):
        out.append(event_ms(torch, fn, iters))
    return out


def gpu_unavailable(torch: Any) -> str:
    if torch is None:
        return "torch not importable"
    try:
        if not torch.cuda.is_available():
            return "torch.cuda.is_available() is False (no GPU or no CUDA build)"
    except Exception as exc:  # noqa: BLE001
        return f"torch.cuda unusable: {exc}"
    return ""


def matmul_block(torch: Any, budget_s: float, n: int = MATMUL_N, iters: int = 5,
                 under_load: Optional[Callable[[], Any]] = None) -> Dict[str, Any]:
    """``under_load()`` is called while queued matmuls keep the GPU busy (NVML clocks, throttle
    reasons and PCIe generation read at idle say nothing: the GPU downclocks)."""
    why = gpu_unavailable(torch)
    if why:
        return skipped(why)
    t0 = time.perf_counter()
    major, minor = torch.cuda.get_device_capability(0)
    name = torch.cuda.get_device_name(0)
    metrics: Dict[str, Any] = {}
    notes: Dict[str, str] = {}
    per = budget_s / len(DTYPES)
    saved = torch.backends.cuda.matmul.allow_tf32
    loaded = None
    try:
        for dt in DTYPES:
            if dt == "tf32" and major < 8:
                notes[dt] = f"no TF32 on compute capability {major}.{minor}"
                continue
            if dt == "bf16" and not torch.cuda.is_bf16_supported():
                notes[dt] = "bf16 not supported on this GPU"
                continue
            dtype = torch.float32 if dt in ("fp32", "tf32") else (torch.bfloat16 if dt == "bf16" else torch.float16)
            torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            ms = _repeats(torch, functools.partial(torch.matmul, a, b), iters, per)
            metrics[f"matmul_{dt}_tflops"] = metric([matmul_tflops(n, iters, m) for m in ms], "TFLOPS", "gpu_compute",
                                                    extra={"dtype": dt, "raw_ms": ms, "n": n, "iters": iters})
            if under_load is not None and loaded is None:
                for _ in range(4 * iters):
                    torch.matmul(a, b)
                time.sleep(0.05)
                loaded = under_load()
                torch.cuda.synchronize()
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
        torch.cuda.empty_cache()
    info = {"gpu": name, "compute_capability": f"{major}.{minor}", "notes": notes}
    if loaded is not None:
        info["context_under_load"] = loaded
    return block("ok", metrics=metrics, info=info,
                 seconds=time.perf_counter() - t0)


def memory_block(torch: Any, budget_s: float, mib: int = 1024, iters: int = 10) -> Dict[str, Any]:
    why = gpu_unavailable(torch)
    if why:
        return skipped(why)
    t0 = time.perf_counter()
    src = torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = _repeats(torch, functools.partial(dst.copy_, src), iters, budget_s)
    nbytes = 2 * mib * 2**20  # a copy reads and writes every byte
    del src, dst
    torch.cuda.empty_cache()
    return block("ok", metrics={"device_copy_gbs": metric([gb_per_s(nbytes, iters, m) for m in ms], "GB/s", "gpu_memory",
                                                          extra={"raw_ms": ms, "bytes": nbytes, "iters": iters})},
                 seconds=time.perf_counter() - t0)


def host_device_block(torch: Any, budget_s: float, mib: int = 256, iters: int = 4) -> Dict[str, Any]:
    why = gpu_unavailable(torch)
    if why:
        return skipped(why)
    t0 = time.perf_counter()
    metrics: Dict[str, Any] = {}
    nbytes = mib * 2**20
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    for kind in ("pinned", "pageable"):
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=(kind == "pinned"))
        for direction, fn in (("h2d", functools.partial(dev.copy_, host, non_blocking=True)),
                              ("d2h", functools.partial(host.copy_, dev, non_blocking=True))):
            ms = _repeats(torch, fn, iters, budget_s / 4)
            metrics[f"{direction}_{kind}_gbs"] = metric([gb_per_s(nbytes, iters, m) for m in ms], "GB/s", "host_device",
                                                        extra={"raw_ms": ms, "bytes": nbytes, "iters": iters})
        del host
    del dev
    torch.cuda.empty_cache()
    return block("ok", metrics=metrics, seconds=time.perf_counter() - t0)


def _allreduce_worker(rank: int, world: int, init: str, mib: int, iters: int, out_path: str) -> None:  # pragma: no cover - needs GPUs
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    time_allreduce(torch, dist, mib, iters, out_path if rank == 0 else None)


def time_allreduce(torch: Any, dist: Any, mib: int, iters: int, out_path: Optional[str]) -> None:  # pragma: no cover - needs GPUs
    """In a joined NCCL group: warm up, time ``iters`` all-reduces of ``mib`` MiB five times, write the
    per-call milliseconds (JSON) to ``out_path`` when given (one rank writes), and leave the group."""
    x = torch.ones(mib * 2**20 // 4, dtype=torch.float32, device="cuda")
    for _ in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    ms = [event_ms(torch, lambda: dist.all_reduce(x), iters) / iters for _ in range(5)]
    if out_path is not None:
        with open(out_path, "w") as fh:
            json.dump(ms, fh)
    dist.destroy_process_group()


def allreduce_block(torch: Any, budget_s: float, mib: int = 256, iters: int = 5,
                    spawn: Optional[Callable[..., Any]] = None) -> Dict[str, Any]:
    why = gpu_unavailable(torch)
    if why:
        return skipped(why)
    world = int(torch.cuda.device_count())
    if world < 2:
        return skipped(f"{world} GPU: all-reduce needs several")
    try:
        if not torch.distributed.is_nccl_available():
            return skipped("torch built without NCCL")
    except Exception as exc:  # noqa: BLE001
        return skipped(f"torch.distributed unusable: {exc}")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "ms.json")
        init = "file://" + os.path.join(tmp, "rendezvous")
        (spawn or torch.multiprocessing.spawn)(_allreduce_worker, args=(world, init, mib, iters, out_path), nprocs=world)
        with open(out_path) as fh:
            ms = json.load(fh)
    nbytes = mib * 2**20
    return block("ok", metrics={"allreduce_busbw_gbs": metric([bus_bandwidth(nbytes, m, world) for m in ms], "GB/s", "interconnect",
                                                               extra={"raw_ms": ms, "bytes": nbytes, "world": world})},
                 seconds=time.perf_counter() - t0)
