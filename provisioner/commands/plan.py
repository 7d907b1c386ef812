"""``trainvm plan`` and ``trainvm catalog show``."""

from __future__ import annotations

import sys
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.bake.offline import plan_baked, plan_lines
from provisioner.bake.ready_time import basis_lines
from provisioner.catalog.storage import load_catalog
from provisioner.compat.facts import load_facts
from provisioner.errors import InputError, ProfileError, RenderError
from provisioner.lock.gate import lock_gate
from provisioner.output import emit_json, notice, print_messages, stderr_console, stdout_console, styled
from provisioner.planner.explain import closest_offers, no_offer_message, reason_text
from provisioner.planner.from_profile import Overrides, _today, make_plan, region_warnings
from provisioner.profile import load_profile
from provisioner.profile.fields import check_gpu_name
from provisioner.providers.access import egress_basis, egress_estimate, plan_secret_warnings
from provisioner.providers.lifecycle import summary as lifecycle_summary
from provisioner.providers.lifecycle import summary_lines as lifecycle_lines
from provisioner.providers.registry import placement
from provisioner.providers.registry_auth import profile_pull_auth
from provisioner.providers.store import describe, describe_line

if TYPE_CHECKING:
    from rich.console import Console

    from provisioner.bake.offline import BakedPlanDoc
    from provisioner.catalog.models import Catalog, Offer
    from provisioner.planner.core import Plan
    from provisioner.profile import LoadedProfile
    from provisioner.provision.quota import QuotaCheck
    from provisioner.render.script import RenderedScript

FAILOVER_SHOWN = 8


def _money(x: float | None) -> str:
    small = f"${x:.4f}".rstrip("0") if x is not None else ""
    return "-" if x is None else (f"${x:,.2f}" if x >= 1 else small + "00" if small.endswith(".") else small)


def _script_for(loaded: LoadedProfile, offer: Offer, warnings: list[str]) -> RenderedScript | None:
    """The render for the chosen offer (RenderedScript); None when the script cannot be rendered for that cloud
    (a warning says why; `up` skips that cloud)."""
    from provisioner.render.script import render_for_offer  # lazy: startup (jinja2: --json only)

    try:
        return render_for_offer(loaded, offer)
    except RenderError as exc:
        warnings.append(f"the startup script cannot be rendered for {offer.cloud} ({exc}); `up` skips {offer.cloud}")
        return None


def _load(path: Path, frozen: bool) -> LoadedProfile:
    """The profile; when --resolve-image could not reach the registry the profile error exits 3 (network),
    as every registry failure does, not 1 (the profile is not known to be wrong)."""
    try:
        return load_profile(path, frozen=frozen or None)
    except ProfileError as exc:
        from provisioner.container.store import registry_failure  # lazy: startup

        failure = registry_failure()
        if failure is not None:
            exc.exit_code = failure.exit_code
        raise


