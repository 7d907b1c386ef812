"""Every planner filter on small synthetic catalogs."""

from __future__ import annotations

import pytest
from planner_synth import TODAY, catalog, offer

from provisioner.planner import PlanRequest, diagnose, plan


def only(req: PlanRequest, *offers):
    """Plan over ``offers``; return (chosen instance types of ranked, rejected)."""
    p = plan(req, catalog(offers), TODAY)
    return [o.instance_type for o in p.ranked], p.rejected


def test_gpu_names_filter():
    ranked, rej = only(PlanRequest(gpu_names=frozenset({"L4"})),
                       offer(instance_type="l4"), offer(instance_type="t4", gpu_name="T4"))
    assert ranked == ["l4"]
    assert rej == {"gcp": {"gpu_name": 1}}


def test_gpu_names_accepts_several_and_plain_string():
    offers = [offer(instance_type="l4"), offer(instance_type="t4", gpu_name="T4"),
              offer(instance_type="a10", gpu_name="A10", cloud="azure", zone=None)]
    # equal prices: the request's cloud order (gcp before azure by default) breaks the tie
    assert only(PlanRequest(gpu_names={"L4", "A10"}), *offers)[0] == ["l4", "a10"]
    assert only(PlanRequest(gpu_names={"L4", "A10"}, clouds=("azure", "gcp")),
                *offers)[0] == ["a10", "l4"]
    assert only(PlanRequest(gpu_names="T4"), *offers)[0] == ["t4"]


def test_min_gpu_memory():
    offers = [offer(instance_type="t4", gpu_name="T4", gpu_memory_gib=16.0),
              offer(instance_type="l4", gpu_memory_gib=24.0)]
    ranked, rej = only(PlanRequest(min_gpu_memory_gib=24), *offers)
    assert ranked == ["l4"] and rej == {"gcp": {"gpu_memory": 1}}
    assert only(PlanRequest(min_gpu_memory_gib=16), *offers)[0] == ["l4", "t4"]


def test_names_and_memory_combine():
    offers = [offer(instance_type="a", gpu_name="A100", gpu_memory_gib=40.0),
              offer(instance_type="b", gpu_name="A100-80GB", gpu_memory_gib=80.0)]
    ranked, rej = only(PlanRequest(gpu_names={"A100", "A100-80GB"}, min_gpu_memory_gib=80),
                       *offers)
    assert ranked == ["b"] and rej == {"gcp": {"gpu_memory": 1}}


def test_gpu_count_is_exact():
    offers = [offer(instance_type=f"x{n}", gpu_count=n, price_hourly=float(n)) for n in (1, 2, 4)]
    assert only(PlanRequest(gpu_count=2), *offers)[0] == ["x2"]
    assert only(PlanRequest(gpu_count=8), *offers)[1] == {"gcp": {"gpu_count": 3}}


@pytest.mark.parametrize("field,req_kw,value_ok,value_bad", [
    ("vcpus", {"min_vcpus": 8}, 8.0, 7.0),
    ("memory_gib", {"min_memory_gib": 30}, 30.0, 29.99),
    ("local_nvme_max_gib", {"local_nvme_gib": 375}, 375, 0),
])
def test_minimums_inclusive(field, req_kw, value_ok, value_bad):
    ok, bad = offer(instance_type="ok", **{field: value_ok}), offer(instance_type="bad",
                                                                    **{field: value_bad})
    ranked, rej = only(PlanRequest(**req_kw), ok, bad)
    reason = {"vcpus": "vcpus", "memory_gib": "memory", "local_nvme_max_gib": "local_nvme"}[field]
    assert ranked == ["ok"] and rej == {"gcp": {reason: 1}}


def test_local_nvme_zero_means_none_needed():
    assert only(PlanRequest(), offer(local_nvme_max_gib=0))[0] == ["g2-standard-8"]


