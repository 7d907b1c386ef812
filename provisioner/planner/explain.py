"""Human explanations: why offers were rejected and what to relax when nothing fits."""

from __future__ import annotations

from typing import Iterable, NamedTuple

from provisioner.catalog.models import Catalog, Offer
from provisioner.planner.checker import Checker as _Checker
from provisioner.planner.core import Plan, diagnose, rank_key
from provisioner.planner.request import PlanRequest

#: Reasons the user cannot relax in the profile: the catalog or trainvm decides them.
NOT_USER_RELAXABLE = frozenset({"not_provisionable", "cluster", "retired", "fractional_gpu", "flagged_price"})
#: How big a change relaxing a reason is: placement first (same hardware elsewhere or at another
#: price), then the host around the GPU, then the GPU itself, then what the user cannot change.
RELAX_GROUP = {
    "region": 0, "cloud": 0, "spot_unavailable": 0, "max_price": 0, "data_locality": 0, "secret_store": 0,
    "vcpus": 1, "memory": 1, "local_nvme": 1, "disk_type": 1, "os_image": 1, "placement": 0,
    "gpu_memory": 2, "gpu_count": 2, "gpu_name": 2, "stack_incompatible": 2,
    **{r: 3 for r in NOT_USER_RELAXABLE},
}


class Relaxation(NamedTuple):
    """Relaxing ``reasons`` (one constraint, or the fewest possible) admits ``offer``."""

    reasons: tuple[str, ...]
    offer: Offer
    price_hourly: float
    change: str  # what to change, e.g. "allow region us-central1"

    @property
    def user_relaxable(self) -> bool:
        return not (set(self.reasons) & NOT_USER_RELAXABLE)


def reason_text(reason: str, offer: Offer, request: PlanRequest, running: float | None = None) -> str:
    """What relaxing ``reason`` means for ``offer`` (imperative, short). ``running``: the offer's running price
    (``Plan.running_price``: compute + disks, what max_price_per_hour caps); default the compute price."""
    o, r = offer, request
    texts = {
        "cloud": (f"--cloud {o.cloud} (placement.clouds lists it; --cloud {','.join(r.clouds)} left it out)"
                  if o.cloud in (r.profile_clouds or ()) else f"add {o.cloud} to placement.clouds"),
        "not_provisionable": f"{o.cloud} is not provisionable yet (shown for comparison)",
        "cluster": f"trainvm cannot create {r.nodes}-node clusters on {o.cloud} yet (hardware.nodes: 1 for one VM)",
        "data_locality": r.data_excluded_clouds.get(o.cloud, f"{o.cloud} cannot read the data"),
        "secret_store": r.secret_excluded_clouds.get(o.cloud, f"{o.cloud} cannot read a secret of the profile"),
        "gpu_name": f"accept {o.gpu_name}",
        "gpu_memory": f"accept {o.gpu_memory_gib:g} GiB per GPU (nominal, as min_gpu_memory_gib compares)",
        "stack_incompatible": f"a stack that runs on {o.gpu_name} "
                              f"({r.stack_excluded_gpus.get(o.gpu_name, 'incompatible')})",
        "gpu_count": f"gpu_count: {o.gpu_count}",
        "vcpus": f"min_vcpus: {o.vcpus:g}",
        "memory": f"min_memory_gib: {o.memory_gib:g}",
        "local_nvme": f"local_nvme_gib <= {o.local_nvme_max_gib}",
        "disk_type": f"boot_disk.type: {'/'.join(o.disk_types) or 'n/a'}",
        "os_image": f"an OS with an image on {o.cloud} ({o.arch})",
        "placement": f"placement.compact: false ({o.family} nodes cannot be placed compactly on {o.cloud})",
        "region": f"allow region {o.region}",
        "retired": f"{o.instance_type} is retired by {o.cloud} (catalog flag)",
        "fractional_gpu": f"{o.instance_type} has only a slice of a GPU (catalog flag)",
        "flagged_price": f"its catalog price is unreliable ({', '.join(o.flags)})",
        "spot_unavailable": "spot: false (no reliable spot price)",
        "max_price": f"max_price_per_hour >= {_applies(o, r) if running is None else running:.2f}",
    }
    return texts.get(reason, reason)


def _applies(o: Offer, r: PlanRequest) -> float:
    p = o.price(r.spot)
    return o.price_hourly if p is None else p


def closest_offers(plan: Plan, catalog: Catalog | Iterable[Offer] | None = None,
                   limit: int = 5) -> tuple[Relaxation, ...]:
    """Cheapest offer per single relaxed constraint (from the plan's near misses), smallest
    change first (placement, then host size, then GPU, then catalog flags), cheapest within.
    When no offer misses by exactly one constraint and ``catalog`` is given, the offers
    that miss by the fewest constraints are reported instead (one per combination)."""
    req = plan.request
    best: dict[tuple[str, ...], Offer] = {}
    for nm in plan.near_misses:  # already cheapest first
        best.setdefault((nm.reason,), nm.offer)
    if not best and catalog is not None:
        offers = catalog.offers if isinstance(catalog, Catalog) else tuple(catalog)
        ck = _Checker(req)
        fewest = None
        key = rank_key(req)
        for o in offers:
            reasons = diagnose(o, req, ck)
            if not reasons or (fewest is not None and len(reasons) > fewest):
                continue
            if fewest is None or len(reasons) < fewest:
                fewest, best = len(reasons), {}
            cur = best.get(reasons)
            if cur is None or key(o) < key(cur):
                best[reasons] = o
    out = [Relaxation(rs, o, _applies(o, req), "; ".join(reason_text(x, o, req, plan.running_price(o)) for x in rs))
           for rs, o in best.items()]
    out.sort(key=lambda x: (max(RELAX_GROUP.get(r, 2) for r in x.reasons), x.price_hourly,
                            x.reasons))
    return tuple(out[:limit])


def no_offer_message(plan: Plan, catalog: Catalog | Iterable[Offer] | None = None) -> str:
    """One paragraph for the no-feasible-offer case, e.g. ``no feasible offer for H100 x1 in
    europe-*; nearest: gcp us-central1-a a3-highgpu-1g (1x H100) $11.06/h (allow region
    us-central1)``."""
    req = plan.request
    where = f" in {', '.join(req.region_globs)}" if req.region_globs else ""
    clouds = ", ".join(req.clouds)
    head = (f"no feasible offer for {req.describe_gpu()}{where} on {clouds}"
            f"{' (spot)' if req.spot else ''} among {plan.offers_considered} catalog offers")
    totals: dict[str, int] = {}
    for per_cloud in plan.rejected.values():
        for reason, n in per_cloud.items():
            totals[reason] = totals.get(reason, 0) + n
    top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    if top:
        head += " (rejected: " + ", ".join(f"{r} {n}" for r, n in top) + ")"
    rel = closest_offers(plan, catalog)
    if not rel:
        return head + "; no offer comes close: check gpu names and gpu_count against " \
                      "`trainvm catalog show`."
    parts = [f"{'/'.join(x.reasons)}: "
             f"{x.offer.describe(req.spot and 'spot_unavailable' not in x.reasons)} — {x.change}"
             for x in rel]
    return head + "; nearest by relaxing " + "; ".join(parts) + "."
