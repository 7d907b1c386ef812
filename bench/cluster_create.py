"""Wall time of the GCE group engine (providers/gcp/group.py: compact policy, one bulkInsert, node list into
every node's metadata, then delete) against the loopback emulator with its group APIs, for N nodes.
The emulator answers at once, so this measures trainvm's own calls and waits: it should stay nearly flat in N
(one bulkInsert; per-node calls on up to gcp_group.PARALLEL threads).

    .venv/bin/python bench/cluster_create.py [N ...]      (default: 1 4 16 64)

Prints one line per N: create seconds, delete seconds, HTTP requests (median of 3 runs)."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ZONE, PROJECT = "us-central1-a", "bench-proj"
BODY = {"machineType": f"zones/{ZONE}/machineTypes/a2-highgpu-1g",
        "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
            "sourceImage": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts",
            "diskType": f"zones/{ZONE}/diskTypes/pd-balanced", "diskSizeGb": "200"}}],
        "networkInterfaces": [{"network": f"projects/{PROJECT}/global/networks/default"}],
        "scheduling": {"onHostMaintenance": "TERMINATE"},
        "metadata": {"items": [{"key": "startup-script", "value": "#!/bin/bash\n"}]}}


def main(counts: list[int]) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    from provisioner.providers.gcp.group import GceGroup, GroupClients
    from tests.emulators.gce_group import GceGroupEmulator

    with GceGroupEmulator(seed=1, polls_to_done=1) as emu:
        kw = {"credentials": AnonymousCredentials(), "client_options": {"api_endpoint": emu.url}}
        group = GceGroup(GroupClients(compute_v1.InstancesClient(**kw), compute_v1.ZoneOperationsClient(**kw),
                                      compute_v1.ResourcePoliciesClient(**kw), compute_v1.RegionOperationsClient(**kw)),
                         PROJECT, poll=0.05)
        for n in counts:
            runs = []
            for _ in range(3):
                emu.reset()
                t0 = time.perf_counter()
                group.create("bench", ZONE, BODY, n, compact=True)
                t1 = time.perf_counter()
                group.delete("bench", ZONE, n, compact=True)
                runs.append((t1 - t0, time.perf_counter() - t1, len(emu.requests)))
                assert not emu.instances and not emu.policies
            c, d, r = (statistics.median(x) for x in zip(*runs))
            print(f"N={n:3d}  create {c:6.2f} s  delete {d:6.2f} s  requests {r:5.0f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 4, 16, 64])
