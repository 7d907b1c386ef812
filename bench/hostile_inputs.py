"""Figures for issue 19 / 12 "bounded input": wall time and exit code of `trainvm validate` on each hostile
file, and loading time against the number of env entries (should grow linearly). Prints; asserts nothing.

    .venv/bin/python bench/hostile_inputs.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "profile"))

from test_hostile_files import CASES, GOOD, make  # noqa: E402


def run(path: Path) -> tuple[float, int]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "validate", str(path)], capture_output=True, timeout=600,
                       cwd=REPO)
    return time.perf_counter() - t, r.returncode


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base, rc = run(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
        print(f"{'valid example':16s} {base:6.2f} s  exit {rc}")
        for kind in CASES:
            d = Path(tmp) / kind
            d.mkdir()
            secs, rc = run(make(d, kind))
            print(f"{kind:16s} {secs:6.2f} s  exit {rc}")
        for n in (1000, 2500, 5000, 10000):
            p = Path(tmp) / f"env{n}.yaml"
            p.write_text(GOOD.replace("stack:\n", "stack:\n  env:\n" + "".join(f"    VAR_{i}: value-{i}\n" for i in range(n)), 1))
            secs, rc = run(p)
            print(f"env entries {n:6d} {secs:6.2f} s  exit {rc}")


if __name__ == "__main__":
    main()
