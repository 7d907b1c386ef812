"""Property tests: the chosen offer satisfies every constraint and nothing feasible is cheaper."""

from __future__ import annotations

import random
from dataclasses import replace
from fnmatch import fnmatchcase

from hypothesis import given, settings
from hypothesis import strategies as st
from planner_synth import TODAY, catalog, offer

from provisioner.catalog.models import EXCLUDING_FLAGS
from provisioner.planner import REASONS, PlanRequest, diagnose, plan, rank_key
from provisioner.providers.registry import cluster_clouds, os_arches

GPUS = ["T4", "L4", "A100", "H100", "K80"]
MEM = {"T4": 16.0, "L4": 24.0, "A100": 40.0, "H100": 80.0, "K80": 12.0}
REGIONS = ["us-central1", "us-east1", "europe-west4", "asia-east1"]
DISKS = [("standard", "balanced", "ssd"), ("balanced", "ssd"), ("standard", "balanced")]
FLAGS = [(), (), (), ("no_spot_price",), ("suspect_price",), ("retired_size",),
         ("fractional_gpu",), ("host_price_zero", "suspect_price")]
PRICES = [0.25, 0.5, 1.0, 1.0, 2.0, 3.5, 8.0]

offers_st = st.lists(st.builds(
    lambda cloud, gpu, count, vc, mem, region, zi, price, spot, disk, nvme, arch, flags, it: offer(
        cloud=cloud, gpu_name=gpu, gpu_memory_gib=MEM[gpu], gpu_count=count, vcpus=vc,
        memory_gib=mem, region=region, zone=None if cloud == "azure" else f"{region}-{zi}",
        price_hourly=price, spot_price_hourly=spot, disk_types=disk, local_nvme_max_gib=nvme,
        arch=arch, flags=flags, instance_type=it),
    st.sampled_from(["gcp", "azure", "aws"]), st.sampled_from(GPUS), st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([2.0, 4.0, 8.0, 16.0, 96.0]), st.sampled_from([8.0, 16.0, 30.0, 64.0, 640.0]),
    st.sampled_from(REGIONS), st.sampled_from("abc"), st.sampled_from(PRICES),
    st.sampled_from([None, 0.1, 0.3, 0.5, 1.0]), st.sampled_from(DISKS),
    st.sampled_from([0, 375, 3000]), st.sampled_from(["x86_64", "x86_64", "arm64"]),
    st.sampled_from(FLAGS), st.sampled_from(["s1", "s2", "s3"]),
), max_size=40).map(lambda os_: list({o.key(): o for o in os_}.values()))

requests_st = st.builds(
    PlanRequest,
    gpu_names=st.one_of(st.none(), st.sets(st.sampled_from(GPUS), min_size=1).map(frozenset)),
    min_gpu_memory_gib=st.one_of(st.none(), st.sampled_from([16.0, 24.0, 40.0])),
    gpu_count=st.sampled_from([1, 2, 8]),
    min_vcpus=st.sampled_from([0, 4, 8]),
    min_memory_gib=st.sampled_from([0, 16, 32]),
    local_nvme_gib=st.sampled_from([0, 375]),
    boot_disk_type=st.sampled_from(["standard", "balanced", "ssd"]),
    clouds=st.lists(st.sampled_from(["gcp", "azure", "aws"]), min_size=1, unique=True).map(tuple),
    region_globs=st.one_of(st.none(), st.sampled_from([("us-*",), ("europe-*", "asia-*"),
                                                       ("us-central1-a",)])),
    spot=st.booleans(),
    max_price_per_hour=st.one_of(st.none(), st.sampled_from([0.5, 1.0, 3.0])),
    os=st.sampled_from(["ubuntu-22.04", "debian-12", "windows-11"]),
    stack_excluded_gpus=st.sampled_from([{}, {"K80": "Kepler needs R470"}]),
    include_unprovisionable=st.booleans(),
)



