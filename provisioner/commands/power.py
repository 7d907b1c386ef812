"""``trainvm stop`` / ``trainvm start``: end compute billing and keep the VM, or start it again.

What each cloud keeps and bills while stopped comes from providers.lifecycle (one table for plan, up, these
commands and the README)."""

from __future__ import annotations

import sys

from provisioner.commands.clouds import _credentialed
from provisioner.errors import CloudError, InputError
from provisioner.output import emit_json, stdout_console
from provisioner.providers.lifecycle import KEPT_BILLING, MECHANISM, SCRATCH_LOST


def _find(name: str, cloud: str | None):
    providers = _credentialed()
    if cloud is not None:
        if cloud not in providers:
            raise CloudError(f"no credentials for {cloud} (clouds with credentials: {', '.join(providers) or 'none'})")
        providers = {cloud: providers[cloud]}
    found = [(r, p) for p in providers.values() if (r := p.find(name)) is not None]
    if len(found) > 1:
        raise InputError(f"{name} exists on {' and '.join(r.cloud for r, _ in found)}; pass --cloud to choose one")
    return found[0] if found else None


def run_stop(name: str, *, cloud: str | None, yes: bool, wait: bool, json_out: bool) -> int:
    located = _find(name, cloud)
    if located is None:
        if json_out:
            emit_json({"name": name, "stopped": False, "found": False})
        else:
            stdout_console().print(f"{name}: no such trainvm VM")
        return 1
    record, provider = located
    keeps = f"{KEPT_BILLING[record.cloud]}; {SCRATCH_LOST}"
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(f"`stop` would stop {name} on {record.cloud}; pass --yes to confirm when not running interactively")
        import typer

        if not typer.confirm(f"Stop {name} ({record.cloud} {record.zone or record.region})? Compute billing ends; {keeps}."):
            return 1
    after = provider.stop(name, wait=wait)
    state = after.state if after else "GONE"
    if json_out:
        emit_json({"name": name, "cloud": record.cloud, "found": True, "stopped": True, "state": state, "waited": wait,
                   "was": record.state, "how": MECHANISM[record.cloud]["stop"], "keeps_billing": KEPT_BILLING[record.cloud],
                   "lost": SCRATCH_LOST})
        return 0
    out = stdout_console()
    out.print(f"{name}: {state.lower()} ({record.cloud} {record.zone or record.region})"
              + ("" if wait else " (stopping)") + f": compute billing ends; {keeps}")
    out.print(f"  `trainvm start {name}` resumes it; `trainvm down {name}` deletes it and everything kept")
    return 0


def run_start(name: str, *, cloud: str | None, wait: bool, json_out: bool) -> int:
    located = _find(name, cloud)
    if located is None:
        if json_out:
            emit_json({"name": name, "started": False, "found": False})
        else:
            stdout_console().print(f"{name}: no such trainvm VM")
        return 1
    record, provider = located
    after = provider.start(name, wait=wait)
    state = after.state if after else "GONE"
    ip = after.ip if after else None
    if json_out:
        emit_json({"name": name, "cloud": record.cloud, "found": True, "started": True, "state": state, "was": record.state,
                   "ip": ip, "waited": wait})
        return 0
    out = stdout_console()
    out.print(f"{name}: {state.lower()} ({record.cloud} {record.zone or record.region}"
              + (f", {ip}" if ip else "") + "): compute billing resumed")
    out.print("  its startup script runs again: it re-verifies the stack (nothing is reinstalled) and re-stages local data; "
              f"`trainvm verify {name}` once it is ready")
    return 0
