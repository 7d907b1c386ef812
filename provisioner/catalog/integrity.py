"""The price integrity rules, one implementation for the embedded build (scripts/build_catalog.py) and for
``trainvm catalog refresh`` (catalog/refresh.py).

* ``spot_check``: a spot price that is missing, above or equal to on-demand is dropped and flagged.
* ``suspect_low``: per group of regional prices (one GPU, one instance type), the largest relative step
  between neighbouring distinct prices; when it is >= SUSPECT_GAP every price below it is suspect (a 50%
  regional drop is a 2x step). Flagged ``suspect_price`` rows stay in the catalog but plans exclude them.
* ``check_refreshed``: the checks a refreshed catalog must pass to replace the current one (the same
  ``validate_offers`` consistency checks that ``TRAINVM_CATALOG`` folders get: unknown GPUs, duplicates,
  zones outside their region, N1 hosts over GCE's GPU limits, disk types a family lacks; no price <= 0).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import replace
from typing import TypeVar

from provisioner.catalog.models import Offer
from provisioner.catalog.storage import validate_offers

#: A regional price is "suspiciously low" when the sorted distinct prices of one group show a jump of at
#: least this factor and it sits below the jump. Observed in the snapshot: legitimate regional spreads
#: between neighbouring prices are <= 1.30 (Azure ND96isr_H100_v5), defective ones >= 1.40 (GCP B200).
SUSPECT_GAP = 1.35
#: Flags a refresh recomputes from the new prices (the others are shape facts and are carried over).
PRICE_FLAGS = frozenset({"suspect_price", "host_price_zero", "no_spot_price", "spot_above_ondemand",
                         "spot_equals_ondemand"})

K = TypeVar("K", bound=Hashable)


def suspect_low(prices: Mapping[K, float]) -> set[K]:
    """Keys whose price sits below the largest relative jump, when that jump >= SUSPECT_GAP."""
    distinct = sorted({round(v, 4) for v in prices.values()})
    if len(distinct) < 2:
        return set()
    ratio, low = max((b / a, a) for a, b in zip(distinct, distinct[1:]))
    if ratio < SUSPECT_GAP:
        return set()
    return {k for k, v in prices.items() if round(v, 4) <= low}


def spot_check(price: float, spot: float | None, *, noted_above: bool = False) -> tuple[float | None, list[str]]:
    """The spot price to keep (None: unknown or unreliable) and the flags that say why."""
    if spot is None or spot <= 0:
        return None, ["no_spot_price"]
    if spot > price * 1.001 or noted_above:
        return None, ["spot_above_ondemand"]
    if spot >= price * 0.999:  # equal up to the 4-6 decimals sources round spot to
        return None, ["spot_equals_ondemand"]
    return spot, []


def suspect_groups(items: Iterable[tuple[K, Hashable, float]]) -> set[K]:
    """``(key, group, price)`` triples -> the keys whose price is suspiciously low within their group."""
    groups: dict[Hashable, dict[K, float]] = defaultdict(dict)
    for key, group, price in items:
        groups[group][key] = price
    return set().union(*(suspect_low(p) for p in groups.values()))


def reflag(fresh: list[Offer], reference: Iterable[Offer] = (),
           group: Callable[[Offer], Hashable] | None = None) -> list[Offer]:
    """``fresh`` offers with their price flags recomputed: spot_check per row, suspect_low per group (default:
    one instance type with one GPU configuration across regions and zones), the group's prices including
    ``reference`` (the same cloud's rows that were not refreshed, whose own flags are left as they are)."""
    group = group or (lambda o: (o.cloud, o.instance_type, o.gpu_name, o.gpu_count))
    checked = []
    for o in fresh:
        spot, flags = spot_check(o.price_hourly, o.spot_price_hourly)
        kept = [f for f in o.flags if f not in PRICE_FLAGS]
        checked.append(replace(o, spot_price_hourly=spot, flags=tuple(sorted(kept + flags))))
    ref = [(-1 - i, group(o), o.price_hourly) for i, o in enumerate(reference) if o.excluded_by() is None]
    suspect = suspect_groups([*((i, group(o), o.price_hourly) for i, o in enumerate(checked)), *ref])
    return [replace(o, flags=tuple(sorted((*o.flags, "suspect_price")))) if i in suspect else o
            for i, o in enumerate(checked)]


def check_refreshed(offers: Iterable[Offer]) -> list[str]:
    """Problems that keep a refreshed catalog from replacing the current one (empty: it may)."""
    offers = list(offers)
    problems = [f"{o.cloud} {o.instance_type} {o.zone or o.region}: price {o.price_hourly!r} is not > 0"
                for o in offers if not o.price_hourly > 0]
    if not offers:
        problems.append("no offers at all")
    return problems + validate_offers(offers)
