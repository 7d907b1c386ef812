"""Ranking, deterministic ties, failover order, warnings, near misses and explanations."""

from __future__ import annotations

import random
from datetime import date, timedelta

import pytest
from planner_synth import CATALOG_DATE, TODAY, catalog, offer

from provisioner.planner import (
    NEAR_MISSES_PER_REASON,
    PlanRequest,
    closest_offers,
    diagnose,
    no_offer_message,
    plan,
)


def test_ranks_by_price_cheapest_first():
    offers = [offer(instance_type=t, price_hourly=p) for t, p in (("a", 3.0), ("b", 1.0),
                                                                   ("c", 2.0))]
    p = plan(PlanRequest(), catalog(offers), TODAY)
    assert p.chosen.instance_type == "b"
    assert [o.instance_type for o in p.ranked] == ["b", "c", "a"]


def test_ties_break_on_cloud_order_region_zone_type():
    offers = [
        offer(instance_type="t2", region="us-east1", zone="us-east1-b"),
        offer(instance_type="t1", region="us-east1", zone="us-east1-b"),
        offer(instance_type="t1", region="us-east1", zone="us-east1-a"),
        offer(instance_type="t1", region="asia-east1", zone="asia-east1-a"),
        offer(instance_type="z", cloud="azure", region="eastus", zone=None),
    ]
    p = plan(PlanRequest(), catalog(offers), TODAY)
    got = [(o.cloud, o.zone, o.instance_type) for o in p.ranked]
    assert got == [("gcp", "asia-east1-a", "t1"), ("gcp", "us-east1-a", "t1"),
                   ("gcp", "us-east1-b", "t1"), ("gcp", "us-east1-b", "t2"),
                   ("azure", None, "z")]
    p2 = plan(PlanRequest(clouds=("azure", "gcp")), catalog(offers), TODAY)
    assert p2.chosen.cloud == "azure"


def test_result_independent_of_catalog_order():
    rng = random.Random(3)
    offers = [offer(instance_type=f"t{i % 5}", region=f"r{i % 7}", zone=f"r{i % 7}-{i % 3}",
                    price_hourly=float(rng.choice([1, 2, 3])),
                    spot_price_hourly=rng.choice([None, 0.5, 0.7])) for i in range(60)]
    offers = list({o.key(): o for o in offers}.values())
    req = PlanRequest(spot=True)
    base = plan(req, catalog(offers), TODAY)
    for _ in range(5):
        rng.shuffle(offers)
        p = plan(req, catalog(offers), TODAY)
        assert p.ranked == base.ranked and p.failover == base.failover
        assert p.near_misses == base.near_misses and p.rejected == base.rejected


def test_failover_same_type_zones_then_regions_then_equivalent_shapes_then_clouds():
    chosen = offer(instance_type="a", region="us-central1", zone="us-central1-a", price_hourly=1.0)
    same_zone_other_type = offer(instance_type="b", region="us-central1", zone="us-central1-a",
                                 price_hourly=1.15)
    other_zone = offer(instance_type="a", region="us-central1", zone="us-central1-b",
                       price_hourly=1.2)
    cheap_other_region = offer(instance_type="a", region="us-east1", zone="us-east1-b",
                               price_hourly=1.1)
    other_region = offer(instance_type="a", region="europe-west4", zone="europe-west4-a",
                         price_hourly=1.2)
    other_type_other_region = offer(instance_type="c", region="us-east1", zone="us-east1-b",
                                    price_hourly=1.01)
    other_cloud = offer(instance_type="nc", cloud="azure", region="eastus", zone=None,
                        price_hourly=1.05)
    offers = [other_cloud, other_region, cheap_other_region, other_zone, same_zone_other_type,
              other_type_other_region, chosen]
    p = plan(PlanRequest(), catalog(offers), TODAY)
    assert p.chosen == chosen and p.failover_bound == 1.25
    assert p.failover == (other_zone, cheap_other_region, other_region, same_zone_other_type,
                          other_type_other_region, other_cloud)
    assert p.failover_worst_case == 1.2