def test_disk_type():
    g2 = offer(instance_type="g2", disk_types=("balanced", "ssd"))
    n1 = offer(instance_type="n1", disk_types=("standard", "balanced", "ssd"))
    ranked, rej = only(PlanRequest(boot_disk_type="standard"), g2, n1)
    assert ranked == ["n1"] and rej == {"gcp": {"disk_type": 1}}
    assert sorted(only(PlanRequest(boot_disk_type="ssd"), g2, n1)[0]) == ["g2", "n1"]


def test_clouds_filter_and_default_includes_aws():
    offers = [offer(instance_type="g"), offer(instance_type="z", cloud="azure", zone=None),
              offer(instance_type="w", cloud="aws", zone="use1-az1", region="us-east-1")]
    ranked, rej = only(PlanRequest(clouds=("azure",)), *offers)
    assert ranked == ["z"]
    assert rej == {"aws": {"cloud": 1}, "gcp": {"cloud": 1}}
    ranked, rej = only(PlanRequest(), *offers)
    assert sorted(ranked) == ["g", "w", "z"] and rej == {}
    ranked, rej = only(PlanRequest(clouds=("gcp", "azure")), *offers)
    assert sorted(ranked) == ["g", "z"] and rej == {"aws": {"cloud": 1}}


def test_not_provisionable_unless_included():
    aws = offer(instance_type="w", cloud="aws", zone="use1-az1", region="us-east-1")
    without_aws = frozenset({"gcp", "azure"})  # what-if: a cloud without a provider
    ranked, rej = only(PlanRequest(clouds=("aws",), provisionable_clouds=without_aws), aws)
    assert ranked == [] and rej == {"aws": {"not_provisionable": 1}}
    assert only(PlanRequest(clouds=("aws",)), aws) == (["w"], {})  # AWS has a provider
    p = plan(PlanRequest(clouds=("aws",), include_unprovisionable=True, provisionable_clouds=without_aws),
             catalog([aws]), TODAY)
    assert p.chosen == aws
    assert any("not provisionable" in w for w in p.warnings)


@pytest.mark.parametrize("globs,expected", [
    (("europe-*",), ["eu"]),
    (("us-central1",), ["us"]),
    (("us-central?",), ["us"]),
    (("us-central1-b",), []),           # zone glob: only zone b
    (("us-central1-a",), ["us"]),
    (("asia-*", "europe-west4"), ["eu"]),
    (("*",), ["eu", "us"]),
])
def test_region_globs(globs, expected):
    offers = [offer(instance_type="us", region="us-central1", zone="us-central1-a"),
              offer(instance_type="eu", region="europe-west4", zone="europe-west4-a")]
    ranked, _ = only(PlanRequest(region_globs=globs), *offers)
    assert sorted(ranked) == expected


def test_region_glob_matches_regional_offer():
    az = offer(instance_type="nc", cloud="azure", region="eastus", zone=None)
    assert only(PlanRequest(region_globs=("east*",)), az)[0] == ["nc"]
    assert only(PlanRequest(region_globs=("west*",)), az)[1] == {"azure": {"region": 1}}


def test_spot_uses_spot_price_and_rejects_missing_spot():
    a = offer(instance_type="a", price_hourly=1.0, spot_price_hourly=0.5)
    b = offer(instance_type="b", price_hourly=0.8, spot_price_hourly=0.6)
    c = offer(instance_type="c", price_hourly=0.1, spot_price_hourly=None)
    p = plan(PlanRequest(spot=True), catalog([a, b, c]), TODAY)
    assert [o.instance_type for o in p.ranked] == ["a", "b"]
    assert p.rejected == {"gcp": {"spot_unavailable": 1}}
    assert p.to_json()["chosen"]["price_hourly"] == 0.5 and p.to_json()["chosen"]["spot"] is True
    p = plan(PlanRequest(spot=False), catalog([a, b, c]), TODAY)
    assert [o.instance_type for o in p.ranked] == ["c", "b", "a"]


