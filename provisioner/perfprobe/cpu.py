"""Block 7: CPU single-core and all-core throughput, scaling efficiency, and a BLAS matmul with
1 thread, the inherited default, and all threads (numpy; threadpoolctl when importable, else a
child interpreter with the thread variables set)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from provisioner.perfprobe.context import THREAD_VARS
from provisioner.perfprobe.loader import _context, usable_cpus
from provisioner.perfprobe.stats import block, metric

UNIT = 20_000


def work_unit(_: int = 0) -> int:
    """A fixed amount of interpreter work (integer arithmetic and a dict), about 1-3 ms."""
    acc, table = 0, {}
    for i in range(UNIT):
        acc = (acc * 31 + i) % 1_000_003
        table[i & 255] = acc
    return acc + len(table)


def units_per_s(units: int, workers: int, pool: Any = None) -> float:
    t0 = time.perf_counter()
    if workers <= 1 or pool is None:
        for i in range(units):
            work_unit(i)
    else:
        pool.map(work_unit, range(units), chunksize=max(1, units // (workers * 4)))
    return units / (time.perf_counter() - t0)


def scaling_efficiency(single: float, all_core: float, cpus: int) -> float:
    return all_core / (single * cpus) if single > 0 and cpus > 0 else 0.0


BLAS_SCRIPT = """
import json, sys, time
import numpy as np
n = int(sys.argv[1]); a = np.random.rand(n, n); b = np.random.rand(n, n); a @ b
out = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter(); a @ b; out.append(2 * n ** 3 / (time.perf_counter() - t0) / 1e9)
print(json.dumps(out))
"""


def blas_gflops(n: int, repeats: int, threads: Optional[int], threadpoolctl: Any) -> List[float]:
    """GFLOPS of an n x n float64 matmul; ``threads`` None = as inherited."""
    if threads is None or threadpoolctl is not None:
        np = importlib.import_module("numpy")
        a, b = np.random.rand(n, n), np.random.rand(n, n)

        def run() -> List[float]:
            a @ b
            out = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                a @ b
                out.append(2 * n**3 / (time.perf_counter() - t0) / 1e9)
            return out

        if threads is None:
            return run()
        with threadpoolctl.threadpool_limits(limits=threads, user_api="blas"):
            return run()
    env = dict(os.environ, **{k: str(threads) for k in THREAD_VARS})
    done = subprocess.run([sys.executable, "-c", BLAS_SCRIPT, str(n), str(repeats)], capture_output=True,
                          text=True, env=env, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def cpu_block(budget_s: float, cpus: Optional[int] = None) -> Dict[str, Any]:
    t0 = time.perf_counter()
    cpus = cpus or usable_cpus()
    t = time.perf_counter()
    work_unit()
    unit_s = max(time.perf_counter() - t, 1e-4)
    per = budget_s * 0.6 / 6  # 3 single + 3 all-core repeats
    units = max(4, int(per / unit_s))
    single = [units_per_s(units, 1) for _ in range(3)]
    all_units = max(cpus * 4, units * cpus)
    with _context().Pool(cpus) as pool:
        pool.map(work_unit, range(cpus))
        allc = [units_per_s(all_units, cpus, pool) for _ in range(3)]
    s_med = sorted(single)[1]
    metrics: Dict[str, Any] = {
        "cpu_single_units_s": metric(single, "units/s", "cpu"),
        "cpu_all_units_s": metric(allc, "units/s", "cpu", extra={"processes": cpus}),
        "cpu_scaling_efficiency": metric([scaling_efficiency(s_med, a, cpus) for a in allc], "ratio", "cpu",
                                         extra={"processes": cpus}),
    }
    info: Dict[str, Any] = {"cpus": cpus, "unit_ms": round(unit_s * 1e3, 3)}
    try:
        importlib.import_module("numpy")
    except ImportError:
        info["blas"] = "skipped: numpy not importable"
    else:
        try:
            tpc = importlib.import_module("threadpoolctl")
        except ImportError:
            tpc = None
        n = 512 if budget_s < 10 else 1024
        for label, threads in (("1t", 1), ("default", None), ("all", cpus)):
            metrics[f"blas_{label}_gflops"] = metric(blas_gflops(n, 3, threads, tpc), "GFLOPS", "blas",
                                                     extra={"threads": threads, "n": n})
        info["blas_control"] = "threadpoolctl" if tpc is not None else "child interpreter with *_NUM_THREADS"
    return block("ok", metrics=metrics, info=info, seconds=time.perf_counter() - t0)
