"""Block 5: sequential 1 MiB and random 4 KiB reads on the data path and on local scratch.

``fio`` (JSON output) when it is on PATH; otherwise an O_DIRECT reader in Python (page-aligned
buffers from mmap). Where the file system refuses O_DIRECT (tmpfs, some FUSE) the fallback reads
buffered after POSIX_FADV_DONTNEED and says so (``direct: false``: the page cache may serve).
"""

from __future__ import annotations

import json
import mmap
import os
import random
import shutil
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional

from provisioner.perfprobe.stats import block, metric, skipped

SEQ_BS = 1 << 20
RAND_BS = 4096


def parse_fio(text: str) -> Dict[str, float]:
    """``fio --output-format=json``: read bandwidth (bytes/s) and IOPS of the first job."""
    doc = json.loads(text[text.index("{"):])  # fio may print notes before the JSON
    read = doc["jobs"][0]["read"]
    bw = read.get("bw_bytes")
    if bw is None:
        bw = float(read["bw"]) * 1024  # KiB/s in fio < 3.4
    return {"bw_bytes": float(bw), "iops": float(read["iops"])}


def _fio(path: str, rw: str, bs: str, size: int, runtime: float) -> Dict[str, float]:
    argv = ["fio", "--name=trainvm", f"--filename={path}", f"--rw={rw}", f"--bs={bs}", f"--size={size}",
            "--direct=1", "--ioengine=psync", f"--runtime={max(1, int(runtime))}", "--output-format=json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=runtime + 30, check=False)
    if done.returncode != 0:
        raise OSError(f"fio rc {done.returncode}: {(done.stderr or done.stdout).strip()[:200]}")
    return parse_fio(done.stdout)


def _open(path: str) -> tuple:
    """(fd, direct): O_DIRECT when the file system accepts it for an aligned read, else buffered."""
    if hasattr(os, "O_DIRECT"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError:
            pass
        else:
            try:
                os.preadv(fd, [mmap.mmap(-1, RAND_BS)], 0)
                return fd, True
            except OSError:
                os.close(fd)
    return os.open(path, os.O_RDONLY), False


def _drop_cache(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass


def _read_at(fd: int, buf: mmap.mmap, offset: int) -> int:
    return os.preadv(fd, [buf], offset)


def seq_read_bps(path: str, size: int) -> tuple:
    fd, direct = _open(path)
    try:
        if not direct:
            _drop_cache(fd)
        buf = mmap.mmap(-1, SEQ_BS)
        t0 = time.perf_counter()
        offset = 0
        while offset < size:
            n = _read_at(fd, buf, offset)
            if n <= 0:
                break
            offset += n
        return offset / (time.perf_counter() - t0), direct
    finally:
        os.close(fd)


def rand_read_iops(path: str, size: int, reads: int, rng: random.Random) -> tuple:
    fd, direct = _open(path)
    try:
        if not direct:
            _drop_cache(fd)
        buf = mmap.mmap(-1, RAND_BS)
        blocks = max(1, size // RAND_BS)
        t0 = time.perf_counter()
        for _ in range(reads):
            _read_at(fd, buf, rng.randrange(blocks) * RAND_BS)
        return reads / (time.perf_counter() - t0), direct
    finally:
        os.close(fd)


def make_file(directory: str, size: int) -> str:
    fd, path = tempfile.mkstemp(prefix=".trainvm-perf-", dir=directory)
    chunk = os.urandom(SEQ_BS)
    with os.fdopen(fd, "wb") as fh:
        for _ in range(max(1, size // SEQ_BS)):
            fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    return path


def existing_file(directory: str, min_size: int, limit: int = 2000) -> Optional[str]:
    """The largest regular file (at least ``min_size``) among the first ``limit`` under ``directory``."""
    best, best_size, seen = None, 0, 0
    for dirpath, _dirs, files in os.walk(directory):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                s = os.stat(p, follow_symlinks=False).st_size
            except OSError:
                continue
            if s > best_size and os.path.isfile(p):
                best, best_size = p, s
            seen += 1
            if seen >= limit:
                break
        if seen >= limit:
            break
    return best if best_size >= min_size else None


def measure_target(label: str, directory: str, budget_s: float, size: int) -> Dict[str, Any]:
    created = None
    if os.path.isfile(directory):
        directory = os.path.dirname(os.path.abspath(directory))
    try:
        try:
            created = make_file(directory, size)
            path = created
        except OSError:
            found = existing_file(directory, 16 * SEQ_BS)
            if found is None:
                return {"skipped": f"{directory} is not writable and holds no file of 16 MiB or more"}
            path = found
            size = min(size, os.path.getsize(path))
        per = budget_s / 6
        if shutil.which("fio"):
            seq = [_fio(path, "read", "1M", size, per)["bw_bytes"] for _ in range(3)]
            rnd = [_fio(path, "randread", "4k", size, per)["iops"] for _ in range(3)]
            tool, direct = "fio", True
        else:
            seq, rnd, direct = [], [], True
            rng = random.Random(0)
            for _ in range(3):
                bps, d1 = seq_read_bps(path, size)
                seq.append(bps)
                reads = 256
                iops, d2 = rand_read_iops(path, size, reads, rng)
                rnd.append(iops)
                direct = direct and d1 and d2
            tool = "python-odirect" if direct else "python-buffered"
        extra = {"tool": tool, "direct": direct, "file_mib": size // SEQ_BS}
        return {
            f"disk_{label}_seq_read_mbs": metric([b / 1e6 for b in seq], "MB/s", "disk", extra=extra),
            f"disk_{label}_rand4k_read_iops": metric(rnd, "IOPS", "disk", extra=extra),
        }
    except OSError as exc:
        return {"skipped": f"{directory}: {exc}"}
    finally:
        if created:
            try:
                os.unlink(created)
            except OSError:
                pass


def disk_block(data_path: Optional[str], budget_s: float, scratch: Optional[str] = None,
               size: int = 64 * SEQ_BS) -> Dict[str, Any]:
    t0 = time.perf_counter()
    targets: List[tuple] = [("scratch", scratch or tempfile.gettempdir())]
    if data_path:
        targets.append(("data", data_path))
    metrics: Dict[str, Any] = {}
    notes: Dict[str, str] = {}
    for label, directory in targets:
        got = measure_target(label, directory, budget_s / len(targets), size)
        if "skipped" in got:
            notes[label] = got["skipped"]
        else:
            metrics.update(got)
    info = {"targets": {label: d for label, d in targets}, "notes": notes}
    if not metrics:
        return skipped("; ".join(f"{k}: {v}" for k, v in notes.items()), info)
    return block("ok", metrics=metrics, info=info, seconds=time.perf_counter() - t0)
