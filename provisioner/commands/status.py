"""``trainvm status`` / ``list``: trainvm VMs on every cloud with credentials, with price and cost so far.

A cluster (``hardware.nodes`` > 1) is one entry named after it: its nodes under ``members`` (JSON) or indented
below it (table), its price and cost the sums over the nodes, its state the nodes' common state (``MIXED``
when they differ), ``nodes`` the count the cluster was made with and ``nodes_found`` how many the cloud lists.

The price is the one recorded on the VM at create time (``trainvm-price``: the spot price for spot VMs); so are its
disks' prices (``trainvm-disks-price``, ``trainvm-kept-price``): ``running_hourly`` is compute + disks,
``stopped_hourly`` what the VM keeps costing while stopped (its persistent disks), each unknown (None) when not
recorded; a stopped VM's line says what it keeps costing.
A VM of an older trainvm without that label gets the catalog's on-demand price when it is not spot,
and no price when it is (its spot price is not known). "Cost so far" counts only running time the cloud
reports: the hours since the last start while it runs, the last run (last start to last stop) once it is
stopped, so it never grows while the VM is stopped; where the cloud reports no start time it is unknown.
Azure reports only the end of a VM's last control-plane operation (``last_start_is_latest``): while the VM
runs it started then or earlier, so its run and cost are shown as "at least" (``>=``, JSON
``cost_so_far_is_minimum``); once it is stopped the start of its last run is unknown.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, final

from provisioner.catalog.storage import load_catalog
from provisioner.commands.clouds import _all_records, check_name
from provisioner.commands.verify import not_found
from provisioner.errors import EXIT_CLOUD
from provisioner.output import emit_json, notice, stdout_console
from provisioner.providers.base import InstanceRecord, RecordJson
from provisioner.providers.lifecycle import allocated_while_stopped
from provisioner.providers.registry import CLOUDS

if TYPE_CHECKING:
    from rich.table import Table

    from provisioner.commands.clouds import Unlisted

RUNNING_STATES = frozenset({"RUNNING", "PROVISIONING", "STAGING", "STARTING", "REPAIRING"})


class StatusRow(RecordJson):
    """One entry of ``status --json`` ``vms``: read back by the table and the lines."""

    price_source: str | None
    billing_compute: bool
    allocated_while_stopped: bool
    disks_hourly: float | None
    running_hourly: float | None
    stopped_hourly: float | None
    billing_now_hourly: float | None
    last_start: str | None
    last_stop: str | None
    uptime_hours: float | None
    cost_so_far: float | None
    cost_so_far_is_minimum: bool


@final
class VmRow(StatusRow):
    """A VM's entry (or a cluster node's, under its cluster's ``members``)."""


@final
class ClusterRow(StatusRow):
    """A cluster's entry: its nodes' sums, how many nodes the cloud lists, its per-node price and its nodes."""

    nodes_found: int
    price_hourly_per_node: float | None
    members: list[VmRow]


def _price_for(record: InstanceRecord) -> tuple[float | None, str | None]:
    """(hourly price, where it comes from: 'recorded' on the VM or the 'catalog')."""
    if record.price_hourly is not None:
        return record.price_hourly, "recorded"
    if record.spot is not False:
        return None, None  # spot (or unknown): the on-demand list price would overstate or misstate it

    prices = [o.price_hourly for o in load_catalog().offers
              if o.cloud == record.cloud and o.instance_type == record.instance_type and o.region == record.region]
    return (min(prices), "catalog") if prices else (None, None)


