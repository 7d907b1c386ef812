"""The planner: pure, deterministic, no SDK imports.

``plan(request, catalog, today)`` tests the constraints in reason order until an offer fails two (so
that it can count rejections by first reason and find offers that miss by exactly one constraint), ranks the feasible offers
by their running price (the price that applies plus the request's disks: catalog/costs.py, as far as
the catalog's disk prices know them) and derives the failover order. ``max_price_per_hour`` and the
failover bound compare that running price too.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from itertools import compress, groupby
from operator import attrgetter, not_
from typing import Callable, Iterable, NamedTuple, TypedDict

from provisioner.catalog.costs import Cost, cost_of, disks_running_hourly
from provisioner.catalog.disks import DiskPrices
from provisioner.catalog.families import GPU_MEMORY_GIB
from provisioner.catalog.models import EMBEDDED_STALE_AFTER_DAYS, Catalog, Offer
from provisioner.planner import checks as _checks
from provisioner.planner.checker import Checker as _Checker
from provisioner.planner.checker import diagnose as diagnose
from provisioner.planner.rehearsal import Rehearsal, last, rehearsal_of
from provisioner.planner.request import PlanRequest
from provisioner.providers.offer import Shape
from provisioner.providers.registry import rehearsal_clouds

#: A catalog older than its ``stale_after_days`` gets a warning in every plan: 30 days for a refreshed or
#: TRAINVM_CATALOG catalog, 90 for the embedded snapshot (catalog/models.py says why).
STALE_AFTER_DAYS = EMBEDDED_STALE_AFTER_DAYS
#: Near misses kept per reason (the cheapest ones).
NEAR_MISSES_PER_REASON = 3


class NearMiss(NamedTuple):
    """An offer rejected by exactly one reason (relaxing that constraint would admit it)."""

    offer: Offer
    reason: str


class BoundDoc(TypedDict):
    """``Plan.bound_json``'s document (``plan --json`` failover_bound), which ``plan``'s text reads back."""

    price_hourly: float | None
    basis: str
    premium: float | None  # None: the bound is placement.max_price_per_hour
    worst_case_price_hourly: float | None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One offer ``up`` may try (the chosen one, then the failover order) with the plan's figures for it, computed
    once by ``plan()``: what the summary, the quota preflight, failover and the launch request read as fields."""

    offer: Offer
    shape: Shape  # its machine (what the stages below the plan take)
    price: float  # the price that applies (``Plan.price``: the spot price when spot and known)
    running: float  # the running price it was ranked by (``Plan.running_price``)
    cost: Cost  # with the request's disks, running and stopped (``Plan.cost``)


