"""Figures for issue 19 / 12 "bounded input": wall time, CPU time and exit code of `trainvm` on each hostile
input, and loading time against the number of env entries (should grow linearly). Prints; asserts nothing
(tests/profile/test_hostile_files.py and tests/cli/test_error_contract.py assert the exit codes and messages).

    .venv/bin/python bench/hostile_inputs.py

Each hostile input must end in under 2 s with exit 1 or 2 and no traceback. On the shared 2-core machine
wall time grows with the load average (printed); CPU time (user + sys of the process) is the figure that
compares across loads. Cases: the profile corpus of tests/profile/test_hostile_files.py through `validate`;
a 50 MB profile; lock files next to a good profile through `plan` (sparse 2 GiB, FIFO, /dev/zero, symlink
loop, 50 MB); a report through `diff` that is not JSON, an array, truncated, a field of the wrong type, a million
nested brackets, 50 MB, a FIFO or /dev/zero (issue 37); VM names with a slash, ESC codes or 10,000 characters through `down`/`status` (no cloud:
they must be refused before any cloud call).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "profile"))

from test_hostile_files import CASES, GOOD, make  # noqa: E402

LIMIT_S = 2.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(*args: str) -> tuple[float, float, int, str]:
    """(wall s, cpu s, exit code, verdict) of one `trainvm ARGS` with no cloud credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "AZURE_", "AWS_", "TRAINVM_DEBUG"))}
    env["TRAINVM_TODAY"] = "2026-11-22"
    c, t = _cpu(), time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True, timeout=120,
                           cwd=REPO, env=env, errors="replace")
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t, _cpu() - c, -1, "HANG (killed after 120 s)"
    wall, cpu = time.perf_counter() - t, _cpu() - c
    bad = [what for what, hit in (("traceback", "Traceback" in r.stderr), ("internal error", "internal error" in r.stderr),
                                  ("raw ESC/BEL", any(ch in r.stderr + r.stdout for ch in "\x1b\x07")),
                                  (f"exit {r.returncode}", r.returncode not in (1, 2)))
           if hit]
    return wall, cpu, r.returncode, "ok" if not bad else "BAD: " + ", ".join(bad)


def lock_case(tmp: Path, kind: str) -> Path:
    """A good profile whose NAME.lock is hostile."""
    d = tmp / f"lock-{kind}"
    d.mkdir()
    profile = d / "bert-finetune-t4.yaml"
    profile.write_text(GOOD)
    lock = d / "bert-finetune-t4.lock"
    if kind == "sparse_2g":
        with open(lock, "wb") as f:
            f.truncate(2 << 30)
    elif kind == "fifo":
        os.mkfifo(lock)
    elif kind == "dev_zero":
        lock.symlink_to("/dev/zero")
    elif kind == "symlink_loop":
        (d / "other.lock").symlink_to(lock)
        lock.symlink_to(d / "other.lock")
    elif kind == "big_50mb":
        lock.write_text("# filler\n" * (50 * 1024 * 1024 // 9))
    else:
        raise AssertionError(kind)
    return profile


REPORT = REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json"
DIFF_KINDS = ("not_json", "array", "wrong_type", "truncated", "nested_1m", "big_50mb", "fifo", "dev_zero")


def diff_case(tmp: Path, kind: str) -> list[str]:
    """`diff` of the fixture report against a hostile JSON file (issue 37: a clear error, bounded time and memory)."""
    d = _fresh(tmp, f"diff-{kind}")
    p = d / "report.json"
    good = REPORT.read_text()
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev_zero":
        p.symlink_to("/dev/zero")
    else:
        p.write_text({"not_json": "TRAINVM_REPORT=garbage", "array": "[1, 2, 3]", "truncated": good[: len(good) // 2],
                      "wrong_type": good.replace('"driver": "', '"driver": 550, "x_was": "', 1),
                      "nested_1m": "[" * 1_000_000,
                      "big_50mb": '{"schema": 1, "status": "ready", "packages": {' + ", ".join(
                          f'"p{i}": "1.0"' for i in range(2_800_000)) + "}}"}[kind])
    return ["diff", str(REPORT), str(p)]


def main() -> None:
    load = os.getloadavg()
    print(f"hostile inputs, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; each must end < {LIMIT_S:g} s with exit 1 or 2, no traceback")
    print(f"{'case':34s} {'wall':>7s} {'cpu':>7s}  exit  verdict")
    rows: list[tuple[str, Callable[[Path], list[str]]]] = []
    for kind in CASES:
        rows.append((f"validate: {kind}", lambda tmp, k=kind: ["validate", str(make(_fresh(tmp, k), k))]))

    def big_50mb(tmp: Path) -> list[str]:
        p = _fresh(tmp, "big_50mb") / "p.yaml"
        p.write_text("name: x\n" + "# filler\n" * (50 * 1024 * 1024 // 9))
        return ["validate", str(p)]

    rows.append(("validate: 50 MB profile", big_50mb))
    for kind in ("sparse_2g", "fifo", "dev_zero", "symlink_loop", "big_50mb"):
        rows.append((f"plan: lock file {kind}", lambda tmp, k=kind: ["plan", str(lock_case(tmp, k))]))
    for kind in DIFF_KINDS:
        rows.append((f"diff: report {kind}", lambda tmp, k=kind: diff_case(tmp, k)))
    rows += [("down: name 'a/b'", lambda tmp: ["down", "a/b", "--yes"]),
             ("down: name with ESC codes", lambda tmp: ["down", "x\x1b[2J\x07", "--yes"]),
             ("status: 10,000-character name", lambda tmp: ["status", "a" * 10_000])]
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu, rc, _ = run("validate", str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"))
        print(f"{'validate: valid example (reference)':34s} {wall:6.2f}s {cpu:6.2f}s  {rc:4d}  (exit 0 expected)")
        for label, argv in rows:
            wall, cpu, rc, verdict = run(*argv(Path(tmp)))
            slow = "" if wall < LIMIT_S else f" (wall over {LIMIT_S:g} s)"
            print(f"{label:34s} {wall:6.2f}s {cpu:6.2f}s  {rc:4d}  {verdict}{slow}")
        for n in (1000, 2500, 5000, 10000):
            p = Path(tmp) / f"env{n}.yaml"
            p.write_text(GOOD.replace("stack:\n", "stack:\n  env:\n" + "".join(f"    VAR_{i}: value-{i}\n" for i in range(n)), 1))
            wall, cpu, rc, _ = run("validate", str(p))
            print(f"{'validate: ' + str(n) + ' env entries':34s} {wall:6.2f}s {cpu:6.2f}s  {rc:4d}")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def _fresh(tmp: Path, name: str) -> Path:
    d = tmp / name
    d.mkdir()
    return d


if __name__ == "__main__":
    main()
