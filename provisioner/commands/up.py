"""``trainvm up``: plan, try the offers in failover order, optionally wait for the startup script's report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict, Unpack

import typer

from provisioner.bake.use import BakedImages
from provisioner.commands import up_wait, vm_record
from provisioner.commands.clouds import NAME_RE, _cred_hint, _providers
from provisioner.commands.up_abort import STOPPED, Leaves
from provisioner.commands.up_summary import UpSummary, same_profile_elsewhere, summary_lines, up_summary
from provisioner.container.store import require_pinned_image
from provisioner.errors import CloudError, InputError, NoFeasibleOfferError, TrainvmError
from provisioner.hooks.providers import provider_clouds
from provisioner.lock.gate import lock_gate
from provisioner.output import emit_json, notice, stderr_console, stdout_console, styled
from provisioner.planner.explain import no_offer_message
from provisioner.planner.from_profile import Overrides, make_plan
from provisioner.profile import load_profile
from provisioner.profile.fields import check_cidr
from provisioner.providers.access import secret_warnings
from provisioner.providers.base import InstanceRecord, Provider, vm_name
from provisioner.providers.capabilities import Preflighter, PreflightResult
from provisioner.providers.lifecycle import allocated_while_stopped
from provisioner.providers.registry import provisionable_clouds
from provisioner.provision.failover import IN_PROGRESS, find_existing, finish_existing, provision
from provisioner.provision.launch import launch_spec, stage
from provisioner.provision.progress import Progress
from provisioner.provision.quota import Preflight
from provisioner.render.script import render_for_offer
from provisioner.settings import env_seconds

if TYPE_CHECKING:
    from provisioner.bake.use import BakedChoice
    from provisioner.planner.core import Candidate
    from provisioner.profile.model import Profile
    from provisioner.providers.base import LaunchSpec
    from provisioner.providers.store import PayloadRef
    from provisioner.provision.failover import Attempt


class UpOptions(TypedDict):
    """``up``'s options as the CLI passes them (the keyword parameters of ``_run_up``)."""

    name: str | None
    yes: bool
    wait_ready: bool
    clouds: list[str] | None
    regions: list[str] | None
    spot: bool | None
    ssh_from: str | None
    json_out: bool
    ready_timeout: float
    max_attempts: NotRequired[int | None]
    frozen: NotRequired[bool]
    start: NotRequired[bool]


def run_up(path: Path, **kw: Unpack[UpOptions]) -> int:
    """``up``; Ctrl-C or SIGTERM (console.py) anywhere is exit 130 with one ``aborted: ...`` line saying what exists
    and what it costs (commands/up_abort.py)."""
    leaves = Leaves()
    try:
        return _run_up(path, leaves, **kw)
    except KeyboardInterrupt:
        raise leaves.aborted() from None