@dataclass(frozen=True, slots=True)
class Plan:
    request: PlanRequest
    chosen: Offer | None
    ranked: tuple[Offer, ...]  # every feasible offer, cheapest running price first (chosen = ranked[0])
    failover: tuple[Offer, ...]  # after chosen, same GPU model/count within failover_bound (failover_order)
    rejected: dict[str, dict[str, int]]  # cloud -> reason -> count (first failing reason)
    near_misses: tuple[NearMiss, ...]  # cheapest first
    catalog_source: str
    catalog_date: date
    catalog_age_days: int
    warnings: tuple[str, ...]
    offers_considered: int = 0
    cheaper_flagged: tuple[Offer, ...] = field(default=())
    failover_bound: float | None = None  # no failover offer costs more per hour (None: nothing chosen)
    catalog_origin: str = "embedded"  # Catalog.origin: embedded, refreshed, TRAINVM_CATALOG
    #: the catalog's disk prices (catalog/disks.py): ``cost`` adds the request's disks to an offer's price
    disk_prices: DiskPrices | None = None
    #: offer -> running price, memoized (``running_prices``): the one ``plan()`` ranked with
    running: Callable[[Offer], float] | None = field(default=None, repr=False, compare=False)
    #: id(offer) -> (offer, ``cost(offer)``): an offer's cost is computed once per plan (``up`` asks for its first
    #: offer's in the summary and again for the attempt's labels); not an init field, so ``replace`` starts afresh
    _costs: dict[int, tuple[Offer, Cost]] = field(default_factory=dict, init=False, repr=False, compare=False)
    #: the chosen offer and the failover order with their figures (``plan()`` fills it: () in a Plan made by hand),
    #: computed under ``figured_for``: a copy with another request (``dataclasses.replace``) computes its own costs
    candidates: tuple[Candidate, ...] = ()
    figured_for: PlanRequest | None = field(default=None, repr=False, compare=False)
    #: the dearest running price failover may end up paying (``failover_worst_case``; filled by ``plan()``)
    worst_case: float | None = None

    @property
    def failover_worst_case(self) -> float | None:
        """The dearest running price that failover may end up paying (the chosen one when there is no failover)."""
        if self.chosen is None:
            return None
        if self.worst_case is not None and self.figured_for is self.request:
            return self.worst_case
        return max(self.running_price(o) for o in (self.chosen, *self.failover))

    def running_price(self, offer: Offer) -> float:
        """What ranking, ``max_price_per_hour`` and the failover bound compare: the price that applies plus the
        request's disks per node, as far as their prices are known (``cost`` says which are not)."""
        of = self.running or running_prices(self.request, self.disk_prices)  # plan() passes its memoized one
        return of(offer)

    def bound_json(self) -> BoundDoc | None:
        if self.chosen is None:
            return None
        by_cap = self.request.max_price_per_hour is not None
        return {"price_hourly": self.failover_bound,
                "basis": "placement.max_price_per_hour" if by_cap else "placement.max_failover_premium",
                "premium": None if by_cap else self.request.max_failover_premium,
                "worst_case_price_hourly": self.failover_worst_case}

    def rehearsal(self, offer: Offer) -> Rehearsal | None:
        """Why ``offer`` is offered as a rehearsal, never a pass (planner/rehearsal.py); None: an offer that can pass."""
        if offer.cloud not in rehearsal_clouds():
            return None
        return rehearsal_of(offer, self.request, _checks.rehearsed_failures(offer, self.request, _Checker(self.request)))

    @property
    def feasible(self) -> bool:
        return self.chosen is not None

    def price(self, offer: Offer) -> float:
        """The price that applies to ``offer`` under this plan's request (``Offer.price_that_applies``)."""
        return offer.price_that_applies(self.request.spot)

    def cost(self, offer: Offer) -> Cost:
        """What ``offer`` costs per hour with the request's disks, running and stopped (catalog/costs.py)."""
        for c in self.candidates if self.figured_for is self.request else ():
            if c.offer is offer:
                return c.cost
        hit = self._costs.get(id(offer))
        if hit is not None and hit[0] is offer:
            return hit[1]
        req = self.request
        cost = cost_of(offer, disk_prices=self.disk_prices or DiskPrices(), boot_disk_type=req.boot_disk_type,
                       boot_disk_gib=req.boot_disk_gib, local_nvme_gib=req.local_nvme_gib, nodes=req.nodes,
                       spot=req.spot, compute_hourly=self.price(offer), compute_source=self.catalog_source)
        self._costs[id(offer)] = (offer, cost)
        return cost

    def to_json(self, *, alternatives: int = 10, failover: int | None = None) -> dict[str, object]:
        """The planner's part of the SPEC ``plan`` JSON document."""
        spot = self.request.spot
        fo = self.failover if failover is None else self.failover[:failover]
        doc: dict[str, object] = {
            "chosen": self.chosen.to_json(spot) if self.chosen else None,
            "alternatives": [o.to_json(spot) for o in self.ranked[1:1 + alternatives]],
            "failover": [o.to_json(spot) for o in fo],
            "failover_bound": self.bound_json(),
            "rejected": self.rejected,
            "near_misses": [{**nm.offer.to_json(spot), "reason": nm.reason,
                             "price_hourly": self.price(nm.offer)} for nm in self.near_misses],
            "catalog": {"source": self.catalog_source, "date": self.catalog_date.isoformat(),
                        "age_days": self.catalog_age_days, "origin": self.catalog_origin},
            "warnings": list(self.warnings),
        }
        if self.chosen is not None and (r := self.rehearsal(self.chosen)) is not None:  # never a pass: say so
            doc["rehearsal"] = r.to_json()
        return doc


