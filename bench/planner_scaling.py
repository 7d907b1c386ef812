#!/usr/bin/env python3
"""Planner scaling and catalog load benchmark (no timed tests: run by hand or in CI logs).

    python bench/planner_scaling.py [--sizes 10000,100000,1000000] [--repeat 3]

Synthetic catalogs clone the embedded catalog's shapes over invented regions/zones with jittered
prices (deterministic seed). For each size it times ``plan()`` for a selective request, a
typical one and a broad one (about half the offers feasible, so sorting dominates), prints
seconds and µs per offer, and checks that cost grows linearly. It also times loading the
embedded catalog, in-process (cache cleared) and as a fresh interpreter.
Targets (issue): 1M offers plan in <= 2 s on a 2-core machine; whole `trainvm plan` <= 300 ms.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from provisioner.catalog import (  # noqa: E402
    Catalog,
    load_catalog,
    storage,  # noqa: E402
)
from provisioner.planner import PlanRequest, plan  # noqa: E402

TODAY = date(2026, 11, 22)
GEOS = ("us", "europe", "asia", "me", "southamerica", "australia", "africa", "northamerica")
DIRS = ("central", "east", "west", "north", "south", "northeast", "southeast")


def synthetic_catalog(n: int, seed: int = 7, single_gpu: bool = False) -> Catalog:
    """``n`` offers: real shapes (all three clouds) x invented regions/zones x jittered prices.
    ``single_gpu``: only 1-GPU shapes without excluding flags (every offer feasible for the broad
    request: the worst case for ranking)."""
    rng = random.Random(seed)
    shapes = load_catalog(storage.EMBEDDED_DIR).offers
    if single_gpu:
        shapes = tuple(s for s in shapes if s.gpu_count == 1 and s.excluded_by() is None
                       and s.arch == "x86_64")
    regions = [f"{g}-{d}{i}" for g in GEOS for d in DIRS for i in range(1, 5)]
    zones = {r: [f"{r}-{z}" for z in "abc"] for r in regions}
    price_cache: dict[float, float] = {}
    offers = []
    for _ in range(n):
        s = shapes[rng.randrange(len(shapes))]
        region = regions[rng.randrange(len(regions))]
        zone = None if s.zone is None else zones[region][rng.randrange(3)]
        p = round(s.price_hourly * rng.uniform(0.8, 1.25), 3)
        p = price_cache.setdefault(p, p)
        sp = None if s.spot_price_hourly is None else round(p * rng.uniform(0.2, 0.6), 3)
        # by keyword from the shape (replace): a field added to Offer cannot shift the others
        offers.append(replace(s, region=region, zone=zone, price_hourly=p, spot_price_hourly=sp))
    return Catalog(offers=tuple(offers), source="synthetic", date=date(2026, 9, 23),
                   schema_version=1, path=Path("/synthetic"))


REQUESTS = {
    "selective (H100x8 in us-*/europe-*)": PlanRequest(
        gpu_names=frozenset({"H100"}), gpu_count=8, region_globs=("us-*", "europe-*")),
    "typical (T4|L4 x1, >=8 vCPU, >=32 GiB, spot, <= $2/h)": PlanRequest(
        gpu_names=frozenset({"T4", "L4"}), gpu_count=1, min_vcpus=8, min_memory_gib=32,
        spot=True, max_price_per_hour=2.0),
    "broad (any GPU x1, all clouds incl. AWS)": PlanRequest(
        gpu_count=1, clouds=("gcp", "azure", "aws"), include_unprovisionable=True),
}


def time_plan(cat: Catalog, req: PlanRequest, repeat: int) -> tuple[float, int]:
    times = []
    feasible = 0
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        p = plan(req, cat, TODAY)
        times.append(time.perf_counter() - t)
        feasible = len(p.ranked)
        del p
    return min(times), feasible


def load_times() -> None:
    ins = []
    for _ in range(5):
        storage._CACHE.clear()
        t = time.perf_counter()
        cat = load_catalog(storage.EMBEDDED_DIR)
        ins.append(time.perf_counter() - t)
    code = ("import time;t=time.perf_counter();from provisioner.catalog import load_catalog;"
            "from provisioner.planner import PlanRequest, plan;import datetime;"
            "c=load_catalog();p=plan(PlanRequest(gpu_names={'T4'}, min_vcpus=4, "
            "min_memory_gib=16),c,datetime.date(2026,11,22));"
            "print(time.perf_counter()-t)")
    procs, wall = [], []
    for _ in range(5):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout
        wall.append(time.perf_counter() - t)
        procs.append(float(out))
    print(f"embedded catalog: {len(cat.offers)} offers; load (in-process, cold cache) "
          f"median {statistics.median(ins) * 1e3:.1f} ms, min {min(ins) * 1e3:.1f} ms")
    print(f"fresh interpreter: import catalog+planner + load + plan(T4) median "
          f"{statistics.median(procs) * 1e3:.1f} ms; whole process wall median "
          f"{statistics.median(wall) * 1e3:.1f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-load", action="store_true")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if not args.no_load:
        load_times()
    results: dict[str, list[tuple[int, float]]] = {k: [] for k in REQUESTS}
    for n in sizes:
        t = time.perf_counter()
        cat = synthetic_catalog(n)
        print(f"\n{n:>9,} offers (generated in {time.perf_counter() - t:.1f} s)")
        for name, req in REQUESTS.items():
            secs, feasible = time_plan(cat, req, args.repeat)
            results[name].append((n, secs))
            print(f"  {name:<58} {secs:7.3f} s  {secs / n * 1e6:5.2f} µs/offer  "
                  f"feasible {feasible:,}")
        del cat
        gc.collect()
    worst = max(sizes)
    cat = synthetic_catalog(worst, single_gpu=True)
    req = REQUESTS["broad (any GPU x1, all clouds incl. AWS)"]
    secs, feasible = time_plan(cat, req, args.repeat)
    print(f"\nworst case: {worst:,} offers, all feasible (ranking dominates): {secs:.3f} s "
          f"({secs / worst * 1e6:.2f} µs/offer, feasible {feasible:,})")
    del cat
    ok = True
    print("\nscaling (µs/offer at each size; linear = roughly constant):")
    for name, pts in results.items():
        per = [s / n * 1e6 for n, s in pts]
        print(f"  {name:<58} " + "  ".join(f"{p:5.2f}" for p in per))
        if len(per) > 1 and max(per) > 2.0 * min(per):
            ok = False
    big = [s for pts in results.values() for n, s in pts if n >= 1_000_000]
    if worst >= 1_000_000:
        big.append(secs)
    if big:
        print(f"\n1M offers worst request: {max(big):.3f} s (target <= 2 s): "
              f"{'OK' if max(big) <= 2.0 else 'OVER'}")
        ok = ok and max(big) <= 2.0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