def run_plan(
    path: Path, *, clouds: list[str] | None, regions: list[str] | None, spot: bool | None, top: int,
    explain: bool, show_script: bool, json_out: bool, frozen: bool = False, quota: bool = False,
) -> int:
    loaded = _load(path, frozen)
    lock_notes = lock_gate(loaded, frozen=frozen)
    overrides = Overrides(tuple(clouds or ()) or None, tuple(regions or ()) or None, spot)
    planned = make_plan(loaded, overrides)
    plan, catalog, applied = planned.plan, planned.catalog, planned.applied
    need_script = plan.chosen is not None and (json_out or show_script)  # rendering costs ~40 ms: only when shown
    render_notes: list[str] = []
    rendered = _script_for(loaded, plan.chosen, render_notes) if need_script and plan.chosen is not None else None
    pull = profile_pull_auth(loaded.profile, plan.chosen.cloud, loaded.resolved.image) if plan.chosen else None
    extra = (region_warnings(plan.request, catalog) + plan_secret_warnings(loaded, plan) + lock_notes + render_notes
             + ([pull.warning] if pull and pull.warning else []))
    warnings = [m.render() for m in loaded.warnings if m.level == "warning"] + list(plan.warnings) + extra
    hours = loaded.profile.lifecycle.max_run_hours
    if json_out:
        doc: dict[str, object] = {"profile": loaded.profile.name, "hash": loaded.hash}
        doc.update(plan.to_json(alternatives=max(top - 1, 0)))
        doc["defaults"] = applied
        doc["request"] = plan.request.to_json()
        doc["estimate"] = _estimate(plan, hours, loaded)
        doc["cluster"] = cluster_json(loaded, plan, hours)
        doc["lifecycle"] = lifecycle_summary(loaded.profile.lifecycle, plan.chosen.cloud if plan.chosen else None)
        doc["script_sha256"] = rendered.script_sha256 if rendered else None
        doc["payload"] = _payload(plan.chosen, rendered)
        doc["image_pull"] = pull.to_json() if pull else None
        doc["baked_image"] = _baked(loaded, plan.chosen, catalog)
        if show_script:
            doc["script"] = rendered.startup_sh if rendered else None
        if quota:  # only when asked: `plan` stays offline by default
            doc["quota"] = [c.to_json() for c in _quota_checks(plan, warnings)]
        doc["warnings"] = warnings
        if plan.chosen is None:  # the answer "no" (exit 1), in the same words as the text
            doc["message"] = no_offer_message(plan, catalog)
            doc["suggestions"] = [
                {"relax": list(r.reasons), "change": r.change, "offer": r.offer.to_json(plan.request.spot), "price_hourly": r.price_hourly}
                for r in closest_offers(plan, catalog)
            ]
        emit_json(doc)
        return 0 if plan.chosen else 1
    print_messages(m for m in loaded.warnings if m.level == "warning")
    for w in [*plan.warnings, *extra]:
        notice("warning", w)
    if plan.chosen is None:  # the plan's answer is "no" (exit 1): a result on stdout like --json's, not an error
        out = stdout_console()
        out.print(no_offer_message(plan, catalog), soft_wrap=True)
        _print_rejections(plan, out)
        return 1
    _print_plan(loaded, plan, plan.chosen, applied, top, hours)
    baked = plan_baked(loaded, plan.chosen, catalog.disk_prices)  # offline: the local record of bakes
    for line in plan_lines(baked, plan.chosen.cloud):
        stdout_console().print(line, soft_wrap=True, highlight=False, markup=False)
    if quota:
        out = stdout_console()
        for check in _quota_checks(plan, None):
            skip = "; `up` skips it" if check.status == "short" else ""
            age = f" (read {check.age_s:.0f} s ago)" if check.readings else ""
            out.print(check.message() + skip + age, soft_wrap=True, highlight=False, markup=False)
    if explain:
        _print_explain(plan)
        for line in basis_lines(baked["ready"]):  # the time to ready's terms and what each rests on
            stdout_console().print(line, soft_wrap=True, highlight=False, markup=False)
    if show_script and rendered is not None:
        sys.stdout.write(rendered.startup_sh)
    return 0


def _baked(loaded: LoadedProfile, offer: Offer | None, catalog: Catalog) -> BakedPlanDoc | None:
    """Whether ``up`` boots a baked image on ``offer`` (offline, docs/bake.md) and the expected time to ready."""
    if offer is None:
        return None
    return plan_baked(loaded, offer, catalog.disk_prices)


def _quota_checks(plan: Plan, warnings: list[str] | None) -> list[QuotaCheck]:
    """``--quota``: the quota check of each region in the failover order (the chosen offer's first), read with
    the clouds' credentials (provision/quota.py); a cloud without credentials is "not checked"."""
    if plan.chosen is None:
        return []
    from provisioner.commands.clouds import _providers  # lazy: startup
    from provisioner.provision.quota import Preflight  # lazy: startup

    offers = [o for o in (plan.chosen, *plan.failover) if o.provisionable]
    providers, _ = _providers(list(dict.fromkeys(o.cloud for o in offers)))
    preflight = Preflight(providers, spot=plan.request.spot, nodes=plan.request.nodes,
                          warn=warnings.append if warnings is not None else lambda w: None)
    seen: dict[tuple[str, str], QuotaCheck] = {}
    for o in offers:
        if (o.cloud, o.region) not in seen:
            seen[(o.cloud, o.region)] = preflight.check(o)
    return list(seen.values())


def _payload(offer: Offer | None, rendered: RenderedScript | None) -> dict[str, object] | None:
    """Where ``up`` stages the payload for ``offer`` and what it costs (size and sha256 when rendered)."""
    if offer is None:
        return None
    doc = describe(offer.cloud, offer.region, rendered.payload.size if rendered else None)
    if rendered is not None:
        doc["sha256"] = rendered.payload.sha256
        doc["user_data_bytes"] = rendered.preview().size
    return doc


