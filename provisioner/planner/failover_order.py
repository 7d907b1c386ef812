"""What ``up`` may try after the chosen offer (``failover_order``) and the most it may pay per hour for it
(``failover_bound``): pure functions of the request and the ranked offers, used by ``planner/core.py`` ``plan``."""

from __future__ import annotations

from operator import attrgetter
from typing import Callable, Iterable

from provisioner.catalog.models import Offer
from provisioner.planner.request import PlanRequest


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
