"""``trainvm status`` / ``list``: trainvm VMs on every cloud with credentials, with price and cost so far."""

from __future__ import annotations

from datetime import datetime, timezone

from provisioner.commands.clouds import _all_records
from provisioner.output import emit_json, escape, stderr_console, stdout_console
from provisioner.providers.base import InstanceRecord


def _price_for(record: InstanceRecord) -> float | None:
    if record.price_hourly is not None:
        return record.price_hourly
    from provisioner.catalog.storage import load_catalog

    prices = [o.price_hourly for o in load_catalog().offers
              if o.cloud == record.cloud and o.instance_type == record.instance_type and o.region == record.region]
    return min(prices) if prices else None


def _uptime_hours(created: str | None) -> float | None:
    if not created:
        return None
    try:
        start = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return max((datetime.now(timezone.utc) - start).total_seconds() / 3600, 0.0)


def run_status(name: str | None, json_out: bool) -> int:
    found, skipped = _all_records()
    records = [r for r, _ in found if name is None or r.name == name]
    rows = []
    for r in sorted(records, key=lambda r: (r.cloud, r.name)):
        price = _price_for(r)
        hours = _uptime_hours(r.created)
        rows.append((r, price, hours))
    if json_out:
        emit_json({"vms": [{**r.to_json(), "price_hourly": p, "uptime_hours": None if h is None else round(h, 2),
                            "cost_so_far": None if (p is None or h is None) else round(p * h, 2)} for r, p, h in rows],
                   "skipped": skipped})
    else:
        from rich.table import Table

        err = stderr_console()
        for s in skipped:
            err.print(f"[yellow]skipped[/yellow] {s['cloud']}: {escape(s['reason'])}")
        table = Table(show_edge=False, pad_edge=False)
        for col in ("name", "cloud", "zone", "type", "state", "profile", "$/h", "uptime", "cost so far"):
            table.add_column(col)
        for r, p, h in rows:
            table.add_row(r.name, r.cloud, r.zone or r.region, r.instance_type, r.state, r.profile or "-",
                          "-" if p is None else f"${p:.2f}", "-" if h is None else f"{h:.1f} h",
                          "-" if (p is None or h is None) else f"${p * h:.2f}")
        stdout_console().print(table if rows else "no trainvm VMs found")
    if name is not None and not records:
        return 1
    return 0