def test_max_price_applies_to_the_price_that_applies():
    a = offer(instance_type="a", price_hourly=3.0, spot_price_hourly=0.9)
    assert only(PlanRequest(max_price_per_hour=1.0), a)[1] == {"gcp": {"max_price": 1}}
    assert only(PlanRequest(max_price_per_hour=1.0, spot=True), a)[0] == ["a"]
    assert only(PlanRequest(max_price_per_hour=3.0), a)[0] == ["a"]  # inclusive


def test_spot_missing_and_over_max_counts_both():
    a = offer(instance_type="a", price_hourly=3.0, spot_price_hourly=None)
    req = PlanRequest(max_price_per_hour=1.0, spot=True)
    assert diagnose(a, req) == ("spot_unavailable", "max_price")
    assert only(req, a)[1] == {"gcp": {"spot_unavailable": 1}}


def test_stack_incompatible():
    k80 = offer(instance_type="k", gpu_name="K80", gpu_memory_gib=12.0, price_hourly=0.1)
    t4 = offer(instance_type="t", gpu_name="T4", gpu_memory_gib=16.0)
    req = PlanRequest(stack_excluded_gpus={"K80": "driver 550 dropped Kepler (last R470)"})
    ranked, rej = only(req, k80, t4)
    assert ranked == ["t"] and rej == {"gcp": {"stack_incompatible": 1}}


def test_os_image_must_exist_for_cloud_and_arch():
    gcp_arm = offer(instance_type="arm", arch="arm64")
    aws_arm = offer(instance_type="g5g", cloud="aws", arch="arm64", region="us-east-1",
                    zone="use1-az1")
    req = PlanRequest(clouds=("gcp", "aws"), include_unprovisionable=True)
    ranked, rej = only(req, gcp_arm, aws_arm)
    assert ranked == ["g5g"] and rej == {"gcp": {"os_image": 1}}
    assert only(PlanRequest(os="centos-7"), offer())[1] == {"gcp": {"os_image": 1}}


@pytest.mark.parametrize("flag,reason", [
    ("suspect_price", "flagged_price"), ("host_price_zero", "flagged_price"),
    ("retired_size", "retired"), ("fractional_gpu", "fractional_gpu"),
])
def test_excluding_flags(flag, reason):
    bad = offer(instance_type="bad", price_hourly=0.1, flags=(flag,))
    good = offer(instance_type="good", price_hourly=2.0, flags=("no_spot_price",))
    ranked, rej = only(PlanRequest(), bad, good)
    assert ranked == ["good"] and rej == {"gcp": {reason: 1}}


def test_first_reason_order_and_counts_sum():
    offers = [
        offer(instance_type="1", cloud="aws", gpu_name="T4"),
        offer(instance_type="2", gpu_name="T4", vcpus=1.0),
        offer(instance_type="3", vcpus=1.0, memory_gib=1.0),
        offer(instance_type="4", region="europe-west4", zone="europe-west4-a"),
        offer(instance_type="5"),
    ]
    p = plan(PlanRequest(gpu_names={"L4"}, min_vcpus=4, min_memory_gib=16, clouds=("gcp", "azure"),
                         region_globs=("us-*",)), catalog(offers), TODAY)
    assert p.rejected == {"aws": {"cloud": 1}, "gcp": {"gpu_name": 1, "vcpus": 1, "region": 1}}
    total = sum(n for d in p.rejected.values() for n in d.values())
    assert total + len(p.ranked) == len(offers)
    assert [o.instance_type for o in p.ranked] == ["5"]


def test_request_validation():
    with pytest.raises(ValueError):
        PlanRequest(gpu_count=0)
    with pytest.raises(ValueError):
        PlanRequest(boot_disk_type="pd-ssd")
    with pytest.raises(ValueError):
        PlanRequest(clouds=("oracle",))
    with pytest.raises(ValueError):
        PlanRequest(gpu_names=frozenset())
    with pytest.raises(ValueError):
        PlanRequest(max_price_per_hour=0)
    assert PlanRequest(clouds=("gcp", "gcp", "azure")).clouds == ("gcp", "azure")