def _run_up(path: Path, leaves: Leaves, *, name: str | None, yes: bool, wait_ready: bool, clouds: list[str] | None, regions: list[str] | None,
           spot: bool | None, ssh_from: str | None, json_out: bool, ready_timeout: float, max_attempts: int | None = 30, frozen: bool = False,
           start: bool = False) -> int:
    poll = env_seconds("TRAINVM_READY_POLL_SECONDS", 15.0)  # checked before anything is created
    if name is not None and not NAME_RE.match(name):
        raise InputError(f"--name: {name!r} is not a valid VM name (lowercase letters, digits and '-', at most 63, starting with a letter)")
    if ssh_from is not None:
        try:
            ssh_from = check_cidr(ssh_from)
        except ValueError as exc:
            raise InputError(f"--ssh-from: {exc}") from None
    loaded = load_profile(path, frozen=frozen or None)
    nodes = loaded.profile.hardware.nodes  # > 1: the planner keeps only clouds with a group engine (reason `cluster`)
    require_pinned_image(loaded.profile.stack.container, loaded.resolved.image, loaded.where)

    lock_notes = lock_gate(loaded, frozen=frozen)
    planned = make_plan(loaded, Overrides(tuple(clouds or ()) or None, tuple(regions or ()) or None, spot))
    plan, catalog = planned.plan, planned.catalog
    if plan.chosen is None:
        raise NoFeasibleOfferError(no_offer_message(plan, catalog))
    creatable = set(provisionable_clouds())  # the registry's fact, asked once (not of each offer)
    tried = [c for c in plan.candidates if c.offer.cloud in creatable]  # the offers `up` may try, with their figures
    planned_clouds = list(dict.fromkeys(c.offer.cloud for c in tried))
    # Every cloud with credentials, not only the planned ones: one VM per name across clouds.
    providers, skipped = _providers([*planned_clouds, *provider_clouds()])
    err = stderr_console()

    warnings = [m.render() for m in loaded.warnings if m.level == "warning"] + list(plan.warnings) + lock_notes
    warnings += secret_warnings(loaded.secret_refs, loaded.profile.data, [(c.offer.cloud, c.offer.region) for c in tried])
    if not json_out:
        for w in warnings:
            notice("warning", w)
    for s in skipped:
        if s["cloud"] in planned_clouds:
            notice("note", f"skipping {s['cloud']}: {s['reason']}")
    tried = [c for c in tried if c.offer.cloud in providers]
    if not tried:
        raise CloudError("no cloud with usable credentials among the planned offers", hint=_cred_hint())
    vm = vm_name(loaded.profile.name, loaded.hash, name)

    staged: list[PayloadRef] = []  # the PayloadRef of each attempt, in order

    baked = BakedImages(loaded, providers)  # a matching baked image per offer (docs/bake.md), looked up once per stack
    choices: list[BakedChoice | None] = []  # the BakedChoice of each attempt, in order

    def staged_spec(c: Candidate) -> LaunchSpec:  # render this offer's payload once, stage it, and the bootstrap that fetches it
        choice = baked.choose(c.shape)
        rendered = render_for_offer(loaded, c.shape, choice.image_mode if choice else "")  # the render stage, once
        ref = stage(rendered, c.shape, providers[c.shape.cloud])
        staged.append(ref)
        choices.append(choice)
        return launch_spec(loaded, c.offer, name=name, ssh_from=ssh_from, rendered=rendered, ref=ref,
                           spot=plan.request.spot, cost=c.cost, price=c.price, baked=choice.image if choice else None)

    leaves.name = vm
    existing = find_existing(vm, list(providers), providers.__getitem__, loaded.hash)
    if existing is not None:
        leaves.record = existing
        vm_record.note(vm, existing.cloud, "up")
        err.print(f"{vm} already exists on {existing.cloud} ({existing.zone or existing.region}) for this profile; not creating another")
        if existing.state in IN_PROGRESS:
            err.print(f"{vm} is {existing.state}: waiting for that create to finish")
            existing = finish_existing(existing, tried, staged_spec, providers.__getitem__)
        existing = leaves.record = _started_if_stopped(providers[existing.cloud], existing, start, json_out)
        members = _members(providers[existing.cloud], existing)
        if wait_ready:  # as for a new VM: the startup script's report, verified (same exit codes)
            up_doc = _up_doc(existing, [], exists=True, warnings=warnings, members=members)
            if not json_out:
                _report_up(existing, [], False, exists=True, members=members)
            return up_wait.wait_ready(providers[existing.cloud], existing, ready_timeout, json_out, up_doc, poll)
        return _report_up(existing, [], json_out, exists=True, warnings=warnings, members=members)
    second = same_profile_elsewhere(providers, vm, loaded.hash, vm_name(loaded.profile.name, loaded.hash)) if name is not None else None
    if second is not None:  # --name: never a silent duplicate (issue 36 item 25)
        warnings.append(second)
        if not json_out:
            notice("warning", second)
    first = tried[0]
    use_spot = plan.request.spot

    def quota_warning(text: str) -> None:  # a quota read that failed: `up` goes on as without the check
        warnings.append(text)
        if not json_out:
            notice("warning", text)

    quota = Preflight(providers, spot=use_spot, nodes=nodes, warn=quota_warning)
    checked = _preflight(providers, tried, loaded.profile, vm)  # a refusal stops here: nothing created yet
    for c in checked:
        if c["status"] != "ok" and not json_out:
            notice("warning", f"{c['cloud']}: {c['message']}")
    summary: UpSummary = {**up_summary(loaded, plan, first, spot=use_spot, ssh_from=ssh_from), "preflight": checked}
    summary = {**summary, "quota": [quota.check(first.shape).to_json()]}
    first_choice = baked.choose(first.shape)
    summary = {**summary, "baked_image": first_choice.to_json() if first_choice else None}
    # clouds trainvm provisions on that could not be asked (no credentials): a VM of that name may exist there
    not_checked = [s for s in skipped if s["cloud"] in provider_clouds()]
    summary = {**summary, "clouds_not_checked": [{"cloud": s["cloud"], "reason": s["reason"]} for s in not_checked]}
    if not_checked:
        twin = (f"not checked for a VM named {vm}: {', '.join(s['cloud'] + ' (' + s['reason'] + ')' for s in not_checked)}; "
                f"a VM of that name may already exist there, and `up` would create a second one")
        warnings.append(twin)
        if not json_out:
            notice("warning", twin)
    if not yes:
        if not sys.stdin.isatty():
            what = (f"{nodes} nodes of {first.shape.instance_type} in {first.shape.location}, ${first.price:.2f}/h each, "
                    f"${first.price * nodes:.2f}/h in all" if nodes > 1
                    else f"{first.shape.instance_type} in {first.shape.location}, ${first.price:.2f}/h")
            raise InputError(f"`up` would create {vm} ({what}, failover at most ${plan.failover_bound:.2f}/h"
                             f"{' per node' if nodes > 1 else ''}); pass --yes to confirm when not running interactively")

        for line in summary_lines(summary):
            err.print(line)
        if not typer.confirm(f"Create {vm}" + (f" ({nodes} nodes)?" if nodes > 1 else "?")):
            return 1

    progress = Progress(enabled=not json_out)
    attempt_no = 0

    def spec_for(c: Candidate) -> LaunchSpec:  # called just before each create: the attempt starts
        nonlocal attempt_no
        attempt_no += 1
        progress.start(f"attempt {attempt_no}: {c.shape.cloud} {c.shape.location} {c.shape.instance_type}")
        leaves.attempt = (c.offer, c.price)
        vm_record.note(vm, c.shape.cloud, "up")  # before the create: `down` of this name is then "already gone", never "no VM"
        return staged_spec(c)

    def on_attempt(attempt: Attempt) -> None:
        if attempt.outcome == "no-quota":  # skipped before any create call: no step was started
            progress.line(f"skipped {attempt.cloud} {attempt.region}: {attempt.message}")
            return
        code = f" [{attempt.error_code}]" if attempt.error_code else ""
        progress.end(f"{attempt.outcome}{code} {attempt.message}".rstrip(),
                     "green" if attempt.outcome == "created" else "yellow")

    with progress:
        result = provision(tried, spec_for, providers.__getitem__, on_attempt, max_attempts=max_attempts,
                           bound=plan.failover_bound, name=vm, preflight=lambda c: quota.skip_reason(c.shape))
    record, attempts = result.record, list(result.attempts)
    leaves.record = record
    members = _members(providers[record.cloud], record)
    summary = {**summary, "quota": quota.to_json()}
    if choices and choices[-1] is not None:  # the created VM's: booted a baked image, or why not
        summary = {**summary, "baked_image": choices[-1].to_json()}
        if not json_out:
            err.print(choices[-1].line(), markup=False, highlight=False)
    if summary is not None and staged:
        ref = staged[-1]  # the created VM's payload
        summary = {**summary, "payload": {**summary["payload"], "url": ref.url, "location": ref.store, "sha256": ref.sha256,
                                           "size_bytes": ref.size, "uploaded": ref.uploaded, "refreshed": ref.refreshed,
                                           "access": ref.access}}
        if not json_out:
            how = "refreshed in" if ref.refreshed else "uploaded to" if ref.uploaded else "already in"
            err.print(f"payload: {ref.sha256[:12]} ({ref.size:,} bytes) {how} "
                      f"{ref.store}; the VM reads it with {ref.access}")
    if wait_ready:
        up_doc = _up_doc(record, attempts, exists=False, warnings=warnings, summary=summary, members=members)
        if not json_out:
            _report_up(record, attempts, False, members=members)
        return up_wait.wait_ready(providers[record.cloud], record, ready_timeout, json_out, up_doc, poll)
    return _report_up(record, attempts, json_out, warnings=warnings, summary=summary, members=members)


