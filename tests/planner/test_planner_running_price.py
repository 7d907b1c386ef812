"""The planner ranks, caps (placement.max_price_per_hour) and bounds failover by the running price: the price
that applies plus the request's disks (catalog/costs.py), not the compute price alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest
from planner_synth import TODAY, catalog, offer

from provisioner.catalog.disks import DiskPrice, DiskPrices
from provisioner.planner import PlanRequest, plan

WHEN = date(2026, 11, 27)


def prices(*rows: tuple[str, str, str, float]) -> DiskPrices:
    return DiskPrices(DiskPrice("gcp", region, kind, None, "gib", per_gib, f"test {region} {kind}", WHEN)
                      for region, kind, per_gib in [(r[0], r[1], r[2]) for r in rows])


def with_disks(offers, table: DiskPrices):
    return replace(catalog(offers), disk_prices=table)


CHEAP_COMPUTE = offer(region="us-central1", price_hourly=1.00)
DEAR_COMPUTE = offer(region="europe-west4", price_hourly=1.05)
# 1,000 GiB pd-ssd: $0.34/GiB-month in us-central1 here (a made-up dear region) = $0.466/h, $0.17 elsewhere = $0.233/h
TABLE = prices(("us-central1", "ssd", 0.34), ("*", "ssd", 0.17))
REQ = PlanRequest(gpu_names=frozenset({CHEAP_COMPUTE.gpu_name}), boot_disk_type="ssd", boot_disk_gib=1000,
                  clouds=("gcp",), provisionable_clouds=frozenset({"gcp"}))


def test_disks_decide_between_offers_whose_compute_prices_are_close() -> None:
    p = plan(REQ, with_disks([CHEAP_COMPUTE, DEAR_COMPUTE], TABLE), TODAY)
    assert p.chosen == DEAR_COMPUTE  # $1.05 + $0.233 < $1.00 + $0.466
    assert p.running_price(DEAR_COMPUTE) == pytest.approx(1.05 + 1000 * 0.17 / 730, abs=1e-6)
    assert p.cost(p.chosen).stopped_hourly == pytest.approx(1000 * 0.17 / 730, abs=1e-6)


def test_without_disk_prices_the_compute_price_ranks() -> None:
    p = plan(REQ, catalog([CHEAP_COMPUTE, DEAR_COMPUTE]), TODAY)
    assert p.chosen == CHEAP_COMPUTE
    assert p.cost(p.chosen).running_hourly is None  # the disk price is unknown, not 0


def test_max_price_per_hour_caps_the_running_price() -> None:
    req = replace(REQ, max_price_per_hour=1.3)  # both computes fit; only DEAR_COMPUTE's running price ($1.283) does
    p = plan(req, with_disks([CHEAP_COMPUTE, DEAR_COMPUTE], TABLE), TODAY)
    assert p.chosen == DEAR_COMPUTE and p.failover == ()
    assert p.rejected["gcp"] == {"max_price": 1}
    req = replace(REQ, max_price_per_hour=1.2)
    p = plan(req, with_disks([CHEAP_COMPUTE, DEAR_COMPUTE], TABLE), TODAY)
    assert p.chosen is None and p.rejected["gcp"] == {"max_price": 2}


def test_failover_bound_is_on_the_running_price() -> None:
    p = plan(replace(REQ, max_failover_premium=0.2), with_disks([CHEAP_COMPUTE, DEAR_COMPUTE], TABLE), TODAY)
    assert p.failover_bound == pytest.approx(p.running_price(DEAR_COMPUTE) * 1.2, abs=1e-5)
    assert p.failover == (CHEAP_COMPUTE,) and p.failover_worst_case == p.running_price(CHEAP_COMPUTE)


def test_a_max_price_near_miss_names_the_running_price_to_allow() -> None:
    from provisioner.planner import closest_offers

    p = plan(replace(REQ, max_price_per_hour=1.2), with_disks([CHEAP_COMPUTE, DEAR_COMPUTE], TABLE), TODAY)
    [first, *_] = closest_offers(p)
    assert first.reasons == ("max_price",) and first.offer == DEAR_COMPUTE
    assert first.change == f"max_price_per_hour >= {p.running_price(DEAR_COMPUTE):.2f}" == "max_price_per_hour >= 1.28"