def running_prices(req: PlanRequest, disk_prices: DiskPrices | None,
                   offers: Iterable[Offer] = ()) -> Callable[[Offer], float]:
    """offer -> the price that applies + the known hourly price of the request's disks (per node), memoized by
    what the disks depend on (cloud, region, family; the shape too when local scratch is asked for). ``offers``
    (``plan``: the feasible ones, which ranking prices all): their disks are priced at once, in one call to
    catalog/costs.py (``disks_running_hourly``), rather than the planner going back to it offer by offer."""
    table = disk_prices if disk_prices is not None else DiskPrices()
    compute = _price_key(req.spot)
    machines: dict[tuple[str, str, str, str], Offer] = {}  # one offer per disk_key: the disks are the machine's
    for o in offers:
        machines.setdefault((o.cloud, o.region, o.family, o.instance_type if req.local_nvme_gib else ""), o)
    memo = disks_running_hourly([shape_of(o) for o in machines.values()], disk_prices=table,
                                boot_disk_type=req.boot_disk_type, boot_disk_gib=req.boot_disk_gib,
                                local_nvme_gib=req.local_nvme_gib)

    def price(o: Offer) -> float:
        k = (o.cloud, o.region, o.family, o.instance_type if req.local_nvme_gib else "")  # costs.disk_key, inline
        d = memo.get(k)
        if d is None:
            c = cost_of(o, disk_prices=table, boot_disk_type=req.boot_disk_type, boot_disk_gib=req.boot_disk_gib,
                        local_nvme_gib=req.local_nvme_gib, compute_hourly=0.0)
            d = memo[k] = float(c.running_hourly_known)
        return round(compute(o) + d, 6)

    return price


def shape_of(o: Offer) -> Shape:
    """The machine of ``o`` (``providers.offer.Shape``): what its disks, quota and render depend on."""
    return Shape(o.cloud, o.region, o.zone, o.zone or o.region, o.instance_type, o.family, o.gpu_name, o.gpu_count,
                 o.vcpus, o.local_nvme_max_gib, o.arch)


def _price_key(spot: bool) -> Callable[[Offer], float]:
    if spot:
        return lambda o: o.price_hourly if o.spot_price_hourly is None else o.spot_price_hourly
    return lambda o: o.price_hourly


#: ``rank_key``'s key: price, the request's cloud order, region, zone, type, GPU name and count
RankKey = tuple[float, int, str, str, str, str, int]


def rank_key(request: PlanRequest) -> Callable[[Offer], RankKey]:
    """Sort key: price that applies, then the request's cloud order, region, zone, type, GPU."""
    cloud_rank = {c: i for i, c in enumerate(request.clouds)}
    n = len(cloud_rank)
    if request.spot:
        return lambda o: (o.spot_price_hourly if o.spot_price_hourly is not None
                          else o.price_hourly, cloud_rank.get(o.cloud, n), o.region, o.zone or "",
                          o.instance_type, o.gpu_name, o.gpu_count)
    return lambda o: (o.price_hourly, cloud_rank.get(o.cloud, n), o.region, o.zone or "",
                      o.instance_type, o.gpu_name, o.gpu_count)


def _rank(feasible: list[Offer], req: PlanRequest, price: Callable[[Offer], float] | None = None) -> tuple[Offer, ...]:
    """Same order as ``sorted(feasible, key=rank_key(req))`` with ``price`` (default: the price that applies; the
    planner passes the running price, disks included) in place of the price, faster: a C-level sort on the
    price alone, then the full tie-break key only inside runs of equal prices."""
    if price is None:
        price = attrgetter("spot_price_hourly" if req.spot else "price_hourly")
    feasible.sort(key=price)
    cloud_rank = {c: i for i, c in enumerate(req.clouds)}
    n = len(cloud_rank)

    def tie(o: Offer) -> tuple[int, str, str, str, str, int]:
        return (cloud_rank.get(o.cloud, n), o.region, o.zone or "", o.instance_type, o.gpu_name,
                o.gpu_count)

    out: list[Offer] = []
    extend = out.extend
    for _, group in groupby(feasible, key=price):
        run = list(group)
        if len(run) > 1:
            run.sort(key=tie)
        extend(run)
    return tuple(out)