@st.composite
def scenarios(draw):
    """Offers plus a request, often derived from one offer so that feasible plans are common."""
    offers = draw(offers_st)
    if not offers or draw(st.integers(0, 3)) == 0:
        return offers, draw(requests_st)
    t = draw(st.sampled_from(offers))
    # near-copies of the target: same shape, other places, prices and flags
    for _ in range(draw(st.integers(0, 8))):
        region = draw(st.sampled_from(REGIONS))
        zone = None if t.zone is None else f"{region}-{draw(st.sampled_from('abc'))}"
        offers.append(replace(
            t, region=region, zone=zone, price_hourly=draw(st.sampled_from(PRICES)),
            spot_price_hourly=draw(st.sampled_from([None, 0.1, 0.3, 0.5, 1.0])),
            flags=draw(st.sampled_from(FLAGS)),
            instance_type=draw(st.sampled_from(["s1", "s2", "s4"]))))
    offers = list({o.key(): o for o in offers}.values())
    spot = draw(st.booleans()) and t.spot_price_hourly is not None
    price = t.spot_price_hourly if spot else t.price_hourly
    req = PlanRequest(
        gpu_names=draw(st.sampled_from([None, frozenset({t.gpu_name}),
                                        frozenset({t.gpu_name, "H100"})])),
        min_gpu_memory_gib=draw(st.sampled_from([None, t.gpu_memory_gib, 12.0])),
        gpu_count=t.gpu_count,
        min_vcpus=draw(st.sampled_from([0, t.vcpus, t.vcpus / 2])),
        min_memory_gib=draw(st.sampled_from([0, t.memory_gib])),
        local_nvme_gib=draw(st.sampled_from([0, t.local_nvme_max_gib])),
        boot_disk_type=draw(st.sampled_from(t.disk_types)),
        clouds=draw(st.sampled_from([(t.cloud,), ("gcp", "azure", "aws")])),
        region_globs=draw(st.sampled_from([None, (t.region,), (t.region[:3] + "*",), ("*",)])),
        spot=spot,
        max_price_per_hour=draw(st.sampled_from([None, price, price * 2])),
        os="ubuntu-22.04",
        stack_excluded_gpus=draw(st.sampled_from([{}, {"K80": "Kepler needs R470"}])),
        include_unprovisionable=t.cloud == "aws" or draw(st.booleans()),
        nodes=draw(st.sampled_from([1, 1, 2, 16])),
        cluster_clouds=draw(st.sampled_from([None, frozenset(), frozenset({"gcp"}), frozenset({"gcp", "azure", "aws"})])),
    )
    return offers, req

def satisfies(o, r: PlanRequest) -> bool:
    """Independent restatement of every constraint (not the planner's code)."""
    price = o.spot_price_hourly if r.spot else o.price_hourly
    return (o.cloud in r.clouds
            and (o.provisionable or r.include_unprovisionable)
            and (r.nodes == 1 or r.include_unprovisionable
                 or o.cloud in (cluster_clouds() if r.cluster_clouds is None else r.cluster_clouds))
            and (r.gpu_names is None or o.gpu_name in r.gpu_names)
            and (r.min_gpu_memory_gib is None or o.gpu_memory_gib >= r.min_gpu_memory_gib)
            and o.gpu_name not in r.stack_excluded_gpus
            and o.gpu_count == r.gpu_count
            and o.vcpus >= r.min_vcpus and o.memory_gib >= r.min_memory_gib
            and o.local_nvme_max_gib >= r.local_nvme_gib
            and r.boot_disk_type in o.disk_types
            and o.arch in os_arches()[o.cloud].get(r.os, ())
            and (r.region_globs is None
                 or any(fnmatchcase(o.region, g) or (o.zone and fnmatchcase(o.zone, g))
                        for g in r.region_globs))
            and not any(f in EXCLUDING_FLAGS for f in o.flags)
            and price is not None
            and (r.max_price_per_hour is None or price <= r.max_price_per_hour))


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_chosen_is_feasible_and_cheapest(scenario):
    offers, req = scenario
    p = plan(req, catalog(offers), TODAY)
    feasible = [o for o in offers if satisfies(o, req)]
    assert sorted(map(id, p.ranked)) == sorted(map(id, feasible))
    if not feasible:
        assert p.chosen is None and p.failover == ()
        return
    price = (lambda o: o.spot_price_hourly) if req.spot else (lambda o: o.price_hourly)
    assert satisfies(p.chosen, req)
    assert price(p.chosen) == min(price(o) for o in feasible)
    assert [price(o) for o in p.ranked] == sorted(price(o) for o in p.ranked)
    assert list(p.ranked) == sorted(feasible, key=rank_key(req))  # documented tie-break
    bound = req.max_price_per_hour if req.max_price_per_hour is not None else price(p.chosen) * 1.25
    eligible = [o for o in p.ranked[1:] if (o.gpu_name, o.gpu_count) == (p.chosen.gpu_name, p.chosen.gpu_count)
                and price(o) <= bound + 1e-9]
    assert set(map(id, p.failover)) == set(map(id, eligible)) and len(p.failover) == len(eligible)
    assert p.to_json()["chosen"]["price_hourly"] == price(p.chosen)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_rejections_and_near_misses_agree_with_diagnose(scenario):
    offers, req = scenario
    p = plan(req, catalog(offers), TODAY)
    counted = {}
    for o in offers:
        reasons = diagnose(o, req)
        assert (not reasons) == satisfies(o, req)
        if reasons:
            counted.setdefault(o.cloud, {}).setdefault(reasons[0], 0)
            counted[o.cloud][reasons[0]] += 1
    assert p.rejected == {c: {r: d[r] for r in REASONS if r in d}
                          for c, d in sorted(counted.items())}
    for nm in p.near_misses:
        assert diagnose(nm.offer, req) == (nm.reason,)


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_plan_does_not_depend_on_catalog_order(scenario, rnd):
    offers, req = scenario
    a = plan(req, catalog(offers), TODAY)
    shuffled = list(offers)
    random.Random(rnd.random()).shuffle(shuffled)
    b = plan(req, catalog(shuffled), TODAY)
    assert a.ranked == b.ranked and a.failover == b.failover
    assert a.rejected == b.rejected and a.near_misses == b.near_misses