def _egress(loaded: LoadedProfile, offer: Offer) -> list[dict[str, object]]:
    return egress_estimate([(d.source, d.size_gib) for d in loaded.profile.data], offer.cloud, offer.region)


def _estimate(plan: Plan, hours: float | None, loaded: LoadedProfile) -> dict[str, object] | None:
    if plan.chosen is None:
        return None
    price = plan.price(plan.chosen)
    egress = _egress(loaded, plan.chosen)
    nodes = plan.request.nodes
    cost = plan.cost(plan.chosen)
    run = cost.running_hourly
    return {"price_hourly": price, "nodes": nodes, "cluster_price_hourly": round(price * nodes, 6), "hours": hours,
            # running = compute + the request's disks; stopped = what a stopped VM keeps costing (its disks)
            "running_hourly": run, "stopped_hourly": cost.stopped_hourly,
            "cluster_running_hourly": cost.total(run), "cluster_stopped_hourly": cost.total(cost.stopped_hourly),
            "cost": cost.to_json(),
            # the run at the running price where every part is known, else at the known parts (a lower bound)
            "per_run": round(cost.running_hourly_known * nodes * hours, 2) if hours else None,
            "per_run_is_minimum": run is None,
            "egress": egress, "egress_cost": round(sum(_num(e["cost"]) or 0.0 for e in egress) * nodes, 2),
            "egress_cost_checked": all(e["checked"] for e in egress)}


def _num(value: object) -> float | None:
    """A number read back from a JSON document (an egress estimate's ``cost``); None when it is not one."""
    return float(value) if isinstance(value, int | float) else None


def _print_plan(loaded: LoadedProfile, plan: Plan, c: Offer, applied: dict[str, float], top: int, hours: float | None) -> None:
    from rich.table import Table

    out = stdout_console()
    req = plan.request
    out.print(
        styled((loaded.profile.name, "bold"), f" (hash {loaded.hash[:16]}): {req.describe_gpu()}, "
        f">= {req.min_vcpus:g} vCPUs, >= {req.min_memory_gib:g} GiB RAM, {req.boot_disk_type} boot disk"
        + (f", {req.local_nvme_gib} GiB local NVMe" if req.local_nvme_gib else "")
        + (", spot" if req.spot else ""))
    )
    if applied:
        out.print("defaults applied: " + ", ".join(f"{k}={v:g}" for k, v in applied.items()) + " (set them in hardware: to override)")
    table = Table(show_edge=False, pad_edge=False)
    per_node = " per node" if req.nodes > 1 else ""
    run_col = "$/run" + (f" ({req.nodes} nodes)" if req.nodes > 1 else "")
    for col, just in [("", "left"), ("cloud", "left"), ("region", "left"), ("zone", "left"), ("instance type", "left"),
                      ("GPU", "left"), ("vCPU", "right"), ("RAM GiB", "right"), ("compute $/h", "right"),
                      ("running $/h" + per_node, "right")] + ([(run_col, "right")] if hours else []):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for i, o in enumerate(plan.ranked[:top]):
        price = plan.running_price(o)  # what the ranking compares: compute + the request's disks
        row = ["*" if i == 0 else str(i + 1), o.cloud, o.region, o.zone or "-", o.instance_type,
               f"{o.gpu_count}x {o.gpu_name} {o.gpu_memory_gib:g}G", f"{o.vcpus:g}", f"{o.memory_gib:g}",
               _money(plan.price(o)), _money(price)]
        if hours:
            row.append(_money(price * hours * req.nodes))
        table.add_row(*row, style="bold green" if i == 0 else None)
    out.print(table)
    if (rehearsal := plan.rehearsal(c)) is not None:  # a cloud without a GPU: never a pass (planner/rehearsal.py)
        out.print(rehearsal.line(), soft_wrap=True, highlight=False, markup=False)
    nodes = req.nodes
    cost = plan.cost(c)
    node_price = cost.running_hourly_known
    price = node_price * nodes
    at_least = "at least " if cost.running_hourly is None else ""
    each = f" ({nodes} nodes x {_money(node_price)}/h)" if nodes > 1 else ""
    est = f"estimated cost: {at_least}{_money(price)}/h{each}" + (f", {at_least}{_money(price * hours)} for max_run_hours={hours:g}" if hours else f", {at_least}{_money(price * 24)} per 24 h (no max_run_hours set)")
    out.print(f"chosen: {c.cloud} {c.zone or c.region} {c.instance_type}{f' x{nodes} nodes' if nodes > 1 else ''}; {est}")
    out.print(f"cost: {cost.line()}", soft_wrap=True)
    for line in cluster_lines(loaded, plan):
        out.print(line)
    for e in _egress(loaded, c):
        out.print(f"data egress: {e['source']} ({e['size_gib']:g} GiB) from {e['from']} to {e['to']}: about "
                  f"{_money(_num(e['cost']))} once ({egress_basis(e)})")
    out.print("payload: " + describe_line(describe(c.cloud, c.region)))
    pull = profile_pull_auth(loaded.profile, c.cloud, loaded.resolved.image)
    if pull is not None:
        out.print("image pull: " + pull.text, soft_wrap=True, highlight=False, markup=False)
    for i, line in enumerate(lifecycle_lines(loaded.profile.lifecycle, c.cloud, spot=req.spot)):
        out.print(("lifecycle: " if i == 0 else "  ") + line)
    if plan.failover:
        shown = " -> ".join(f"{o.cloud}:{o.zone or o.region}/{o.instance_type}" for o in plan.failover[:FAILOVER_SHOWN])
        more = f" (+{len(plan.failover) - FAILOVER_SHOWN} more)" if len(plan.failover) > FAILOVER_SHOWN else ""
        out.print(f"failover: {shown}{more}")
    else:
        out.print(f"failover: none (no other {c.gpu_count}x {c.gpu_name} offer within the bound); a stock-out stops `up`")
    out.print(bound_line(plan))
    _print_rejections(plan, out)
    out.print(f"catalog: {plan.catalog_origin}, {plan.catalog_source} ({plan.catalog_date.isoformat()}, {plan.catalog_age_days} days old)")