def _when(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        t = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def running_hours(record: InstanceRecord, now: datetime | None = None) -> float | None:
    """Hours of the current run (since the last start) or, when stopped, of the last run; None when unknown."""
    start = _when(record.last_start)
    if start is None:
        return None
    if record.state.upper() in RUNNING_STATES:
        end = now or datetime.now(UTC)
    else:
        stop = _when(record.last_stop)
        if stop is None or stop < start:
            return None
        end = stop
    return max((end - start).total_seconds() / 3600, 0.0)


def allocated_line(v: StatusRow) -> str:
    """What a VM that is stopped but still allocated keeps billing, and how to end it."""
    run_h = v["running_hourly"]
    price = "its compute price and its disks (not recorded on the VM)" if run_h is None else f"${run_h:.3f}/h (compute + disks)"
    return (f"{v['name']} is {v['state']} but still allocated: compute keeps billing, {price}; "
            f"`trainvm stop {v['name']}` deallocates it (compute billing ends), `trainvm down {v['name']}` deletes it")


def _row(r: InstanceRecord) -> VmRow:
    price, source = _price_for(r)
    hours = running_hours(r)
    running = r.state.upper() in RUNNING_STATES
    allocated = allocated_while_stopped(r.cloud, r.state)  # e.g. an Azure VM powered off from the guest
    cost = None if (price is None or hours is None) else round(price * hours, 2)
    run_h = None if price is None or r.disks_hourly is None else round(price + r.disks_hourly, 6)
    return {**r.to_json(), "price_hourly": price, "price_source": source, "billing_compute": running or allocated,
            "allocated_while_stopped": allocated,
            # recorded at create time (catalog/costs.py); None: unknown (a VM of an older trainvm, or no disk price)
            "disks_hourly": r.disks_hourly, "running_hourly": run_h, "stopped_hourly": r.kept_hourly,
            "billing_now_hourly": run_h if running or allocated else r.kept_hourly,
            "last_start": r.last_start, "last_stop": r.last_stop,
            "uptime_hours": None if hours is None else round(hours, 2),
            "cost_so_far": cost, "cost_so_far_is_minimum": cost is not None and r.last_start_is_latest}


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else round(sum(v for v in values if v is not None), 6)


def _cluster_row(name: str, nodes: list[InstanceRecord]) -> ClusterRow:
    """One entry for the nodes of cluster ``name`` (rank order)."""
    members = [_row(r) for r in sorted(nodes, key=lambda r: (r.rank is None, r.rank or 0, r.name))]
    first = members[0]
    states = {m["state"] for m in members}
    hours = [m["uptime_hours"] for m in members if m["uptime_hours"] is not None]
    return {**first, "name": name, "cluster": name, "rank": None, "nodes": nodes[0].nodes, "nodes_found": len(nodes),
            "state": states.pop() if len(states) == 1 else "MIXED",
            "price_hourly_per_node": first["price_hourly"], "price_hourly": _sum([m["price_hourly"] for m in members]),
            "disks_hourly": _sum([m["disks_hourly"] for m in members]),
            "running_hourly": _sum([m["running_hourly"] for m in members]),
            "stopped_hourly": _sum([m["stopped_hourly"] for m in members]),
            "billing_now_hourly": _sum([m["billing_now_hourly"] for m in members]),
            "billing_compute": any(m["billing_compute"] for m in members),
            "allocated_while_stopped": any(m["allocated_while_stopped"] for m in members),
            "uptime_hours": max(hours) if hours else None, "cost_so_far": _sum([m["cost_so_far"] for m in members]),
            "cost_so_far_is_minimum": any(m["cost_so_far_is_minimum"] for m in members), "members": members}


def rows_of(records: list[InstanceRecord]) -> list[VmRow | ClusterRow]:
    """One row per VM and one per cluster (its nodes inside), sorted by cloud and name."""
    singles = [r for r in records if not r.cluster]
    clusters: dict[tuple[str, str], list[InstanceRecord]] = {}
    for r in records:
        if r.cluster:
            clusters.setdefault((r.cloud, r.cluster), []).append(r)
    rows: list[VmRow | ClusterRow] = [_row(r) for r in singles]
    rows += [_cluster_row(name, nodes) for (_, name), nodes in clusters.items()]
    return sorted(rows, key=lambda v: (v["cloud"], v["name"]))


def run_status(name: str | None, json_out: bool, cloud: str | None = None) -> int:
    if name is not None:
        check_name(name)
    listed = _all_records(lambda c: cloud is None or c == cloud)  # none asked: exit 3
    found, skipped, asked = listed.found, listed.skipped, listed.asked
    records = [r for r, _ in found if name is None or name in (r.name, r.cluster)]
    if name is not None and not records:
        err = not_found(name)
        if skipped or listed.unlisted:
            err.hint = "not looked for on: " + "; ".join(
                [f"{s['cloud']} ({s['reason']})" for s in skipped]
                + [f"{u['cloud']} {', '.join(u['where'])} ({u['reason']})" for u in listed.unlisted if u["where"]])
        raise err
    rows = rows_of(records)
    # a zone/region or an asked cloud that could not be listed: the answer is partial (exit 3, said, never only warned)
    partial = bool(listed.unlisted) and not (name is not None and records)
    if json_out:
        emit_json({"vms": rows, "asked": asked, "skipped": skipped, "partial": partial, "unlisted": listed.unlisted})
    else:
        from rich.table import Table

        for s in skipped:
            notice("not asked", f"{s['cloud']}: {s['reason']}" + (f" ({s['hint']})" if s.get("hint") else ""))
        table = Table(show_edge=False, pad_edge=False)
        cells = [_cells(v) for v in rows]
        longest = max((len(c) for _, cell, members in cells for c in (cell, *(mc for _, mc in members))), default=4)
        # a VM's name is never cut or wrapped (it is what the other commands take): the other columns give way
        table.add_column("name", no_wrap=True, min_width=longest)
        for col in ("cloud", "zone", "type", "state", "profile", "$/h", "running $/h", "stopped $/h", "run",
                    "cost so far"):
            table.add_column(col)
        for v, cell, members in cells:
            _add_row(table, v, cell)
            for m, member_cell in members:
                _add_row(table, m, member_cell)
        out = stdout_console()
        out.print(table if rows else f"no trainvm VMs found on {', '.join(asked)}")
        for v in rows:
            if not v["billing_compute"]:
                out.print(kept_line(v), soft_wrap=True)
            elif v["allocated_while_stopped"]:
                out.print(allocated_line(v), soft_wrap=True)
        if partial:
            notice("partial", partial_line(listed.unlisted))
    return EXIT_CLOUD if partial else 0


def _cells(v: VmRow | ClusterRow) -> tuple[StatusRow, str, list[tuple[VmRow, str]]]:
    """A row's name cell and, for a cluster, its nodes' rows and name cells."""
    if "members" not in v:
        return v, v["name"], []
    return (v, f"{v['name']} ({v['nodes_found']}/{v['nodes']} nodes)",
            [(m, f"  node {m['rank']}: {m['name']}") for m in v["members"]])


def partial_line(unlisted: list[Unlisted]) -> str:
    """What was not listed, so that the VMs shown are not taken for all of them."""
    parts = [f"{u['cloud']} {', '.join(u['where'])} ({u['reason']})" if u["where"] else f"{u['cloud']} ({u['reason']})"
             for u in unlisted]
    return ("this list is incomplete: not listed: " + "; ".join(parts)
            + "; VMs there are not shown (exit 3); run it again to retry")


def kept_line(v: StatusRow) -> str:
    """What a stopped VM (or cluster) keeps costing per hour, and what bills, in the registry's words."""
    spec = CLOUDS.get(v["cloud"])
    what = f" ({spec.lifecycle.kept_billing})" if spec is not None else ""
    kept = v["stopped_hourly"]
    price = "an unknown amount per hour" if kept is None else f"${kept:.3f}/h"
    unknown = " (not recorded on the VM: made by an older trainvm, or no disk price known)" if kept is None else ""
    return f"{v['name']} is {v['state']}: compute billing has ended; it keeps costing {price}{what}{unknown}"


def _add_row(table: Table, v: StatusRow, name: str) -> None:
    p, h, cost = v["price_hourly"], v["uptime_hours"], v["cost_so_far"]
    price = "unknown" if p is None else f"${p:.3f}" + (" (catalog)" if v["price_source"] == "catalog" else "")
    if not v["billing_compute"]:
        price += ", not billing compute"
    at_least = ">= " if v["cost_so_far_is_minimum"] else ""
    run_h, kept = v["running_hourly"], v["stopped_hourly"]
    table.add_row(name, v["cloud"], v["zone"] or v["region"], v["instance_type"], v["state"], v["profile"] or "-",
                  price, "unknown" if run_h is None else f"${run_h:.3f}", "unknown" if kept is None else f"${kept:.3f}",
                  "unknown" if h is None else f"{at_least}{h:.1f} h", "unknown" if cost is None else f"{at_least}${cost:.2f}")
