"""Issue 27, AWS half of the quota preflight: EC2's vCPU quotas from Service Quotas and their usage from EC2, through
the real CLI and boto3 against moto's server (behind the fault proxy).

moto models Service Quotas for ``vpc`` only: ``GetServiceQuota``/``GetAWSDefaultServiceQuota`` for ``ec2`` are
answered by the stand-in of tests/emulators/aws_quotas.py inside moto's server (applied values, the
NoSuchResourceException -> AWS default fallback, AccessDeniedException). Usage is what moto's EC2 really runs
(``DescribeInstances``, ``DescribeInstanceTypes``). Not modelled: open Spot requests without an instance (moto
fulfils them at once), CloudWatch usage metrics (not read by trainvm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.emulators.aws_quotas import ServiceQuotas
from tests.helpers import REPO

PROFILE = f"""\
name: preflight-aws
extends: {REPO / "profiles" / "base" / "torch-2.4-cu124.yaml"}
hardware: {{gpu: T4, gpu_count: 1, min_vcpus: 4}}
placement: {{clouds: [aws], regions: [us-east-1, us-west-2], spot: SPOT, max_price_per_hour: 5}}
stack: {{packages: ["torch==2.4.1+cu124"]}}
"""
G_SPOT, G_ON_DEMAND = "L-3819A6DF", "L-DB2E81BA"


@pytest.fixture
def quotas(aws, env, tmp_path):
    env.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the quota cache of this test only (moto's URL is shared)
    with ServiceQuotas().installed() as sq:
        yield sq


def _profile(tmp_path: Path, *, spot: bool = True, nodes: int = 1) -> str:
    path = tmp_path / "preflight-aws.yaml"
    text = PROFILE.replace("SPOT", str(spot).lower())
    if nodes > 1:
        text = text.replace("min_vcpus: 4}", f"min_vcpus: 4, nodes: {nodes}}}")
    path.write_text(text)
    return str(path)


def _plan(cli, path: str) -> tuple[list[str], dict[str, float]]:
    """The regions in failover order and each region's first offer's vCPUs."""
    doc = cli("plan", path, "--json").json()
    offers = [doc["chosen"], *doc["failover"]]
    regions = list(dict.fromkeys(o["region"] for o in offers))
    vcpus = {r: next(o["vcpus"] for o in offers if o["region"] == r) for r in regions}
    return regions, vcpus


def test_zero_spot_quota_region_is_skipped_without_a_create_call(cli, aws, quotas, tmp_path) -> None:
    path = _profile(tmp_path)
    (first, second), vcpus = _plan(cli, path)
    quotas.set_quota(first, G_SPOT, 0)  # a new account: no G Spot vCPUs in the first region
    quotas.set_quota(second, G_SPOT, 64)
    up = cli("up", path, "--yes", "--json")
    assert up.code == 0, up.err
    doc = up.json()
    assert doc["region"] == second
    assert aws.instances(first) == [] and len(aws.instances(second)) == 1  # no RunInstances in the first region
    assert aws.instances(second)[0].get("InstanceLifecycle") == "spot"
    skipped = doc["attempts"][0]
    assert (skipped["region"], skipped["outcome"], skipped["error_code"]) == (first, "no-quota", "QUOTA_PREFLIGHT")
    need = vcpus[first]
    assert (f"quota: {need:g} G and VT Spot vCPUs needed, 0 free in {first} ({G_SPOT}: limit 0, 0 in use)"
            in skipped["message"])
    assert (f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {G_SPOT} "
            f"--desired-value {need:g} --region {first}") in skipped["message"]
    assert ("GetServiceQuota", first, G_SPOT) in quotas.calls


def test_request_larger_than_the_headroom_is_refused_there_with_the_numbers(cli, aws, quotas, tmp_path) -> None:
    """Usage is counted from what really runs: a spot instance of the G class already running in the first region
    takes its vCPUs (DescribeInstanceTypes' DefaultVCpus) off the quota."""
    path = _profile(tmp_path)
    (first, second), vcpus = _plan(cli, path)
    ec2 = aws.client("ec2", first, direct=True)
    ec2.run_instances(ImageId=aws.amis[(first, "ubuntu-22.04")], InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1,
                      InstanceMarketOptions={"MarketType": "spot"})
    ec2.run_instances(ImageId=aws.amis[(first, "ubuntu-22.04")], InstanceType="g4dn.2xlarge", MinCount=1, MaxCount=1)
    need = vcpus[first]
    quotas.set_quota(first, G_SPOT, 4 + need - 1)  # the running g4dn.xlarge spot uses 4: one vCPU short
    quotas.set_quota(second, G_SPOT, 64)
    up = cli("up", path, "--yes")
    assert up.code == 0, up.err
    assert (f"skipped aws {first}: quota: {need:g} G and VT Spot vCPUs needed, {need - 1:g} free in {first} "
            f"({G_SPOT}: limit {4 + need - 1:g}, 4 in use)") in up.err  # the on-demand g4dn.2xlarge is not counted
    assert f"--desired-value {need + 4:g} --region {first}" in up.err
    assert len(aws.instances(first)) == 2 and len(aws.instances(second)) == 1


def test_no_applied_value_falls_back_to_the_aws_default(cli, aws, quotas, tmp_path) -> None:
    """GetServiceQuota answers NoSuchResourceException where the quota was never changed; the AWS default
    (GetAWSDefaultServiceQuota) applies then: 0 On-Demand G vCPUs in a new account."""
    path = _profile(tmp_path, spot=False)
    (first, second), vcpus = _plan(cli, path)
    quotas.set_quota(second, G_ON_DEMAND, 32)
    up = cli("up", path, "--yes", "--json")
    assert up.code == 0, up.err
    assert up.json()["region"] == second and aws.instances(first) == []
    assert (f"quota: {vcpus[first]:g} G and VT On-Demand vCPUs needed, 0 free in {first} ({G_ON_DEMAND}: limit 0, 0 in use)"
            in up.json()["attempts"][0]["message"])
    assert ("GetAWSDefaultServiceQuota", first, G_ON_DEMAND) in quotas.calls
    assert ("GetAWSDefaultServiceQuota", second, G_ON_DEMAND) not in quotas.calls  # applied there: no fallback


def test_access_denied_warns_and_proceeds_as_before(cli, aws, quotas, tmp_path) -> None:
    path = _profile(tmp_path)
    (first, _), _ = _plan(cli, path)
    quotas.set_quota(first, G_SPOT, 0)  # would be skipped, if it could be read
    quotas.deny("GetServiceQuota")
    up = cli("up", path, "--yes", "--json")
    assert up.code == 0, up.err
    assert up.json()["region"] == first and len(aws.instances(first)) == 1  # a failed read is never a "no quota"
    [warning] = [w for w in up.json()["warnings"] if w.startswith("quota:")]
    assert warning.startswith(f"quota: not checked in aws {first} (the quota read failed: ")
    assert "AuthError" not in warning  # the cloud's words, no Python type name (issue 36 item 24)
    assert "You do not have sufficient access" in warning and "`up` tries it as it would without the check" in warning
    text = cli("plan", path, "--quota")
    assert text.code == 0 and f"quota: not checked in aws {first} (the quota read failed: You do not have" in text.out


def test_plan_quota_names_the_zero_quota_region_and_caches_the_reading(cli, aws, quotas, tmp_path) -> None:
    path = _profile(tmp_path)
    (first, second), vcpus = _plan(cli, path)
    quotas.set_quota(first, G_SPOT, 0)
    quotas.set_quota(second, G_SPOT, 64)
    offline = cli("plan", path)
    assert offline.code == 0 and "quota:" not in offline.out and quotas.calls == []  # plan stays offline
    r = cli("plan", path, "--quota")
    assert r.code == 0, r.err
    assert f"quota: {vcpus[first]:g} G and VT Spot vCPUs needed, 0 free in {first}" in r.out and "`up` skips it" in r.out
    assert f"quota: ok in aws {second}: {vcpus[second]:g} G and VT Spot vCPUs needed, {64:g} free" in r.out
    reads, describes = quotas.count(), len(aws.faults.calls("DescribeInstances"))
    assert reads == 2 and describes == 2  # one quota and one usage read per region

    again = cli("plan", path, "--quota", "--json")  # within the cache lifetime: no quota API is read
    assert quotas.count() == reads and len(aws.faults.calls("DescribeInstances")) == describes
    checks = {q["region"]: q for q in again.json()["quota"]}
    assert checks[first]["status"] == "short" and checks[second]["status"] == "ok"
    assert all(q["age_seconds"] >= 0 for q in checks.values())

    folder = tmp_path / "cache" / "trainvm" / "quota"  # the readings grow older than CACHE_SECONDS (300 s)
    for f in folder.glob("aws-*.json"):
        doc = json.loads(f.read_text())
        doc["read_at"] -= 301
        f.write_text(json.dumps(doc))
    quotas.set_quota(first, G_SPOT, 64)  # someone got an increase meanwhile
    fresh = cli("plan", path, "--quota")
    assert quotas.count() == reads + 2 and f"quota: ok in aws {first}" in fresh.out


def test_every_catalog_aws_family_has_its_quota_class() -> None:
    from provisioner.catalog.storage import load_catalog
    from provisioner.providers.aws.quota import quota_class

    types = {o.instance_type for o in load_catalog().offers if o.cloud == "aws"}
    assert types and {t for t in types if quota_class(t) is None} == set()
    assert quota_class("g4dn.xlarge").on_demand == G_ON_DEMAND and quota_class("vt1.3xlarge").spot == G_SPOT
    assert quota_class("p4d.24xlarge").on_demand == "L-417A185B" and quota_class("p5.48xlarge").spot == "L-7212CCBC"
    assert quota_class("m5.large").on_demand == "L-1216C47A" and quota_class("c7gn.large").spot == "L-34B43A08"
    assert quota_class("inf2.xlarge") is None and quota_class("dl1.24xlarge") is None
    assert quota_class("trn1.2xlarge") is None