def cluster_json(loaded: LoadedProfile, plan: Plan, hours: float | None) -> dict[str, object] | None:
    """The ``cluster`` part of the plan document (None for a single VM or no chosen offer)."""
    nodes = loaded.profile.hardware.nodes
    if nodes == 1 or plan.chosen is None:
        return None
    c = plan.chosen
    facts = placement(c.cloud, c.family, c.instance_type)
    decided = loaded.resolved.placement
    price = plan.price(c)
    cost = plan.cost(c)
    return {"nodes": nodes, "compact_requested": decided.compact_asked,
            "compact": decided.compact_for(c.cloud, c.family, c.instance_type),
            "price_hourly_per_node": price, "price_hourly": round(price * nodes, 6),
            "running_hourly_per_node": cost.running_hourly, "running_hourly": cost.total(cost.running_hourly),
            "stopped_hourly_per_node": cost.stopped_hourly, "stopped_hourly": cost.total(cost.stopped_hourly),
            "per_run": round(cost.running_hourly_known * nodes * hours, 2) if hours else None,
            "placement": facts.to_json(loaded.profile.stack.os)}


def cluster_lines(loaded: LoadedProfile, plan: Plan) -> list[str]:
    """``placement:`` and ``fabric:`` lines for nodes > 1."""
    doc = cluster_json(loaded, plan, None)
    c = plan.chosen
    if doc is None or c is None:  # cluster_json is None without a chosen offer
        return []
    facts = placement(c.cloud, c.family, c.instance_type)
    if doc["compact"]:
        where = f"compact: {facts.compact_with}"
    elif facts.compact:
        where = "not compact (placement.compact: false)"
    else:
        where = f"not compact: {facts.note or f'{c.family} does not support it'} (placement.compact: true would rule it out)"
    return [f"placement: {doc['nodes']} identical nodes, {where}",
            f"fabric: {facts.fabric_text(loaded.profile.stack.os)}"]


def bound_line(plan: Plan) -> str:
    """``failover bound: $0.68/h (chosen +25%, placement.max_failover_premium); worst case $0.54/h``."""
    b = plan.bound_json()
    if b is None or plan.chosen is None:  # bound_json is None without a chosen offer
        return "failover bound: none (no offer chosen)"
    why = ("placement.max_price_per_hour" if b["premium"] is None
           else f"chosen {_money(plan.running_price(plan.chosen))}/h +{b['premium'] * 100:g}%, placement.max_failover_premium")
    return (f"failover bound: {_money(b['price_hourly'])}/h running ({why}); worst-case failover price "
            f"{_money(b['worst_case_price_hourly'])}/h, same GPU model and count only")