def _started_if_stopped(provider: Provider, record: InstanceRecord, start: bool, json_out: bool) -> InstanceRecord:
    """``record`` when it runs; a stopped VM is an error (exit 1) saying what it keeps costing and what ``start``
    costs, unless ``start`` (``up --start``): then it is started (compute billing resumes) and returned as it runs."""
    if record.state.upper() not in STOPPED:
        return record
    target = record.cluster or record.name
    nodes = record.nodes if record.cluster else 1
    each = " per node" if nodes > 1 else ""
    kept = "an unknown amount" if record.kept_hourly is None else f"${record.kept_hourly:.3f}/h{each}"
    price, disks = record.price_hourly, record.disks_hourly
    if price is None:
        costs = "its compute price again (not recorded on the VM)"
    elif disks is None:
        costs = f"${price:.3f}/h{each} for compute, plus its disks"
    else:
        costs = f"${price + disks:.3f}/h{each} (compute ${price:.3f} + disks ${disks:.3f})"
    if not start and allocated_while_stopped(record.cloud, record.state):  # e.g. Azure PowerState/stopped: compute still bills
        raise TrainvmError(f"{target} exists on {record.cloud} ({record.zone or record.region}) for this profile but is "
                           f"{record.state} and still allocated: not ready, and `up` did not start it; it keeps billing "
                           f"{costs} while it stays so",
                           hint=f"run the same `trainvm up` with --start to start it; `trainvm stop {target}` deallocates "
                                f"it (compute billing ends); `trainvm down {target}` deletes it")
    if not start:
        raise TrainvmError(f"{target} exists on {record.cloud} ({record.zone or record.region}) for this profile but is "
                           f"stopped ({record.state}): not ready, and `up` did not start it; it keeps costing {kept} while "
                           f"stopped, and starting it bills {costs}",
                           hint=f"run the same `trainvm up` with --start (or `trainvm start {target}`) to start it; "
                                f"`trainvm down {target}` deletes it")
    if not json_out:
        stderr_console().print(f"{target} is stopped ({record.state}): starting it; compute billing resumes at {costs}",
                               markup=False, highlight=False)
    after = provider.start(target, wait=True)
    if after is None:
        raise CloudError(f"{target} disappeared while `up` was starting it", hint="run the same `trainvm up` again")
    return after


