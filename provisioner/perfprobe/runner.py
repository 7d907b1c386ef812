"""Run blocks 0-7 within a time budget and print the versioned JSON document.

Runs under the profile's interpreter: ``python -c 'from provisioner.perfprobe.runner import
main; main()' [--data PATH] [--budget S] [--blocks a,b]``. Prints ``TRAINVM_PERF=<json>`` on the
last line of stdout (the host strips everything else a framework may print on import).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

from provisioner.perfprobe import SCHEMA
from provisioner.perfprobe.context import blas_info, gpu_context, host_context, torch_info
from provisioner.perfprobe.cpu import cpu_block
from provisioner.perfprobe.disk import disk_block
from provisioner.perfprobe.gpu import allreduce_block, host_device_block, matmul_block, memory_block
from provisioner.perfprobe.loader import loader_block
from provisioner.perfprobe.nodes import allreduce_nodes_block
from provisioner.perfprobe.stats import block, skipped

MARKER = "TRAINVM_PERF="
BLOCKS = ("gpu_matmul", "gpu_memory", "host_device", "allreduce", "disk", "loader", "cpu")
# Run only when asked by name (--blocks): the cross-node all-reduce needs every node of a cluster at once.
ON_REQUEST = ("allreduce_nodes",)
# Share of the budget per block (renormalised over the blocks that run).
WEIGHTS = {"gpu_matmul": 0.25, "gpu_memory": 0.05, "host_device": 0.1, "allreduce": 0.1,
           "disk": 0.15, "loader": 0.2, "cpu": 0.15, "allreduce_nodes": 0.1}
GPU_BLOCKS = ("gpu_matmul", "gpu_memory", "host_device", "allreduce", "allreduce_nodes")


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a framework that fails to import is "absent" here
        return None


def allot(budget_s: float, active: List[str]) -> Dict[str, float]:
    total = sum(WEIGHTS[b] for b in active) or 1.0
    return {b: budget_s * WEIGHTS[b] / total for b in active}


def run(data_path: Optional[str], budget_s: float, blocks: Optional[List[str]] = None,
        torch: Any = "import", nvml: Any = None) -> Dict[str, Any]:
    started = time.perf_counter()
    wanted = list(blocks or BLOCKS)
    if torch == "import":
        torch = _import("torch")
    gpu_reason = ""
    if torch is None:
        gpu_reason = "torch not importable"
    else:
        try:
            if not torch.cuda.is_available():
                gpu_reason = "torch.cuda.is_available() is False (no GPU or no CUDA build)"
        except Exception as exc:  # noqa: BLE001
            gpu_reason = f"torch.cuda unusable: {exc}"
    context = {
        "host": host_context(data_path or "."),
        "gpu": gpu_context(nvml),
        "torch": torch_info(torch) if torch is not None else {"status": "skipped", "reason": "torch not importable"},
        "blas": blas_info(),
    }
    active = [b for b in wanted if not (b in GPU_BLOCKS and gpu_reason)]
    budget = allot(budget_s, active)
    runners: Dict[str, Callable[[], Dict[str, Any]]] = {
        "gpu_matmul": lambda: matmul_block(torch, budget["gpu_matmul"], under_load=lambda: gpu_context(nvml)),
        "gpu_memory": lambda: memory_block(torch, budget["gpu_memory"]),
        "host_device": lambda: host_device_block(torch, budget["host_device"]),
        "allreduce": lambda: allreduce_block(torch, budget["allreduce"]),
        "allreduce_nodes": lambda: allreduce_nodes_block(torch, budget["allreduce_nodes"]),
        "disk": lambda: disk_block(data_path, budget["disk"]),
        "loader": lambda: loader_block(data_path, budget["loader"], torch=torch),
        "cpu": lambda: cpu_block(budget["cpu"]),
    }
    results: Dict[str, Any] = {}
    for name in BLOCKS + tuple(b for b in ON_REQUEST if b in wanted):
        if name not in wanted:
            results[name] = skipped("not requested")
        elif name not in active:
            results[name] = skipped(gpu_reason)
        else:
            try:
                results[name] = runners[name]()
            except Exception as exc:  # noqa: BLE001 - one failed block must not lose the others
                results[name] = block("error", reason=f"{type(exc).__name__}: {exc}",
                                      info={"traceback": traceback.format_exc(limit=4)})
    return {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "platform": platform.platform(),
        "budget_s": budget_s,
        "elapsed_s": round(time.perf_counter() - started, 2),
        "context": context,
        "blocks": results,
    }


def compact(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The document without raw CUDA-event timings and tracebacks: what travels in report.json."""
    for blk in doc["blocks"].values():
        blk["info"].pop("traceback", None)
        for m in blk["metrics"].values():
            m.pop("raw_ms", None)
    return doc


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="trainvm-perf-probe")
    parser.add_argument("--data", default=None)
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--blocks", default=None, help="comma-separated subset of " + ",".join(BLOCKS + ON_REQUEST))
    parser.add_argument("--compact", action="store_true", help="drop raw timings and tracebacks (for report.json)")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    blocks = args.blocks.split(",") if args.blocks else None
    unknown = [b for b in blocks or [] if b not in BLOCKS + ON_REQUEST]
    if unknown:
        parser.error(f"unknown block {unknown[0]!r}")
    doc = run(args.data, args.budget, blocks)
    if args.compact:
        doc = compact(doc)
    sys.stdout.flush()
    os.write(1, (MARKER + json.dumps(doc) + "\n").encode())


if __name__ == "__main__":
    main()
