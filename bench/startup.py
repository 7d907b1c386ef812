"""CLI start-up time: whole-process medians next to the bare interpreter, and where the time goes.

    .venv/bin/python bench/startup.py [RUNS] [--importtime]

Prints, for each command, the median / min of RUNS whole-process runs (default 41), and its ratio to
``python -c pass`` run the same way (the machine's floor: interpreter start + site). Run it on an idle
machine if you can; on a shared one, compare medians of many runs and keep the baseline beside them
(bench/startup-figures.md records measured figures). ``--importtime`` adds the slowest imports of
``trainvm plan`` (self time, from ``python -X importtime``). Targets (issue 12): ``plan`` <= 150 ms,
``--help`` <= 100 ms on the 2-core machine."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
TRAINVM = str(Path(PY).with_name("trainvm"))
T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")

COMMANDS = {
    "python -c pass": [PY, "-c", "pass"],
    "python -c 'import provisioner.cli'": [PY, "-c", "import provisioner.cli"],
    "trainvm --version": [TRAINVM, "--version"],
    "trainvm --help": [TRAINVM, "--help"],
    "trainvm validate <t4>": [TRAINVM, "validate", T4],
    "trainvm plan <t4>": [TRAINVM, "plan", T4],
    "trainvm plan <t4> --json": [TRAINVM, "plan", T4, "--json"],
}


def measure(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    subprocess.run(argv, capture_output=True, env=env, check=True)  # warm the page cache and .pyc files
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def importtime(env: dict[str, str], top: int = 20) -> list[tuple[int, int, str]]:
    done = subprocess.run([PY, "-X", "importtime", TRAINVM, "plan", T4], capture_output=True, text=True, env=env)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = (p.strip() for p in line[len("import time:"):].split("|"))
        rows.append((int(self_us), int(cum_us), name.strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(args[0]) if args else 41
    env = {**os.environ, "TRAINVM_TODAY": "2026-11-22"}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"whole-process start-up, {runs} runs each, {os.cpu_count()} CPUs, load {load:.1f}, Python {sys.version.split()[0]}")
    base = None
    for label, argv in COMMANDS.items():
        t = measure(argv, runs, env)
        med = statistics.median(t)
        base = base or med
        print(f"{label:36s} median {med:6.0f} ms   min {min(t):6.0f}   x{med / base:4.1f} of python -c pass")
    if "--importtime" in sys.argv:
        print("\nslowest imports of `trainvm plan <t4>` (self ms, cumulative ms):")
        for self_us, cum_us, name in importtime(env):
            print(f"  {self_us / 1000:6.1f} {cum_us / 1000:7.1f}  {name}")


if __name__ == "__main__":
    main()
