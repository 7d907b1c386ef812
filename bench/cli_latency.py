"""Whole-process latency of the offline commands (what a user feels), median over N runs.

    .venv/bin/python bench/cli_latency.py [N]

Prints one line per command: median / min / max milliseconds. Targets: `--help`, `validate` and
`plan` each under 300 ms on a 2-core machine; no cloud SDK may be imported on these paths
(checked by tests/cli/test_validate_cli.py)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAINVM = str(Path(sys.executable).with_name("trainvm"))
T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")

COMMANDS = {
    "trainvm --help": [TRAINVM, "--help"],
    "trainvm validate <t4>": [TRAINVM, "validate", T4],
    "trainvm plan <t4>": [TRAINVM, "plan", T4],
    "trainvm plan <t4> --json": [TRAINVM, "plan", T4, "--json"],
    "trainvm validate (5 examples)": [TRAINVM, "validate", *sorted(str(p) for p in (REPO / "profiles" / "examples").glob("*.yaml"))],
}


def measure(argv: list[str], runs: int) -> list[float]:
    env = {**os.environ, "TRAINVM_TODAY": "2026-11-22"}
    subprocess.run(argv, capture_output=True, env=env, check=True)  # warm the page cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    print(f"whole-process latency, {runs} runs each, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    for label, argv in COMMANDS.items():
        t = measure(argv, runs)
        print(f"{label:32s} median {statistics.median(t):6.0f} ms   min {min(t):6.0f}   max {max(t):6.0f}")


if __name__ == "__main__":
    main()