def _preflight(providers: dict[str, Provider], tried: list[Candidate], profile: Profile, vm: str) -> list[PreflightResult]:
    """Each planned cloud's ``preflight(profile, name, regions)`` (optional: a provider without one has nothing to
    check before creating): ``{cloud, status: ok|unchecked, message}``; a refusal raises (exit 3)."""
    out = []
    for cloud in dict.fromkeys(c.shape.cloud for c in tried):
        provider = providers[cloud]
        if isinstance(provider, Preflighter):
            out.append(provider.preflight(profile, vm, [c.shape.region for c in tried if c.shape.cloud == cloud]))
    return out


def _ssh(record: InstanceRecord) -> str | None:
    return record.ssh_command or (f"ssh {record.ip}" if record.ip else None)


def _members(provider: Provider, record: InstanceRecord) -> list[InstanceRecord]:
    """The nodes of the cluster ``record`` belongs to, rank order ([] for a single VM)."""
    return provider.cluster_nodes(record.cluster) if record.cluster else []


def _up_doc(record: InstanceRecord, attempts: list[Attempt], exists: bool, warnings: list[str],
            summary: UpSummary | None = None, members: list[InstanceRecord] | None = None) -> dict[str, object]:
    doc: dict[str, object] = {
        "name": record.cluster or record.name, "cloud": record.cloud, "region": record.region, "zone": record.zone,
        "instance_type": record.instance_type, "price_hourly": record.price_hourly, "state": record.state,
        "ip": record.ip, "ssh": _ssh(record), "image": record.image, "existing": exists,
        "attempts": [a.to_json() for a in attempts], "notes": list(record.notes),
        "warnings": list(warnings), "summary": summary,
    }
    if record.cluster:
        price = record.price_hourly
        doc["cluster"] = {"nodes": record.nodes, "price_hourly_per_node": price,
                          "price_hourly": None if price is None else round(price * record.nodes, 6),
                          "members": [{"name": m.name, "rank": m.rank, "state": m.state, "ip": m.ip, "ssh": _ssh(m)}
                                      for m in members or []]}
    return doc


def _report_up(record: InstanceRecord, attempts: list[Attempt], json_out: bool, exists: bool = False,
               warnings: list[str] | None = None, summary: UpSummary | None = None,
               members: list[InstanceRecord] | None = None) -> int:
    if json_out:
        emit_json(_up_doc(record, attempts, exists, warnings or [], summary, members))
        return 0
    out = stdout_console()
    price = f"${record.price_hourly:.2f}/h" if record.price_hourly is not None else "price unknown"
    if record.cluster:
        total = "" if record.price_hourly is None else f" (${record.price_hourly * record.nodes:.2f}/h for the cluster)"
        out.print(styled((record.cluster, "bold"), f": {record.cloud} {record.zone or record.region} {record.nodes} x "
                         f"{record.instance_type} {price} per node{total} {record.state}"))
        for m in members or []:
            out.print(f"  node {m.rank}: {m.name} {m.state} {m.ip or '-'}")
        out.print(f"ssh: trainvm ssh {record.cluster} --node K (K = 0..{record.nodes - 1})")
        if record.image:
            out.print(f"image: {record.image}")
        for note in record.notes:
            out.print(f"note: {note}")
        return 0
    out.print(styled((record.name, "bold"), f": {record.cloud} {record.zone or record.region} {record.instance_type} {price} {record.state}"))
    if record.image:
        out.print(f"image: {record.image}")
    if record.ip:
        out.print(f"ip: {record.ip}")
    if _ssh(record):
        out.print(f"ssh: {_ssh(record) or ''}")
    for note in record.notes:
        out.print(f"note: {note}")
    return 0
