"""Wall time of `trainvm up` for an N-node cluster (the CLI path: a `trainvm up --yes --json` process, planning,
rendering, the GCE provider through google-cloud-compute) against the loopback GCE emulator with its group APIs
(tests/emulators/gce_group.py), for N nodes; then `trainvm down`. The emulator answers at once (one poll per
operation), so this measures trainvm's own work, calls and waits: it should stay nearly flat in N (one bulkInsert;
per-node calls on up to gcp_group.PARALLEL threads; bounded polling).

    .venv/bin/python bench/cluster_up.py [N ...]             (default: 1 4 16 64)
    .venv/bin/python bench/cluster_up.py --bodies FILE 4     (also write the N=4 request bodies to FILE)

Prints one line per N: `up` seconds and `down` seconds (median of 3 runs), and the HTTP requests `up` made."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TRAINVM = str(REPO / ".venv" / "bin" / "trainvm")
PROFILE = ("name: ddp\nextends: base/torch-2.4-cu124\nhardware: {{gpu: A100, gpu_count: 1, nodes: {n}}}\n"
           "placement: {{clouds: [gcp], regions: [us-central1], compact: true}}\nlifecycle: {{max_run_hours: 10}}\n")
BODIES = ("compute.resourcePolicies.insert", "compute.firewalls.insert", "compute.instances.bulkInsert")


def _run(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run([TRAINVM, *args], env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"trainvm {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return took, p.stdout


def main(argv: list[str]) -> None:
    from tests.emulators.gce_group import GceGroupEmulator

    bodies_to = None
    if argv[:1] == ["--bodies"]:
        bodies_to, argv = Path(argv[1]), argv[2:]
    counts = [int(a) for a in argv] or [1, 4, 16, 64]
    with tempfile.TemporaryDirectory() as tmp, GceGroupEmulator(seed=1, polls_to_done=1) as emu:
        key = Path(tmp) / "id.pub"
        key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGbench bench\n")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "AWS_", "TRAINVM_"))},
               "TRAINVM_GCE_ENDPOINT": emu.url, "GOOGLE_CLOUD_PROJECT": "bench-proj", "TRAINVM_TODAY": "2026-11-22",
               "TRAINVM_RETRY_BASE_DELAY": "0", "TRAINVM_SSH_PUBLIC_KEY": str(key)}
        for n in counts:
            path = Path(tmp) / f"ddp{n}.yaml"
            path.write_text(PROFILE.format(n=n))
            runs = []
            for _ in range(3):
                emu.reset()
                up, out = _run(["up", str(path), "--yes", "--json"], env)
                requests = len(emu.requests)
                doc = json.loads(out)
                assert n == 1 or (doc["cluster"]["nodes"] == n and len(doc["cluster"]["members"]) == n)
                if bodies_to is not None and n == 4 and not runs:
                    bodies = {m: [r.body for r in emu.requests if r.method_id == m] for m in BODIES}
                    bodies_to.write_text(json.dumps(bodies, indent=2) + "\n")
                down, _ = _run(["down", doc["name"], "--yes"], env)
                assert not emu.instances and not emu.policies
                runs.append((up, down, requests))
            u, d, r = (statistics.median(x) for x in zip(*runs, strict=True))
            print(f"N={n:3d}  up {u:6.2f} s  down {d:6.2f} s  up requests {r:5.0f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