def test_failover_never_changes_gpu_and_never_exceeds_the_bound():
    chosen = offer(instance_type="t4", price_hourly=0.53)
    dearer_same = offer(instance_type="t4", zone="us-central1-b", price_hourly=0.67)
    within = offer(instance_type="t4", region="us-east1", zone="us-east1-b", price_hourly=0.66)
    other_gpu = offer(instance_type="a10", gpu_name="A10", gpu_memory_gib=24, price_hourly=0.6)
    two_gpus = offer(instance_type="t4x2", gpu_count=2, price_hourly=0.6)
    offers = [chosen, dearer_same, within, other_gpu, two_gpus]
    p = plan(PlanRequest(gpu_count=1), catalog(offers), TODAY)
    assert p.failover_bound == pytest.approx(0.6625) and p.failover == (within,)
    assert other_gpu in p.ranked  # still a feasible alternative to plan, never a failover target
    p = plan(PlanRequest(max_failover_premium=0.5), catalog(offers), TODAY)
    assert p.failover == (dearer_same, within)
    capped = plan(PlanRequest(max_price_per_hour=0.7, max_failover_premium=0), catalog(offers), TODAY)
    assert capped.failover_bound == 0.7 and capped.failover == (dearer_same, within)
    assert capped.bound_json() == {"price_hourly": 0.7, "basis": "placement.max_price_per_hour", "premium": None,
                                   "worst_case_price_hourly": 0.67}
    none = plan(PlanRequest(max_failover_premium=0), catalog([chosen, within]), TODAY)
    assert none.failover == () and none.failover_worst_case == 0.53


def test_no_offer_means_empty_plan():
    p = plan(PlanRequest(gpu_names={"H100"}), catalog([offer()]), TODAY)
    assert p.chosen is None and p.ranked == () and p.failover == () and not p.feasible
    assert p.to_json()["chosen"] is None


def test_catalog_age_warning_after_90_days():
    cat = catalog([offer()])
    p = plan(PlanRequest(), cat, CATALOG_DATE + timedelta(days=90))
    assert p.catalog_age_days == 90 and not p.warnings
    p = plan(PlanRequest(), cat, CATALOG_DATE + timedelta(days=91))
    assert p.catalog_age_days == 91
    assert any("91 days old" in w for w in p.warnings)
    assert p.to_json()["catalog"] == {"source": "synthetic test catalog",
                                      "date": "2026-09-23", "age_days": 91, "origin": "embedded"}


def test_refreshed_catalog_warns_after_30_days():
    from dataclasses import replace

    cat = replace(catalog([offer()]), origin="refreshed", stale_after_days=30)
    assert not plan(PlanRequest(), cat, CATALOG_DATE + timedelta(days=30)).warnings
    p = plan(PlanRequest(), cat, CATALOG_DATE + timedelta(days=31))
    assert any("refreshed offer catalog is 31 days old" in w and "catalog refresh" in w for w in p.warnings)
    assert p.to_json()["catalog"]["origin"] == "refreshed"


def test_warns_about_cheaper_flagged_offers():
    bogus = offer(instance_type="cheap", price_hourly=0.5, flags=("suspect_price",))
    real = offer(instance_type="real", price_hourly=1.0)
    p = plan(PlanRequest(), catalog([bogus, real]), TODAY)
    assert p.chosen == real and p.cheaper_flagged == (bogus,)
    assert any("unreliable" in w for w in p.warnings)


def test_near_misses_fail_exactly_one_reason_and_are_bounded():
    offers = [offer(instance_type=f"eu{i}", region="europe-west4", zone="europe-west4-a",
                    price_hourly=1.0 + i) for i in range(6)]
    offers += [offer(instance_type="t4", gpu_name="T4", region="europe-west4",
                     zone="europe-west4-a")]
    offers += [offer(instance_type="both", gpu_name="T4", price_hourly=0.1, region="asia-east1",
                     zone="asia-east1-a")]
    req = PlanRequest(gpu_names={"L4"}, region_globs=("us-*",))
    p = plan(req, catalog(offers), TODAY)
    assert p.chosen is None
    reasons = [nm.reason for nm in p.near_misses]
    assert reasons.count("region") == NEAR_MISSES_PER_REASON
    assert [nm.offer.instance_type for nm in p.near_misses if nm.reason == "region"] == \
        ["eu0", "eu1", "eu2"]
    assert "both" not in [nm.offer.instance_type for nm in p.near_misses]
    for nm in p.near_misses:
        assert diagnose(nm.offer, req) == (nm.reason,)


