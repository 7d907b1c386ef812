"""Block 6: data-loader throughput with 0 and N workers.

The synthetic dataset "decodes" (zlib-inflates a 256 KiB record) and "augments" (crop, flip,
checksum) each item in pure Python, so it is CPU-bound like JPEG decode + transforms. With torch
the items go through ``torch.utils.data.DataLoader``; without it through a
``multiprocessing.Pool`` (fork where available). ``--data`` adds the same measurement on files
read from the data path (the first files found, at most 4 MiB each).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import random
import time
import zlib
from typing import Any, Dict, List, Optional

from provisioner.perfprobe.stats import block, metric, skipped

RECORD = 256 * 1024
_BLOB: Optional[bytes] = None


def _blob() -> bytes:
    global _BLOB
    if _BLOB is None:
        rng = random.Random(7)
        words = [bytes(rng.randrange(256) for _ in range(16)) for _ in range(64)]
        raw = b"".join(rng.choice(words) for _ in range(RECORD // 16))
        _BLOB = zlib.compress(raw, 6)
    return _BLOB


def synthetic_item(i: int) -> int:
    raw = zlib.decompress(_blob())
    start = (i * 4099) % (len(raw) // 2)
    crop = raw[start:start + len(raw) // 2]
    rows = [crop[j:j + 256][::-1] for j in range(0, len(crop), 256)]  # horizontal flip per row
    return zlib.crc32(b"".join(rows[::-1]))  # vertical flip + checksum


def file_item(path: str) -> int:
    with open(path, "rb") as fh:
        data = fh.read(4 << 20)
    return zlib.crc32(data) ^ len(data)


class SyntheticDataset:
    """Map-style dataset (``__len__``/``__getitem__``): what DataLoader accepts."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return synthetic_item(i)


class FileDataset:
    def __init__(self, paths: List[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> int:
        return file_item(self.paths[i])


def data_files(path: str, limit: int = 512) -> List[str]:
    if os.path.isfile(path):
        return [path]
    out: List[str] = []
    for dirpath, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            if not f.startswith(".trainvm-perf-"):
                out.append(os.path.join(dirpath, f))
            if len(out) >= limit:
                return out
    return out


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else methods[0])


def throughput(dataset: Any, workers: int, torch: Any = None, pool: Any = None) -> float:
    """Items per second for one pass over ``dataset``."""
    n = len(dataset)
    t0 = time.perf_counter()
    if workers == 0:
        for i in range(n):
            dataset[i]
    elif torch is not None:
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers,
                                             multiprocessing_context=_context())
        for _ in loader:
            pass
    else:
        for _ in pool.imap_unordered(dataset.__getitem__, range(n), chunksize=max(1, n // (workers * 8))):
            pass
    return n / (time.perf_counter() - t0)


def _measure(make, per_item_s: float, budget_s: float, workers: int, torch: Any) -> List[float]:
    speedup = max(1, workers) * 0.7
    n = max(16, int(budget_s / 3 / max(per_item_s, 1e-6) * speedup))
    dataset = make(n)
    if workers and torch is None:
        with _context().Pool(workers) as pool:
            pool.map(dataset.__getitem__, range(min(n, workers)))  # start the workers
            return [throughput(dataset, workers, pool=pool) for _ in range(3)]
    return [throughput(dataset, workers, torch) for _ in range(3)]


def loader_block(data_path: Optional[str], budget_s: float, workers: Optional[int] = None,
                 torch: Any = "import") -> Dict[str, Any]:
    if torch == "import":
        try:
            torch = importlib.import_module("torch")
        except ImportError:
            torch = None
    t0 = time.perf_counter()
    workers = workers or min(usable_cpus(), 16)
    backend = "torch.utils.data.DataLoader" if torch is not None else "multiprocessing.Pool"
    probe_start = time.perf_counter()
    for i in range(8):
        synthetic_item(i)
    per_item = (time.perf_counter() - probe_start) / 8
    files = data_files(data_path) if data_path else []
    parts = 2 if files else 1
    metrics: Dict[str, Any] = {}
    info: Dict[str, Any] = {"workers": workers, "backend": backend, "record_kib": RECORD // 1024}
    for label, count in (("w0", 0), ("wN", workers)):
        values = _measure(SyntheticDataset, per_item, budget_s / 2 / parts, count, torch)
        metrics[f"loader_synthetic_{label}_items_s"] = metric(values, "items/s", "loader", extra={"workers": count})
    if data_path and not files:
        info["data"] = f"no files under {data_path}"
    elif files:
        info["data_files"] = len(files)
        t1 = time.perf_counter()
        file_item(files[0])
        per_file = max(time.perf_counter() - t1, 1e-4)
        for label, count in (("w0", 0), ("wN", workers)):
            values = _measure(lambda n: FileDataset((files * (n // len(files) + 1))[:n]), per_file,
                              budget_s / 2 / parts, count, torch)
            metrics[f"loader_data_{label}_items_s"] = metric(values, "items/s", "loader", extra={"workers": count})
    if not metrics:
        return skipped("nothing measured", info)
    return block("ok", metrics=metrics, info=info, seconds=time.perf_counter() - t0)
