"""Issue 18, part 1: hardware.nodes and placement.compact in the planner and in `plan`; the placement
facts (data/placement.yaml) against the catalog and against botocore's instance-type data."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from provisioner.catalog.storage import load_catalog
from provisioner.planner import REASONS, PlanRequest, diagnose, plan
from provisioner.providers import placement as pl
from provisioner.providers.registry import compactable_families, placement
from tests.planner.planner_synth import TODAY, catalog, offer

N1 = offer(instance_type="n1-standard-8", family="n1", gpu_name="T4", gpu_memory_gib=16.0, price_hourly=0.7)
G2 = offer(instance_type="g2-standard-8", family="g2-standard", price_hourly=0.9)
UNKNOWN = offer(instance_type="x9-gpu-1", family="x9-gpu", price_hourly=0.5)


def _req(**kw) -> PlanRequest:
    return PlanRequest(clouds=("gcp",), **kw)


def test_compact_required_drops_families_that_cannot_be_placed_compactly() -> None:
    cat = catalog([N1, G2, UNKNOWN])
    loose = plan(_req(nodes=4), cat, TODAY)
    assert loose.chosen == UNKNOWN and set(loose.ranked) == {N1, G2, UNKNOWN}
    strict = plan(_req(nodes=4, compact_families=compactable_families(("gcp",))), cat, TODAY)
    assert strict.ranked == (G2,)
    assert strict.rejected == {"gcp": {"placement": 2}}
    assert {nm.offer for nm in strict.near_misses if nm.reason == "placement"} == {N1, UNKNOWN}
    assert diagnose(N1, strict.request) == ("placement",)
    assert diagnose(G2, strict.request) == ()


def test_placement_reason_sits_between_os_image_and_region() -> None:
    assert REASONS.index("os_image") + 1 == REASONS.index("placement") == REASONS.index("region") - 1
    # an offer failing both region and placement counts under placement (the earlier reason)
    far = offer(instance_type="n1-standard-8", family="n1", gpu_name="L4", region="europe-west4")
    p = plan(_req(nodes=2, compact_families=frozenset(), region_globs=("us-*",)), catalog([far]), TODAY)
    assert p.rejected == {"gcp": {"placement": 1}}
    assert diagnose(far, p.request) == ("placement", "region")


def test_nodes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="nodes"):
        _req(nodes=0)


def test_every_catalog_family_has_placement_facts() -> None:
    cat = load_catalog()
    missing = sorted({(o.cloud, o.family) for o in cat.offers} - {(c, f) for c in ("gcp", "azure", "aws") for f in pl.families(c)})
    assert missing == []


def test_facts_are_typed_and_sourced() -> None:
    fabs = pl.fabrics()
    assert {"tcp", "gpudirect-tcpx", "gpudirect-tcpxo", "gpudirect-rdma", "infiniband", "efa"} <= set(fabs)
    for f in fabs.values():
        assert f.source.startswith("https://")
        assert f.usable == (f.guest_needs is None or f.trainvm_installs)
    assert placement("gcp", "n1", "n1-standard-8").compact is False
    a3 = placement("gcp", "a3-highgpu", "a3-highgpu-8g")
    assert (a3.compact, a3.fabric.name, a3.interfaces) == (True, "gpudirect-tcpx", 4)
    nd = placement("azure", "ND_H100_v5", "Standard_ND96isr_H100_v5")
    assert (nd.fabric.name, nd.interfaces) == ("infiniband", 8)
    assert placement("aws", "g5", "g5.xlarge").fabric.name == "tcp"
    assert placement("aws", "g5", "g5.48xlarge").fabric.name == "efa"
    ghost = placement("gcp", "zz-new", "zz-new-1")
    assert not ghost.known and not ghost.compact and ghost.fabric.name == "tcp"


def _botocore_types() -> dict:
    moto = pytest.importorskip("moto")
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    if not path.exists():
        pytest.skip("moto has no bundled instance-type data")
    return json.loads(gzip.decompress(path.read_bytes()))


def test_aws_efa_and_cluster_support_match_the_instance_type_data() -> None:
    data = _botocore_types()
    for o in {o.instance_type: o for o in load_catalog().offers if o.cloud == "aws"}.values():
        t = data.get(o.instance_type)
        if t is None:  # retired types (p3) are no longer described
            continue
        facts = placement("aws", o.family, o.instance_type)
        assert facts.compact == ("cluster" in t["PlacementGroupInfo"]["SupportedStrategies"]), o.instance_type
        efa = (t["NetworkInfo"].get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0) if t["NetworkInfo"].get("EfaSupported") else 0
        assert (facts.fabric.name == "efa", facts.interfaces if efa else 0) == (bool(efa), efa), o.instance_type


AZ = offer(cloud="azure", instance_type="Standard_NC4as_T4_v3", family="NCasT4_v3", region="eastus", zone=None,
           gpu_name="T4", gpu_memory_gib=16.0, price_hourly=0.4)


def test_a_cloud_without_a_group_engine_is_a_near_miss_for_a_cluster_only() -> None:
    cat = catalog([N1, AZ])
    both = ("gcp", "azure")
    one = plan(PlanRequest(clouds=both, cluster_clouds=frozenset({"gcp"})), cat, TODAY)
    assert one.chosen == AZ  # one VM: the cheaper Azure offer, whatever the group engines
    many = plan(PlanRequest(clouds=both, nodes=2, cluster_clouds=frozenset({"gcp"})), cat, TODAY)
    assert many.chosen == N1 and many.rejected == {"azure": {"cluster": 1}}
    assert [(nm.offer, nm.reason) for nm in many.near_misses] == [(AZ, "cluster")]
    assert diagnose(AZ, many.request) == ("cluster",) and diagnose(N1, many.request) == ()
    # a cloud outside placement.clouds that has no engine either: adding it would not help, so no suggestion
    outside = plan(PlanRequest(clouds=("gcp",), nodes=2, cluster_clouds=frozenset({"gcp"})), cat, TODAY)
    assert outside.rejected == {"azure": {"cloud": 1}} and outside.near_misses == ()
    assert diagnose(AZ, outside.request) == ("cloud", "cluster")
    # `render --cloud azure` (include_unprovisionable) still renders a node's script there
    shown = plan(PlanRequest(clouds=both, nodes=2, cluster_clouds=frozenset(), include_unprovisionable=True), cat, TODAY)
    assert shown.chosen == AZ


def test_the_cluster_reason_follows_not_provisionable_and_is_not_the_users_to_relax() -> None:
    from provisioner.planner.explain import NOT_USER_RELAXABLE, reason_text

    assert REASONS.index("not_provisionable") + 1 == REASONS.index("cluster")
    assert "cluster" in NOT_USER_RELAXABLE
    req = PlanRequest(clouds=("azure",), nodes=3, cluster_clouds=frozenset())
    assert "cannot create 3-node clusters on azure" in reason_text("cluster", AZ, req)
    p = plan(req, catalog([AZ]), TODAY)
    assert p.chosen is None and p.rejected == {"azure": {"cluster": 1}}


def test_the_registry_says_which_clouds_have_a_group_engine() -> None:
    from provisioner.providers.registry import CLOUDS, cluster_clouds

    assert set(cluster_clouds()) == {n for n, c in CLOUDS.items() if c.provisionable and c.group_engine}
    assert "gcp" in cluster_clouds()