def test_closest_offers_relax_region_and_message():
    offers = [offer(instance_type="a3-highgpu-1g", gpu_name="H100", gpu_memory_gib=80.0,
                    region="us-central1", zone="us-central1-a", price_hourly=11.06),
              offer(instance_type="a3-highgpu-1g", gpu_name="H100", gpu_memory_gib=80.0,
                    region="europe-west4", zone="europe-west4-a", price_hourly=14.0,
                    flags=("suspect_price",)),
              offer(instance_type="g2", region="europe-west4", zone="europe-west4-b",
                    price_hourly=0.9)]
    req = PlanRequest(gpu_names={"H100"}, region_globs=("europe-*",))
    p = plan(req, catalog(offers), TODAY)
    assert p.chosen is None
    rel = closest_offers(p)
    assert rel[0].reasons == ("region",) and rel[0].offer.region == "us-central1"
    assert rel[0].change == "allow region us-central1" and rel[0].user_relaxable
    # the catalog-flagged offer is listed after the ones the user can get by editing the profile
    assert [r.reasons for r in rel] == [("region",), ("gpu_name",), ("flagged_price",)]
    msg = no_offer_message(p)
    assert msg.startswith("no feasible offer for H100 x1 in europe-*")
    assert "us-central1" in msg and "$11.06/h" in msg


def test_closest_offers_falls_back_to_fewest_reasons_with_catalog():
    offers = [offer(instance_type="x", gpu_name="T4", region="asia-east1", zone="asia-east1-a",
                    price_hourly=0.3),
              offer(instance_type="y", gpu_name="T4", gpu_count=2, region="asia-east1",
                    zone="asia-east1-a", price_hourly=0.1)]
    req = PlanRequest(gpu_names={"L4"}, region_globs=("us-*",))
    p = plan(req, catalog(offers), TODAY)
    assert p.near_misses == ()
    assert closest_offers(p) == ()
    rel = closest_offers(p, catalog(offers))
    assert len(rel) == 1 and rel[0].reasons == ("gpu_name", "region")
    assert rel[0].offer.instance_type == "x"
    assert "accept T4; allow region asia-east1" == rel[0].change
    assert "no offer comes close" in no_offer_message(p)
    assert "gpu_name/region" in no_offer_message(p, catalog(offers))


def test_gpu_name_near_miss_prefers_comparable_memory():
    offers = [offer(instance_type="cheap-l4", gpu_name="L4", gpu_memory_gib=24.0,
                    price_hourly=1.0),
              offer(instance_type="h100", gpu_name="H100", gpu_memory_gib=80.0, price_hourly=10),
              offer(instance_type="h200", gpu_name="H200", gpu_memory_gib=141.0, price_hourly=12)]
    p = plan(PlanRequest(gpu_names={"B200"}), catalog(offers), TODAY)
    picked = [nm.offer.instance_type for nm in p.near_misses if nm.reason == "gpu_name"]
    assert set(picked) == {"h200", "h100", "cheap-l4"}
    offers += [offer(instance_type=f"l4-{i}", gpu_name="L4", price_hourly=0.5) for i in range(5)]
    p = plan(PlanRequest(gpu_names={"B200"}), catalog(offers), TODAY)
    picked = {nm.offer.instance_type for nm in p.near_misses if nm.reason == "gpu_name"}
    assert {"h200", "h100"} <= picked


def test_plan_json_shape():
    a = offer(instance_type="a", price_hourly=1.0)
    b = offer(instance_type="b", price_hourly=1.1, region="us-east1", zone="us-east1-b")
    z = offer(instance_type="z", cloud="azure", region="eastus", zone=None, price_hourly=1.2)
    p = plan(PlanRequest(), catalog([a, b, z]), TODAY)
    js = p.to_json(alternatives=1)
    assert set(js) >= {"chosen", "alternatives", "failover", "rejected", "catalog", "warnings"}
    assert set(js["chosen"]) == {"cloud", "region", "zone", "instance_type", "gpu_name",
                                 "gpu_count", "gpu_memory_gib", "vcpus", "memory_gib",
                                 "price_hourly", "spot"}
    assert [x["instance_type"] for x in js["alternatives"]] == ["b"]
    assert js["failover"][-1]["zone"] is None
    assert js["catalog"]["date"] == "2026-09-23"
    assert js["failover_bound"] == {"price_hourly": 1.25, "basis": "placement.max_failover_premium",
                                    "premium": 0.25, "worst_case_price_hourly": 1.2}


def test_plan_is_pure_given_today():
    cat = catalog([offer()])
    assert plan(PlanRequest(), cat, date(2027, 1, 1)) == plan(PlanRequest(), cat, date(2027, 1, 1))
