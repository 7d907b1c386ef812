"""Wall time of `trainvm lock` against PyPI: cold (empty uv cache), cached (uv cache warm, lock
removed) and up to date (lock present, nothing resolved). Needs network access to pypi.org.

    .venv/bin/python bench/lock_timing.py [PROFILE]

Without PROFILE it locks a copy of profiles/examples/bert-finetune-t4.yaml whose torch pin is the
PyPI build (torch==2.4.1, CUDA 12.1): the CUDA variant's index (download.pytorch.org) is not always
reachable. Prints one line per case: seconds, packages, MiB of wheels."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAINVM = str(Path(sys.executable).with_name("trainvm"))


def _default_profile(folder: Path) -> Path:
    shutil.copytree(REPO / "profiles" / "base", folder / "base")
    text = (REPO / "profiles" / "examples" / "bert-finetune-t4.yaml").read_text()
    text = text.replace("torch==2.4.1+cu124", "torch==2.4.1").replace("stack:\n  packages:", 'stack:\n  cuda: "12.1"\n  packages:')
    path = folder / "bert-pypi.yaml"
    path.write_text(text)
    return path


def _run(profile: Path, cache: Path) -> tuple[float, dict]:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    start = time.perf_counter()
    done = subprocess.run([TRAINVM, "lock", str(profile), "--json"], capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"trainvm lock failed: {done.stderr.strip()}")
    return elapsed, json.loads(done.stdout)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        profile = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else _default_profile(folder)
        lock = profile.with_suffix(".lock")
        saved = lock.read_bytes() if lock.exists() else None
        cache = folder / "cache"
        try:
            lock.unlink(missing_ok=True)
            cold, doc = _run(profile, cache)
            lock.unlink()
            warm, _ = _run(profile, cache)
            fresh, _ = _run(profile, cache)
        finally:
            if saved is not None:
                lock.write_bytes(saved)
            elif len(sys.argv) > 1:
                lock.unlink(missing_ok=True)
        mib = doc.get("bytes", 0) / 2**20
        print(f"profile: {profile.name}: {doc['packages']} packages, {mib:,.1f} MiB of wheels")
        print(f"lock, cold uv cache:   {cold:6.2f} s")
        print(f"lock, warm uv cache:   {warm:6.2f} s")
        print(f"lock, already fresh:   {fresh:6.2f} s")


if __name__ == "__main__":
    main()
