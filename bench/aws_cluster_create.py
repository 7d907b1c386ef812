"""Wall time of the AWS group engine (providers/aws/group.py: security group, placement group, one RunInstances
with MinCount = MaxCount = N, rank tags, the running waiter, the node list, then delete) through boto3 against
moto's server and the fault proxy (tests/emulators/aws.py), for N nodes; N = 1 is the single-VM path for
comparison. moto's instances run at once, so this measures trainvm's own calls and waits: it should stay
nearly flat in N (one RunInstances, one node-list CreateTags; rank tags on up to aws_group.PARALLEL threads).

    .venv/bin/python bench/aws_cluster_create.py [N ...]      (default: 1 4 16 64)
    .venv/bin/python bench/aws_cluster_create.py --bodies FILE   # the 4-node A100 (p4d.24xlarge) request bodies

Prints one line per N: create seconds, of which the one RunInstances call (moto creating N instances and their
volumes, and serialising them: moto's cost, which EC2 does not share), delete seconds, HTTP requests (median of
3 runs)."""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(counts: list[int]) -> None:
    from tests.aws.conftest import t4_offers, t4_spec
    from tests.emulators.aws import shared_moto

    aws = shared_moto()
    os.environ.update(aws.env())
    os.environ.update(TRAINVM_RETRY_BASE_DELAY="0", TRAINVM_TODAY="2026-11-22")
    os.environ.pop("TRAINVM_SSH_PUBLIC_KEY", None)
    from provisioner.providers.aws.provider import AwsProvider

    offer = t4_offers()[0]
    base = t4_spec(offer)
    spent: list[float] = []
    from provisioner.providers.aws.group import AwsGroup
    from provisioner.providers.aws.instances import Instance

    run = AwsGroup._run

    def timed_run(self: AwsGroup, region: str, params: dict[str, Any]) -> list[Instance]:
        t = time.perf_counter()
        try:
            return run(self, region, params)
        finally:
            spent.append(time.perf_counter() - t)

    AwsGroup._run = timed_run  # type: ignore[method-assign]
    for n in counts:
        runs = []
        for _ in range(3):
            aws.reset()
            spent.clear()
            provider = AwsProvider(poll_interval=0.2)
            spec = replace(base, nodes=n, compact=n > 1)
            t0 = time.perf_counter()
            provider.create(spec, offer)
            t1 = time.perf_counter()
            provider.delete(spec.name)
            runs.append((t1 - t0, sum(spent), time.perf_counter() - t1, len(aws.faults.requests)))
            assert aws.instances() == [] and aws.placement_groups() == [] and aws.security_groups() == []
        c, ri, d, r = (statistics.median(x) for x in zip(*runs))
        print(f"N={n:3d}  create {c:6.2f} s (RunInstances {ri:5.2f} s)  delete {d:6.2f} s  requests {r:5.0f}")


def bodies(out: Path) -> None:
    """Create the 4-node A100 example (bert-pretrain-8xa100 with ``nodes: 4`` on AWS, us-east-1) and write the
    requests the proxy recorded (form parameters as sent; values over 200 characters shortened)."""
    import datetime
    import json
    import tempfile

    from tests.emulators.aws import shared_moto

    aws = shared_moto()
    aws.reset()
    os.environ.update(aws.env())
    os.environ.update(TRAINVM_RETRY_BASE_DELAY="0", TRAINVM_TODAY="2026-11-22")
    os.environ.pop("TRAINVM_SSH_PUBLIC_KEY", None)
    from provisioner.catalog.storage import load_catalog
    from provisioner.planner.core import plan
    from provisioner.planner.from_profile import Overrides, build_request
    from provisioner.profile import load_profile
    from provisioner.providers.aws.provider import AwsProvider
    from provisioner.provision.launch import launch_spec
    from provisioner.render.script import render_for_offer

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a100x4.yaml"
        path.write_text(f"extends: {REPO / 'profiles/examples/bert-pretrain-8xa100.yaml'}\nhardware: {{nodes: 4}}\n"
                        "placement: {clouds: [aws], regions: [us-east-1]}\ndata: []\n")
        loaded = load_profile(path)
        request, _ = build_request(loaded, Overrides(("aws",), ("us-east-1",), False))
        chosen = plan(request, load_catalog(), datetime.date(2026, 11, 22)).chosen
        assert chosen is not None and chosen.instance_type == "p4d.24xlarge", chosen
        spec = launch_spec(loaded, chosen, rendered=render_for_offer(loaded, chosen))
        assert (spec.nodes, spec.compact) == (4, True)
        AwsProvider(poll_interval=0.2).create(spec, chosen)
    keep = ("CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "CreatePlacementGroup", "RunInstances", "CreateTags")
    doc = [{"action": r.action, "status": r.status,
            "params": {k: v if len(v) <= 200 else f"{v[:60]}... ({len(v)} characters)" for k, v in r.params.items()}}
           for r in aws.faults.requests if r.action in keep]
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{out}: {len(doc)} requests")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bodies"]:
        bodies(Path(sys.argv[2]))
    else:
        main([int(a) for a in sys.argv[1:]] or [1, 4, 16, 64])