def _sieve(offers: tuple[Offer, ...], checks: tuple[tuple[str, Callable[[Offer], bool]], ...]
           ) -> tuple[list[Offer], dict[str, dict[str, int]], dict[str, list[Offer]]]:
    """One pass per check over the offers still in question, in reason order: the feasible offers, the count of
    each cloud's offers by their first failing reason, and the offers that fail exactly one reason (by reason).

    An offer leaves the pass at its second failure (nothing reads the reasons after that), so most checks see a
    fraction of the catalog; ``map``/``compress`` keep the loop in C, the predicates are the only Python calls
    (bench/planner_scaling.py). Every list keeps the catalog's order, as one loop over the offers would."""
    clean: list[Offer] = list(offers)  # no failure so far
    once: dict[str, list[Offer]] = {}  # exactly one failure so far, by that reason
    rejected: dict[str, dict[str, int]] = {}
    cloud_of = attrgetter("cloud")
    for reason, fails in checks:
        for r, lst in once.items():
            hit = list(map(fails, lst))
            if any(hit):
                once[r] = list(compress(lst, map(not_, hit)))
        hit = list(map(fails, clean))
        if not any(hit):
            continue
        failed = list(compress(clean, hit))
        clean = list(compress(clean, map(not_, hit)))
        once[reason] = failed
        for cloud, n in Counter(map(cloud_of, failed)).items():
            by_reason = rejected.setdefault(cloud, {})
            by_reason[reason] = by_reason.get(reason, 0) + n
    return clean, rejected, {r: lst for r, lst in once.items() if lst}


def plan(request: PlanRequest, catalog: Catalog, today: date) -> Plan:
    """Choose the cheapest feasible offer of ``catalog`` for ``request``. Pure and deterministic:
    the result depends only on the arguments (``today`` only feeds the catalog-age warning)."""
    req = request
    ck = _Checker(req)
    provisionable = ck.provisionable
    names = req.gpu_names
    maxp = req.max_price_per_hour
    spot = req.spot
    checks = ck.checks  # planner/checks.py: the one list diagnose() reads too
    order = {r: i for i, r in enumerate(ck.reasons)}

    feasible, rejected, near = _sieve(catalog.offers, checks)

    key = rank_key(req)
    running = running_prices(req, catalog.disk_prices, feasible)
    if maxp is not None:  # the loop compared the compute price; the cap is on the running price (disks included)
        over = [o for o in feasible if running(o) > maxp]
        if over:
            dear = set(map(id, over))
            feasible = [o for o in feasible if id(o) not in dear]
            for o in over:
                by_reason = rejected.setdefault(o.cloud, {})
                by_reason["max_price"] = by_reason.get("max_price", 0) + 1
                near.setdefault("max_price", []).append(o)
    ranked = last(_rank(feasible, req, running), req)  # a rehearsal offer (no GPU) after every offer that can pass
    chosen = ranked[0] if ranked else None
    bound = failover_bound(req, running(chosen)) if chosen else None
    failover = failover_order(chosen, ranked[1:], bound, running) if chosen else ()
    picked: list[NearMiss] = []
    for r, lst in near.items():
        k: Callable[[Offer], tuple[float, RankKey]] = lambda o: (0.0, key(o))  # noqa: E731
        if r == "gpu_name" and names:
            # Suggest GPUs closest in memory to the ones asked for (capped), then the cheapest.
            want = min(GPU_MEMORY_GIB.get(g, 0.0) for g in names)
            k = lambda o: (-min(o.gpu_memory_gib, want), key(o))  # noqa: B023, E731 - used within this iteration
        elif r == "max_price":  # the cap is on the running price: the offers closest under it are the cheapest running
            k = lambda o: (running(o), key(o))  # noqa: E731
        picked.extend(NearMiss(o, r) for o in heapq.nsmallest(NEAR_MISSES_PER_REASON, lst, key=k))
    near_misses = tuple(sorted(picked, key=lambda nm: (running(nm.offer), key(nm.offer), order[nm.reason])))
    age = (today - catalog.date).days
    warnings: list[str] = []
    if catalog.note:
        warnings.append(catalog.note)
    if age > catalog.stale_after_days:
        parts = catalog.freshness()
        warnings.append(f"the {catalog.origin} offer catalog is {age} days old (prices of "
                        f"{catalog.date.isoformat()}{': ' + parts if parts else ''}); prices and availability "
                        f"may have changed; `trainvm catalog refresh` renews it")
    cheaper_flagged: tuple[Offer, ...] = ()
    if chosen is not None:
        price_of = running
        best = price_of(chosen)
        if chosen.cloud not in provisionable:
            warnings.append(f"{chosen.cloud} is not provisionable yet: `up` cannot create "
                            f"{chosen.instance_type}")
        cheaper_flagged = tuple(o for o in heapq.nsmallest(
            NEAR_MISSES_PER_REASON, near.get("flagged_price", ()), key=key) if price_of(o) < best)
        if cheaper_flagged:
            o = cheaper_flagged[0]
            warnings.append(
                f"left out cheaper offers whose catalog price is unreliable, e.g. "
                f"{o.describe(spot)} (flags: {', '.join(o.flags)}); see the catalog README")
    candidates = _candidates(req, catalog, (chosen, *failover) if chosen else (), running)
    return Plan(
        request=req, chosen=chosen, ranked=ranked, failover=failover,
        rejected={c: {r: rejected[c][r] for r in ck.reasons if r in rejected[c]}
                  for c in sorted(rejected)},
        near_misses=near_misses, catalog_source=catalog.source, catalog_date=catalog.date,
        catalog_age_days=age, warnings=tuple(warnings), offers_considered=len(catalog.offers),
        cheaper_flagged=cheaper_flagged, failover_bound=bound, catalog_origin=catalog.origin,
        disk_prices=catalog.disk_prices, running=running, candidates=candidates, figured_for=req,
        worst_case=max(c.running for c in candidates) if candidates else None)


