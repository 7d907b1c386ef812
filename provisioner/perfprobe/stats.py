"""Repeats -> a metric record: median, coefficient of variation, max (stdlib only)."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Dict, List, Optional, Sequence

# Metric classes: parity's tolerance is per class (see provisioner.verify.parity.CLASS_TOLERANCE).
CLASSES = ("gpu_compute", "gpu_memory", "host_device", "interconnect", "disk", "loader", "cpu", "blas")


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation (population stdev / mean); 0 for one value or a zero mean."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    if mean == 0:
        return 0.0
    return float(statistics.pstdev(values) / abs(mean))


def metric(values: Sequence[float], unit: str, klass: str, *, higher_is_better: bool = True,
           extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """One metric as the document stores it. Non-finite repeats are dropped (and counted)."""
    if klass not in CLASSES:
        raise ValueError(f"unknown metric class {klass!r}")
    finite: List[float] = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        raise ValueError("no finite repeats")
    out: Dict[str, Any] = {
        "unit": unit,
        "class": klass,
        "higher_is_better": higher_is_better,
        "repeats": [round(v, 6) for v in finite],
        "median": round(median(finite), 6),
        "cv": round(cv(finite), 6),
        "max": round(max(finite), 6),
    }
    if len(finite) != len(values):
        out["dropped"] = len(values) - len(finite)
    if extra:
        out.update(extra)
    return out


def block(status: str, *, reason: Optional[str] = None, metrics: Optional[Dict[str, Any]] = None,
          info: Optional[Dict[str, Any]] = None, seconds: Optional[float] = None) -> Dict[str, Any]:
    """A block record: ``status`` is ok | skipped | error; skipped/error carry the reason."""
    if status not in ("ok", "skipped", "error"):
        raise ValueError(f"bad block status {status!r}")
    if status != "ok" and not reason:
        raise ValueError("a skipped or failed block needs a reason")
    out: Dict[str, Any] = {"status": status, "reason": reason, "metrics": metrics or {}, "info": info or {}}
    if seconds is not None:
        out["seconds"] = round(seconds, 3)
    return out


def skipped(reason: str, info: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return block("skipped", reason=reason, info=info)


def repeat_until(fn, budget_s: float, *, min_repeats: int = 3, max_repeats: int = 15,
                 clock=None) -> List[float]:
    """Call ``fn()`` (returning one figure) at least ``min_repeats`` times and then while the
    budget lasts, at most ``max_repeats`` times."""
    clock = clock or time.perf_counter
    start = clock()
    values: List[float] = []
    while len(values) < max_repeats:
        values.append(fn())
        if len(values) >= min_repeats and clock() - start >= budget_s:
            break
    return values
