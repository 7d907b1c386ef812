"""Time to ``ready`` on the real-OS lane (tests/realos/), cold install vs a VM booted from a baked image.

    sudo .venv/bin/python bench/bake_lane.py [--json]

Runs the lane's ``bake`` scenario (tests/realos/bakelane.py) with its cold baseline: the same profile (the lane's
gcp profile without local NVMe: driver 550.127.05 from the fake NVIDIA repository, CUDA 12.4, uv's Python, three
PyPI packages, 1 MiB of data) through the same bootstrap, on

* cold: a fresh overlay of the cached Debian 12 root, the script in its usual mode (installs everything) -> ready;
* bake: a fresh overlay, the script in ``bake`` mode -> baked (what the builder runs; not a time to ready);
* baked: a fresh root unpacked from the captured image, the script in ``baked`` mode -> ready (installs nothing,
  downloads only the profile's data: asserted by the scenario).

Each figure is the wall time of the bootstrap as user data, from its start to the script's last status line (the
payload fetch from the local GCS emulator included). What it does not include: a boot (no kernel, no systemd, no
cloud-init), the cloud's VM creation and image creation, a real NVIDIA driver (the fake repository's .debs are
empty: no DKMS build of the kernel module, the largest part of a real cold install), the CUDA toolkit download
(none in this profile) and a GPU. Needs what `make test-os` needs (root, the cached root filesystem, port 443).
Figures: bench/RESULTS.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests/realos"), str(HERE.parent / "tests/aptsim"), str(HERE.parent)]

import bakelane  # noqa: E402
import lane  # noqa: E402
import osroot  # noqa: E402
from runner import log, missing_prerequisites  # noqa: E402


def main(argv: list[str]) -> int:
    cache = Path(os.environ.get("TRAINVM_OS_CACHE", "/var/cache/trainvm-os"))
    missing = missing_prerequisites(uid=os.geteuid(), rootfs_cached=osroot.cached(cache))
    if missing:
        raise SystemExit("bench/bake_lane.py cannot run; missing:\n  - " + "\n  - ".join(missing))
    lane.unshared()
    work = Path(os.environ.get("TRAINVM_OS_WORK", "/var/tmp/trainvm-os-run")) / "bench-bake"
    _, base, _, pydist, repo, server = lane.prepare(work)
    (work / "bake").mkdir()
    t0 = time.monotonic()
    try:
        times = bakelane.scenario(base, work / "bake", repo, server, pydist, lane.DRIVER, lane.render, cold=True)
    finally:
        server.shutdown()
    load = os.getloadavg()
    doc = {"cold_s": round(times["cold"], 1), "bake_s": round(times["bake"], 1), "baked_s": round(times["baked"], 1),
           "total_s": round(time.monotonic() - t0, 1), "cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in load]}
    if "--json" in argv:
        print(json.dumps(doc))
    else:
        log(f"time to ready: cold {doc['cold_s']} s, baked {doc['baked_s']} s "
            f"({doc['cold_s'] / max(doc['baked_s'], 0.1):.1f}x); the bake itself {doc['bake_s']} s "
            f"(total {doc['total_s']} s, {doc['cpus']} CPUs, load {doc['loadavg']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
