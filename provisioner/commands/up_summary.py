"""What ``up`` shows before it asks (and puts under ``summary`` in ``up --json``): the chosen price, what it costs
running and stopped with its disks (``running_hourly``/``stopped_hourly``, catalog/costs.py), the
worst-case failover price and its bound, the cost of a full run, what the lifecycle settings do, who can
reach SSH and where the data comes from. Cloud-neutral: per-cloud facts come from providers.registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from provisioner.errors import CloudError
from provisioner.providers.lifecycle import idle_gpu_line
from provisioner.providers.registry import ssh_exposure
from provisioner.providers.store import describe, describe_line

if TYPE_CHECKING:
    from provisioner.planner.core import Candidate, Plan
    from provisioner.profile import LoadedProfile
    from provisioner.providers.base import Provider
    from provisioner.providers.capabilities import PreflightResult


class SummaryLifecycle(TypedDict):
    idle_shutdown_minutes: int | None
    max_run_hours: float | None
    on_idle: Literal["stop", "delete"]
    on_max_run: Literal["stop", "delete"]


class UpSummary(TypedDict):
    """``up``'s summary (``up --json`` ``summary``): built by :func:`up_summary`, completed by commands/up.py with
    what it checked (the NotRequired keys), read back by :func:`summary_lines`."""

    cloud: str
    location: str
    instance_type: str
    gpu: str
    spot: bool
    price_hourly: float
    nodes: int
    cluster_price_hourly: float
    running_hourly: float | None
    stopped_hourly: float | None
    cluster_running_hourly: float | None
    cluster_stopped_hourly: float | None
    cost: dict[str, object]  # catalog/costs.py Cost.to_json
    cost_line: str
    failover_bound_hourly: float | None
    worst_case_price_hourly: float | None
    run_cost: float | None
    run_cost_is_minimum: bool
    worst_case_run_cost: float | None
    lifecycle: SummaryLifecycle
    idle_gpu_rule: str | None
    ssh: str
    data_sources: list[str]
    payload: dict[str, object]  # providers/store.py describe, then the staged payload's url, sha256...
    preflight: NotRequired[list[PreflightResult]]  # providers/capabilities.py Preflighter.preflight
    quota: NotRequired[list[dict[str, object]]]  # provision/quota.py QuotaCheck.to_json
    baked_image: NotRequired[dict[str, object] | None]  # bake/use.py BakedChoice.to_json
    clouds_not_checked: NotRequired[list[dict[str, str]]]


def up_summary(loaded: LoadedProfile, plan: Plan, first: Candidate, *, spot: bool, ssh_from: str | None) -> UpSummary:
    """The summary of trying ``first`` (the plan's first candidate) under ``plan``: the plan's figures, read as fields
    (``Plan.candidates``, ``Plan.worst_case``: computed once by the planner)."""
    p = loaded.profile
    lc = p.lifecycle
    o = first.shape
    price = first.price
    cost = first.cost  # compute + the request's disks, running and stopped (catalog/costs.py)
    running = cost.running_hourly_known  # a lower bound when a part's price is unknown (``cost.unknown``)
    worst = plan.worst_case
    hours = lc.max_run_hours
    n = p.hardware.nodes  # prices stay per node; run costs are the cluster's (n x price)
    lifecycle = SummaryLifecycle(idle_shutdown_minutes=lc.idle_shutdown_minutes, max_run_hours=hours,
                                 on_idle=lc.on_idle, on_max_run=lc.on_max_run)
    return {
        "cloud": o.cloud, "location": o.location, "instance_type": o.instance_type,
        "gpu": f"{o.gpu_count}x {o.gpu_name}", "spot": spot,
        "price_hourly": price,
        "nodes": n,
        "cluster_price_hourly": round(price * n, 6),
        "running_hourly": cost.running_hourly, "stopped_hourly": cost.stopped_hourly,
        "cluster_running_hourly": cost.total(cost.running_hourly),
        "cluster_stopped_hourly": cost.total(cost.stopped_hourly),
        "cost": cost.to_json(), "cost_line": cost.line(),
        "failover_bound_hourly": plan.failover_bound,
        "worst_case_price_hourly": worst,
        "run_cost": None if hours is None else round(running * n * hours, 2),
        "run_cost_is_minimum": cost.running_hourly is None,
        "worst_case_run_cost": None if hours is None or worst is None else round(worst * n * hours, 2),
        "lifecycle": lifecycle,
        "idle_gpu_rule": idle_gpu_line(lc),
        "ssh": ssh_exposure(o.cloud, ssh_from or p.placement.ssh_from),
        "data_sources": [d.source for d in p.data],
        "payload": describe(o.cloud, o.region),
    }


def summary_lines(s: UpSummary) -> list[str]:
    lc = s["lifecycle"]
    spot = " (spot: may be reclaimed)" if s["spot"] else ""
    n = s.get("nodes", 1)
    if n > 1:
        lines = [f"{s['cloud']} {n} nodes x {s['instance_type']} ({s['gpu']} each) in {s['location']} at "
                 f"${s['price_hourly']:.3f}/h per node = ${s['cluster_price_hourly']:.3f}/h for the cluster{spot}",
                 f"failover: the whole cluster, same GPU only, at most ${s['failover_bound_hourly']:.3f}/h running per node; "
                 f"worst case ${s['worst_case_price_hourly']:.3f}/h per node"]
    else:
        lines = [f"{s['cloud']} {s['instance_type']} ({s['gpu']}) in {s['location']} at ${s['price_hourly']:.3f}/h{spot}",
                 f"failover: same GPU only, at most ${s['failover_bound_hourly']:.3f}/h running; "
                 f"worst case ${s['worst_case_price_hourly']:.3f}/h"]
    if "cost_line" in s:
        lines.insert(1, f"cost: {s['cost_line']}")
    at_least = "at least " if s.get("run_cost_is_minimum") else ""
    if lc["max_run_hours"] is None:
        known = s.get("cost", {}).get("running_hourly_known", s["price_hourly"])
        per_day = (s.get("cluster_running_hourly") or (known if isinstance(known, int | float) else s["price_hourly"]) * n) * 24
        lines.append(f"run length: no max_run_hours; {at_least}${per_day:.2f} per 24 h until you run `trainvm down`")
    else:
        lines.append(f"run length: max_run_hours={lc['max_run_hours']:g} -> {at_least}${s['run_cost']:.2f} "
                     f"(worst case ${s['worst_case_run_cost']:.2f})")
    idle = "never" if lc["idle_shutdown_minutes"] is None else f"after {lc['idle_shutdown_minutes']} idle minutes"
    actions = "".join(f", {k}={v}" for k, v in (("on_idle", lc.get("on_idle")), ("on_max_run", lc.get("on_max_run"))) if k in lc)
    lines.append(f"lifecycle: idle shutdown {idle}{actions}")
    if rule := s.get("idle_gpu_rule"):
        lines.append(rule)
    lines.append(f"ssh: {s['ssh']}")
    lines.append("data: " + (", ".join(s["data_sources"]) if s["data_sources"] else "none"))
    for c in s.get("preflight") or []:
        lines.append(f"preflight: {c['cloud']}: {c['status']}: {c['message']}")
    lines += [str(q["message"]) for q in s.get("quota") or []]
    if s.get("payload"):
        lines.append("payload: " + describe_line(s["payload"]))
    b = s.get("baked_image")  # provisioner/bake/use.py: the image the first offer boots, or why not
    if b:
        lines.append(f"baked image: {b['name']} (the startup script only verifies)" if b["used"]
                     else f"baked image not used: {b['reason']}")
    for skipped in s.get("clouds_not_checked") or []:  # no credentials: a VM of this name may exist there
        lines.append(f"not checked: {skipped['cloud']} ({skipped['reason']}): a VM of this name may already exist there")
    return lines


def same_profile_elsewhere(providers: dict[str, Provider], vm: str, profile_hash: str, default: str) -> str | None:
    """``up --name N``: a warning naming the VMs of this very profile (same hash) under other names, since ``N``
    is then a second, separately billed VM of it (None when there is none, or no cloud could list)."""
    others: list[str] = []
    for provider in providers.values():
        try:
            records = provider.list()
        except CloudError:  # a courtesy: `up` goes on as it would without it
            continue
        for r in records:
            if r.hash and profile_hash.startswith(r.hash) and (r.cluster or r.name) != vm:
                price = "" if r.price_hourly is None else f", ${r.price_hourly:.2f}/h"
                others.append(f"{r.cluster or r.name} ({r.cloud} {r.zone or r.region}, {r.state}{price})")
    if not others:
        return None
    others = list(dict.fromkeys(others))
    return (f"--name {vm} creates a second VM of this profile, billed separately: {', '.join(others[:3])}"
            f"{' and more' if len(others) > 3 else ''} already run{'s' if len(others) == 1 else ''} it; "
            f"`up` without --name finds and reuses {default} instead of making another")