def _candidates(req: PlanRequest, catalog: Catalog, tried: tuple[Offer, ...],
                running: Callable[[Offer], float]) -> tuple[Candidate, ...]:
    """The figures of the offers ``up`` may try, once: their costs priced together (catalog/costs.py), their machine
    and prices read from the offer's fields."""
    compute = _price_key(req.spot)  # Offer.price_that_applies, inline
    prices = [compute(o) for o in tried]
    shapes = [shape_of(o) for o in tried]
    disks: dict[tuple[str, str, str, str], Cost] = {}  # per machine: zones of a region share their disks' prices
    for s in shapes:
        k = (s.cloud, s.region, s.family, s.instance_type)
        if k not in disks:
            disks[k] = cost_of(s, disk_prices=catalog.disk_prices or DiskPrices(), boot_disk_type=req.boot_disk_type,
                               boot_disk_gib=req.boot_disk_gib, local_nvme_gib=req.local_nvme_gib, compute_hourly=0.0)
    costs = [disks[(s.cloud, s.region, s.family, s.instance_type)].with_compute(
        s.instance_type, p, spot=req.spot, source=catalog.source, nodes=req.nodes) for s, p in zip(shapes, prices)]
    return tuple(Candidate(o, s, p, running(o), c) for o, s, p, c in zip(tried, shapes, prices, costs))


def failover_bound(request: PlanRequest, chosen_price: float) -> float:
    """The most failover may pay per hour: ``max_price_per_hour`` when set, else the chosen price plus
    ``max_failover_premium`` (default 25 %)."""
    if request.max_price_per_hour is not None:
        return request.max_price_per_hour
    return round(chosen_price * (1 + request.max_failover_premium), 6)


def failover_order(chosen: Offer, rest: Iterable[Offer], bound: float | None = None,
                   price: Callable[[Offer], float] = attrgetter("price_hourly")) -> tuple[Offer, ...]:
    """What ``up`` tries after ``chosen`` when it is stocked out: only offers with the same GPU model
    and count priced at most ``bound`` (None: no price bound), in this order (rank order inside each
    group): the same instance type in other zones of the region, the same instance type in the
    cloud's other regions, equivalent shapes (other instance types) in the same region, then in
    other regions, then the other clouds. Never another GPU, never a dearer offer than the bound."""
    groups: tuple[list[Offer], ...] = ([], [], [], [], [])
    for o in rest:
        if o.gpu_name != chosen.gpu_name or o.gpu_count != chosen.gpu_count:
            continue
        if bound is not None and price(o) > bound:
            continue
        if o.cloud != chosen.cloud:
            g = 4
        elif o.instance_type == chosen.instance_type:
            g = 0 if o.region == chosen.region else 1
        else:
            g = 2 if o.region == chosen.region else 3
        groups[g].append(o)
    return tuple(o for g in groups for o in g)
