"""``up``, ``status``/``list``, ``down`` and ``verify NAME``: the commands that talk to clouds.
They stay cloud-neutral: every cloud call goes through ``providers.get_provider``."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from provisioner.envvars import env_seconds
from provisioner.errors import CloudError, InputError, NoFeasibleOfferError
from provisioner.output import emit_json, escape, stderr_console, stdout_console
from provisioner.providers import PROVIDERS, get_provider
from provisioner.providers.base import InstanceRecord, Provider

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def _providers(clouds: list[str]) -> tuple[dict[str, Provider], list[dict[str, str]]]:
    """Providers for the clouds that have credentials; the others are skipped with a reason."""
    ready, skipped = {}, []
    for cloud in dict.fromkeys(clouds):
        if cloud not in PROVIDERS:
            skipped.append({"cloud": cloud, "reason": "trainvm cannot provision on this cloud yet"})
            continue
        try:
            ready[cloud] = get_provider(cloud)
        except CloudError as exc:
            skipped.append({"cloud": cloud, "reason": str(exc)})
    return ready, skipped


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


def run_up(path: Path, *, name: str | None, yes: bool, wait_ready: bool, clouds: list[str] | None, regions: list[str] | None,
           spot: bool | None, ssh_from: str | None, json_out: bool, ready_timeout: float, max_attempts: int | None = 30) -> int:
    from provisioner.launch import launch_spec
    from provisioner.planner.explain import no_offer_message
    from provisioner.planning import Overrides, make_plan
    from provisioner.profile import load_profile
    from provisioner.profile.fields import check_cidr
    from provisioner.provision import find_existing, provision

    poll = env_seconds("TRAINVM_READY_POLL_SECONDS", 15.0)  # checked before anything is created
    if name is not None and not NAME_RE.match(name):
        raise InputError(f"--name: {name!r} is not a valid VM name (lowercase letters, digits and '-', at most 63, starting with a letter)")
    if ssh_from is not None:
        try:
            ssh_from = check_cidr(ssh_from)
        except ValueError as exc:
            raise InputError(f"--ssh-from: {exc}") from None
    loaded = load_profile(path)
    plan, catalog, _ = make_plan(loaded, Overrides(tuple(clouds or ()) or None, tuple(regions or ()) or None, spot))
    if plan.chosen is None:
        raise NoFeasibleOfferError(no_offer_message(plan, catalog))
    offers = [o for o in (plan.chosen, *plan.failover) if o.provisionable]
    providers, skipped = _providers([o.cloud for o in offers])
    err = stderr_console()
    warnings = [m.render() for m in loaded.warnings if m.level == "warning"] + list(plan.warnings)
    if not json_out:
        for w in warnings:
            err.print(f"[yellow]warning[/yellow]: {escape(w)}")
    for s in skipped:
        err.print(f"[yellow]note[/yellow]: skipping {s['cloud']}: {escape(s['reason'])}")
    offers = [o for o in offers if o.cloud in providers]
    if not offers:
        raise CloudError("no cloud with usable credentials among the planned offers", hint=_cred_hint())
    vm = launch_spec(loaded, offers[0], name=name, spot=spot, ssh_from=ssh_from).name
    existing = find_existing(vm, list(providers), providers.__getitem__, loaded.hash)
    if existing is not None:
        err.print(f"{vm} already exists on {existing.cloud} ({existing.zone or existing.region}) for this profile; not creating another")
        return _report_up(existing, [], json_out, exists=True, warnings=warnings)
    first = offers[0]
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(f"`up` would create {vm} ({first.instance_type} in {first.zone or first.region}, ${plan.price(first):.2f}/h); pass --yes to confirm when not running interactively")
        import typer

        if not typer.confirm(f"Create {vm}: {first.cloud} {first.instance_type} in {first.zone or first.region} at ${plan.price(first):.2f}/h?"):
            return 1

    def spec_for(offer: Any) -> Any:
        return launch_spec(loaded, offer, name=name, spot=spot, ssh_from=ssh_from)

    def on_attempt(attempt: Any) -> None:
        style = "green" if attempt.outcome == "created" else "yellow"
        err.print(f"attempt: [{style}]{escape(attempt.render())}[/{style}]")

    try:
        record, attempts = provision(offers, spec_for, providers.__getitem__, on_attempt, max_attempts=max_attempts)
    except KeyboardInterrupt:
        from provisioner.errors import TrainvmError

        raise TrainvmError(
            f"interrupted while creating {vm}; a VM may be half-created",
            hint=f"run the same `trainvm up` again (it finds or finishes the same VM, never a second one), or `trainvm down {vm} --yes`",
        ) from None
    if record.price_hourly is None:
        record = _with_price(record, plan.price(next(o for o in offers if o.location == (record.zone or record.region))))
    if wait_ready:
        up_doc = _up_doc(record, attempts, exists=False, warnings=warnings)
        if not json_out:
            _report_up(record, attempts, False)
        return _wait_ready(providers[record.cloud], record, ready_timeout, json_out, up_doc, poll)
    return _report_up(record, attempts, json_out, warnings=warnings)


def _with_price(record: InstanceRecord, price: float) -> InstanceRecord:
    from dataclasses import replace

    return replace(record, price_hourly=price)


def _ssh(record: InstanceRecord) -> str | None:
    return record.extra.get("ssh") or (f"ssh {record.ip}" if record.ip else None)


def _up_doc(record: InstanceRecord, attempts: list[Any], exists: bool, warnings: list[str]) -> dict[str, Any]:
    return {
        "name": record.name, "cloud": record.cloud, "region": record.region, "zone": record.zone,
        "instance_type": record.instance_type, "price_hourly": record.price_hourly, "state": record.state,
        "ip": record.ip, "ssh": _ssh(record), "image": record.image, "existing": exists,
        "attempts": [a.to_json() for a in attempts], "notes": record.extra.get("notes", []),
        "warnings": list(warnings),
    }


def _report_up(record: InstanceRecord, attempts: list[Any], json_out: bool, exists: bool = False,
               warnings: list[str] | None = None) -> int:
    if json_out:
        emit_json(_up_doc(record, attempts, exists, warnings or []))
        return 0
    out = stdout_console()
    price = f"${record.price_hourly:.2f}/h" if record.price_hourly is not None else "price unknown"
    out.print(f"[bold]{record.name}[/bold]: {record.cloud} {record.zone or record.region} {record.instance_type} {price} {record.state}")
    if record.image:
        out.print(f"image: {record.image}")
    if record.ip:
        out.print(f"ip: {record.ip}")
    if _ssh(record):
        out.print(f"ssh: {escape(_ssh(record) or '')}")
    for note in record.extra.get("notes", []):
        out.print(f"note: {escape(note)}")
    return 0


def _cred_hint() -> str:
    return "GCE: set GOOGLE_CLOUD_PROJECT and run `gcloud auth application-default login`; Azure: set AZURE_SUBSCRIPTION_ID and run `az login`"


def _wait_ready(provider: Provider, record: InstanceRecord, timeout: float, json_out: bool, up_doc: dict[str, Any], interval: float) -> int:
    from provisioner.verify.compare import compare

    err = stderr_console()
    deadline = time.monotonic() + timeout
    last = None
    while True:
        report, profile = provider.read_report(record.name)
        status = (report or {}).get("status", "waiting for the startup script")
        if status != last:
            err.print(f"startup: {escape(str(status))}")
            last = status
        if report and not str(status).startswith("running"):
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    result = compare(profile or {}, report)
    if json_out:
        emit_json({**up_doc, "verify": result.as_dict(record.name), "status": result.status})
        return 0 if result.status == "match" else 1
    return _print_verify(record.name, result, json_out)


def _print_verify(target: str, result: Any, json_out: bool) -> int:
    if json_out:
        emit_json(result.as_dict(target))
    else:
        from rich.table import Table

        out = stdout_console()
        table = Table(show_edge=False, pad_edge=False)
        for col in ("field", "expected", "observed", "verdict"):
            table.add_column(col)
        for field, expected, observed, verdict in result.rows():
            style = None if verdict == "ok" else "red"
            table.add_row(escape(field), escape(expected), escape(observed), verdict, style=style)
        out.print(table)
        out.print(f"{target}: [bold]{result.status}[/bold]")
    return 0 if result.status == "match" else 1


def _all_records(cloud_filter: Callable[[str], bool] = lambda c: True) -> tuple[list[tuple[InstanceRecord, Provider]], list[dict[str, str]]]:
    providers, skipped = _providers([c for c in PROVIDERS if cloud_filter(c)])
    found = []
    for cloud, provider in providers.items():
        try:
            found.extend((r, provider) for r in provider.list())
        except CloudError as exc:
            skipped.append({"cloud": cloud, "reason": str(exc)})
    return found, skipped


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


def _credentialed() -> dict[str, Provider]:
    providers, _ = _providers(list(PROVIDERS))
    if not providers:
        raise CloudError("no cloud credentials found", hint=_cred_hint())
    return providers


def _locate(name: str, providers: dict[str, Provider]) -> tuple[InstanceRecord, Provider] | None:
    for provider in providers.values():
        record = provider.find(name)
        if record is not None:
            return record, provider
    return None


def run_down(name: str, *, yes: bool, wait: bool, json_out: bool) -> int:
    providers = _credentialed()
    located = _locate(name, providers)
    if located is None:
        # The VM is gone (deleted, or a spot VM evicted), but what was created for it may remain
        # (Azure: the resource group with its VNet/NSG). delete() is idempotent and cleans that up.
        cleaned = [cloud for cloud, provider in providers.items() if provider.delete(name, wait=wait)]
        if cleaned:
            if json_out:
                emit_json({"name": name, "cloud": cleaned[0], "deleted": True, "already_gone": True, "waited": wait})
            else:
                stdout_console().print(f"{name}: VM already gone; removed what was left on {', '.join(cleaned)}")
            return 0
        if json_out:
            emit_json({"name": name, "deleted": False, "already_gone": True})
        else:
            stdout_console().print(f"{name}: already gone")
        return 0
    record, provider = located
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(f"`down` would delete {name} on {record.cloud}; pass --yes to confirm when not running interactively")
        import typer

        if not typer.confirm(f"Delete {name} ({record.cloud} {record.zone or record.region}) and everything created for it?"):
            return 1
    deleted = provider.delete(name, wait=wait)
    if json_out:
        emit_json({"name": name, "cloud": record.cloud, "deleted": deleted, "already_gone": not deleted, "waited": wait})
    else:
        stdout_console().print(f"{name}: {'deleted' if deleted else 'already gone'}" + ("" if wait or not deleted else " (deletion in progress)"))
    return 0


def run_verify_remote(name: str, json_out: bool) -> int:
    from provisioner.verify.compare import compare

    located = _locate(name, _credentialed())
    if located is None:
        raise CloudError(f"no trainvm VM named {name} on any cloud with credentials")
    record, provider = located
    report, profile = provider.read_report(name)
    return _print_verify(name, compare(profile or {}, report), json_out)