def _print_rejections(plan: Plan, console: Console | None = None) -> None:
    out = console or stderr_console()
    parts = []
    for cloud, reasons in sorted(plan.rejected.items()):
        top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        parts.append(f"{cloud}: " + ", ".join(f"{r} {n}" for r, n in top))
    if parts:
        out.print("rejected: " + "; ".join(parts))


def _print_explain(plan: Plan) -> None:
    out = stdout_console()
    if not plan.near_misses:
        out.print("near misses: none (every rejected offer fails two or more constraints)")
        return
    out.print("near misses (rejected by exactly one constraint):")
    for nm in plan.near_misses:
        o = nm.offer
        out.print(f"  {o.cloud} {o.zone or o.region} {o.instance_type} {_money(plan.price(o))}/h: {nm.reason} - {reason_text(nm.reason, o, plan.request, plan.running_price(o))}")


def _catalog_gpu(given: str, offered: set[str]) -> str:
    """The catalog's name for ``--gpu``: the names and aliases ``hardware.gpu`` takes (also in any case), or a name
    the catalog offers; an unknown or workstation GPU is an input error with validate's suggestions (exit 2)."""
    facts = load_facts()
    names = {n.lower(): n for n in [*facts.cloud_gpu_names(), *offered]}
    names.update({alias.lower(): facts.canonical_gpu(alias) or alias for alias in facts.gpu_aliases
                  if facts.canonical_gpu(alias) in names.values()})
    if given.strip().lower() in names:
        return names[given.strip().lower()]
    try:
        return check_gpu_name(given)
    except ValueError as exc:
        raise InputError(f"--gpu: {exc}", hint="`trainvm catalog show` without --gpu lists every offer") from None


def run_catalog_show(*, cloud: str | None, gpu: str | None, region: str | None, json_out: bool, limit: int) -> int:
    catalog = load_catalog()
    gpu = _catalog_gpu(gpu, {o.gpu_name for o in catalog.offers}) if gpu is not None else None
    offers = [
        o for o in catalog.offers
        if (cloud is None or o.cloud == cloud) and (gpu is None or o.gpu_name == gpu)
        and (region is None or fnmatchcase(o.region, region))
    ]
    offers.sort(key=lambda o: (o.price_hourly, o.cloud, o.region, o.zone or "", o.instance_type))
    today = _today()
    meta = {"source": catalog.source, "date": catalog.date.isoformat(), "schema_version": catalog.schema_version,
            "origin": catalog.origin, "age_days": catalog.age_days(today)}
    stale = [catalog.note] if catalog.note else []
    if catalog.age_days(today) > catalog.stale_after_days:
        parts = catalog.freshness()
        stale.append(f"the {catalog.origin} offer catalog is {catalog.age_days(today)} days old"
                     f"{' (' + parts + ')' if parts else ''}; `trainvm catalog refresh` renews it")
    if json_out:
        meta["warnings"] = stale
        emit_json({"catalog": meta, "count": len(offers), "offers": [
            {**o.to_json(False), "spot_price_hourly": o.spot_price_hourly, "provisionable": o.provisionable, "flags": list(o.flags)}
            for o in offers]})
        return 0
    from rich.table import Table

    out = stdout_console()
    table = Table(show_edge=False, pad_edge=False)
    for col in ("cloud", "region", "zone", "instance type", "GPU", "vCPU", "RAM GiB", "$/h", "spot $/h", "notes"):
        table.add_column(col)
    for o in offers[:limit]:
        notes = ", ".join(list(o.flags) + ([] if o.provisionable else ["not provisionable yet"]))
        table.add_row(o.cloud, o.region, o.zone or "-", o.instance_type, f"{o.gpu_count}x {o.gpu_name} {o.gpu_memory_gib:g}G",
                      f"{o.vcpus:g}", f"{o.memory_gib:g}", _money(o.price_hourly), _money(o.spot_price_hourly), notes)
    out.print(table)
    more = f" (showing {limit}; --limit to see more)" if len(offers) > limit else ""
    out.print(f"{len(offers)} offers{more}; {catalog.describe(today)}")
    for w in stale:
        notice("warning", w)
    return 0
