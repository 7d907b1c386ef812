"""The planner's constraints: ONE list, read by both ``plan()`` (which counts each offer's first failing
reason and finds near misses) and ``diagnose()`` (every reason one offer fails, for `plan`'s explanations).

Each ``Check`` has a stable reason and a ``build(request, checker)`` that returns a predicate
``offer -> fails?`` for that request, or None when the check cannot fail for it (no region globs, no
price cap, one node...): the planner's loop then skips it, which keeps ``plan()`` linear and cheap
(bench/planner_scaling.py). The list order is the reason order (``REASONS``): an offer is counted under
the first reason it fails. Adding a constraint is adding one ``Check`` here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from provisioner.planner.rehearsal import clouds_of
from provisioner.providers.registry import CLOUD_NAMES

if TYPE_CHECKING:
    from provisioner.catalog.models import Offer
    from provisioner.planner.checker import Checker as _Checker
    from provisioner.planner.request import PlanRequest

Predicate = Callable[["Offer"], bool]
Build = Callable[["PlanRequest", "_Checker"], Optional[Predicate]]


@dataclass(frozen=True, slots=True)
class Check:
    reason: str
    build: Build
    doc: str  # what failing it means (REASONS' comment, kept next to the test)
    #: not a gate on a rehearsal cloud (planner/rehearsal.py): the plan lists it under ``not_checked`` instead
    rehearsed: bool = False


def _cloud(r: PlanRequest, ck: _Checker) -> Predicate:
    clouds = frozenset(r.clouds)
    return lambda o: o.cloud not in clouds


def _not_provisionable(r: PlanRequest, ck: _Checker) -> Predicate | None:
    if r.include_unprovisionable:
        return None
    prov = ck.provisionable
    return lambda o: o.cloud not in prov


def _cluster(r: PlanRequest, ck: _Checker) -> Predicate | None:
    if r.nodes == 1 or r.include_unprovisionable:
        return None
    no = frozenset(CLOUD_NAMES) - ck.cluster
    return (lambda o: o.cloud in no) if no else None


def _in_map(field: str) -> Build:
    def build(r: PlanRequest, ck: _Checker) -> Predicate | None:
        table = getattr(r, field)
        return (lambda o: o.cloud in table) if table else None
    return build


def _gpu_name(r: PlanRequest, ck: _Checker) -> Predicate | None:
    names = r.gpu_names
    return None if names is None else (lambda o: o.gpu_name not in names)


def _gpu_memory(r: PlanRequest, ck: _Checker) -> Predicate | None:
    least = r.min_gpu_memory_gib
    return None if least is None else (lambda o: o.gpu_memory_gib < least)


def _stack(r: PlanRequest, ck: _Checker) -> Predicate | None:
    ex = r.stack_excluded_gpus
    return (lambda o: o.gpu_name in ex) if ex else None


def _gpu_count(r: PlanRequest, ck: _Checker) -> Predicate:
    n = r.gpu_count
    return lambda o: o.gpu_count != n


def _vcpus(r: PlanRequest, ck: _Checker) -> Predicate | None:
    least = r.min_vcpus
    return (lambda o: o.vcpus < least) if least > 0 else None


def _memory(r: PlanRequest, ck: _Checker) -> Predicate | None:
    least = r.min_memory_gib
    return (lambda o: o.memory_gib < least) if least > 0 else None


def _nvme(r: PlanRequest, ck: _Checker) -> Predicate | None:
    least = r.local_nvme_gib
    return (lambda o: o.local_nvme_max_gib < least) if least > 0 else None


def _disk(r: PlanRequest, ck: _Checker) -> Predicate:
    disk = r.boot_disk_type
    return lambda o: disk not in o.disk_types


def _os_image(r: PlanRequest, ck: _Checker) -> Predicate:
    arches, none = ck.os_arches, frozenset[str]()
    return lambda o: o.arch not in arches.get(o.cloud, none)


def _placement(r: PlanRequest, ck: _Checker) -> Predicate | None:
    fams = r.compact_families
    return None if fams is None else (lambda o: (o.cloud, o.family) not in fams)


def _region(r: PlanRequest, ck: _Checker) -> Predicate | None:
    if r.region_globs is None:
        return None
    ok, match = ck.region_ok, ck.region_match
    return lambda o: not ok.get(o.region) and not match(o.region, o.zone)


def _flag(reason: str) -> Build:
    def build(r: PlanRequest, ck: _Checker) -> Predicate:
        of = ck.flag_reasons_of
        return lambda o: bool(o.flags) and reason in of(o.flags)
    return build


def _spot(r: PlanRequest, ck: _Checker) -> Predicate | None:
    return (lambda o: o.spot_price_hourly is None) if r.spot else None


def _max_price(r: PlanRequest, ck: _Checker) -> Predicate | None:
    cap = r.max_price_per_hour
    if cap is None:
        return None
    if r.spot:  # no spot price: the on-demand price applies (spot_unavailable says so)
        return lambda o: (o.price_hourly if o.spot_price_hourly is None else o.spot_price_hourly) > cap
    return lambda o: o.price_hourly > cap


#: Every constraint, in reason order. plan() and diagnose() read this list (at call time) and nothing else.
CHECKS: tuple[Check, ...] = (
    Check("cloud", _cloud, "offer's cloud not in placement.clouds"),
    Check("not_provisionable", _not_provisionable, "trainvm cannot create VMs on that cloud yet"),
    Check("cluster", _cluster, "nodes > 1 and trainvm cannot create clusters on that cloud yet (registry group_engine)"),
    Check("data_locality", _in_map("data_excluded_clouds"), "a VM on that cloud cannot read a data source"),
    Check("secret_store", _in_map("secret_excluded_clouds"), "a VM on that cloud cannot read a secret:// reference"),
    Check("gpu_name", _gpu_name, "GPU model not among the accepted names", rehearsed=True),
    Check("gpu_memory", _gpu_memory, "memory per GPU below min_gpu_memory_gib", rehearsed=True),
    Check("stack_incompatible", _stack, "the pinned stack cannot run on that GPU (compat engine)", rehearsed=True),
    Check("gpu_count", _gpu_count, "GPU count differs from hardware.gpu_count", rehearsed=True),
    Check("vcpus", _vcpus, "fewer vCPUs than min_vcpus", rehearsed=True),
    Check("memory", _memory, "less RAM than min_memory_gib", rehearsed=True),
    # rehearsed: the local cloud makes thin NVMe devices of the size asked; its offer says what this machine can back
    Check("local_nvme", _nvme, "cannot have local_nvme_gib of local NVMe", rehearsed=True),
    Check("disk_type", _disk, "boot disk type unavailable for that machine family / size"),
    Check("os_image", _os_image, "no image of stack.os for that cloud/architecture"),
    Check("placement", _placement, "nodes > 1 with placement.compact: true, and the family cannot be placed compactly"),
    Check("region", _region, "region not matched by placement.regions", rehearsed=True),
    Check("retired", _flag("retired"), "catalog flags the size as retired by the cloud"),
    Check("fractional_gpu", _flag("fractional_gpu"), "size carries a slice of one GPU"),
    Check("flagged_price", _flag("flagged_price"), "catalog price is unreliable (see catalog data/README.md)"),
    Check("spot_unavailable", _spot, "spot requested, offer has no (reliable) spot price", rehearsed=True),
    Check("max_price", _max_price, "price that applies above max_price_per_hour"),
)


def active(request: PlanRequest, ck: _Checker) -> Iterator[tuple[str, Predicate]]:
    """(reason, predicate) of every check of ``CHECKS`` that can fail for ``request``, in reason order."""
    reh = clouds_of(request)
    for c in CHECKS:
        pred = c.build(request, ck)
        if pred is not None and reh and c.rehearsed:
            yield c.reason, _not_on(reh, pred)
        elif pred is not None:
            yield c.reason, pred


def _not_on(clouds: frozenset[str], pred: Predicate) -> Predicate:
    return lambda o: o.cloud not in clouds and pred(o)


def rehearsed_failures(offer: Offer, request: PlanRequest, ck: _Checker) -> tuple[str, ...]:
    """The ``rehearsed`` checks ``offer`` fails for ``request``, as on a cloud that can pass."""
    return tuple(c.reason for c in CHECKS if c.rehearsed and (p := c.build(request, ck)) is not None and p(offer))
