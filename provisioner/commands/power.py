"""``trainvm stop`` / ``trainvm start``: end compute billing and keep the VM, or start it again.

What each cloud keeps and bills while stopped comes from providers.lifecycle (one table for plan, up, these
commands and the README)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from provisioner.commands.clouds import check_name, locate_one, providers_for
from provisioner.commands.verify import not_found
from provisioner.errors import CloudError, InputError
from provisioner.output import emit_json, stdout_console
from provisioner.providers.lifecycle import KEPT_BILLING, MECHANISM, SCRATCH_LOST

if TYPE_CHECKING:
    from provisioner.providers.base import InstanceRecord, Provider


def _find(name: str, cloud: str | None, verb: str) -> tuple[InstanceRecord, Provider]:
    """The VM, as down/verify/status find it: a missing VM is exit 4, a name on two clouds is refused."""
    located = locate_one(check_name(name), providers_for(cloud), verb)
    if located is None:
        raise not_found(name, cloud)
    return located


def run_stop(name: str, *, cloud: str | None, yes: bool, wait: bool, json_out: bool) -> int:
    record, provider = _find(name, cloud, "stop")
    keeps = f"{KEPT_BILLING[record.cloud]}; {SCRATCH_LOST}"
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(f"`stop` would stop {name} on {record.cloud}; pass --yes to confirm when not running interactively")

        if not typer.confirm(f"Stop {name} ({record.cloud} {record.zone or record.region})? Compute billing ends; {keeps}."):
            return 1
    try:
        after = provider.stop(name, wait=wait)
    except CloudError as exc:
        raise _stop_failed(name, record, provider, exc) from None
    state = after.state if after else "GONE"
    already = record.state.upper() == "STOPPING"  # an earlier stop still in progress: waited for, or left to end
    if json_out:
        emit_json({"name": name, "cloud": record.cloud, "found": True, "stopped": True, "state": state, "waited": wait,
                   "was": record.state, "already_stopping": already, "how": MECHANISM[record.cloud]["stop"],
                   "keeps_billing": KEPT_BILLING[record.cloud], "lost": SCRATCH_LOST})
        return 0
    out = stdout_console()
    how = (" (already stopping: an earlier stop is in progress)" if already else " (stopping)") if not wait else (
        " (an earlier stop was in progress: it has ended)" if already else "")
    out.print(f"{name}: {state.lower()} ({record.cloud} {record.zone or record.region})" + how
              + f": compute billing ends; {keeps}")
    out.print(f"  `trainvm start {name}` resumes it; `trainvm down {name}` deletes it and everything kept")
    return 0


def _stop_failed(name: str, record: InstanceRecord, provider: Provider, exc: CloudError) -> CloudError:
    """A stop that failed (e.g. the cloud answered 503 again and again) on a VM the cloud says is already STOPPING --
    when it was found, or read again after the failure -- says so: a stop is under way, and goes on without trainvm."""
    was, now = record.state.upper(), None
    if was != "STOPPING":
        try:
            again = provider.find(name)
            now = again.state.upper() if again is not None else None
        except CloudError:
            now = None  # the storm goes on: say only what is known
    if "STOPPING" not in (was, now):
        return exc
    when = "when trainvm found it" if was == "STOPPING" else "when read after the failure"
    exc.args = (f"{name} is already STOPPING ({record.cloud} said so {when}): a stop is under way and ends without "
                f"trainvm; waiting for it failed: {exc}",)
    exc.hint = f"`trainvm status {name}` shows when it has stopped; `trainvm stop {name} --no-wait` does not wait"
    return exc


def run_start(name: str, *, cloud: str | None, wait: bool, json_out: bool) -> int:
    record, provider = _find(name, cloud, "start")
    after = provider.start(name, wait=wait)
    state = after.state if after else "GONE"
    ip = after.ip if after else None
    stopping = record.state.upper() == "STOPPING"  # an earlier stop in progress: the provider waited for it to end
    if json_out:
        emit_json({"name": name, "cloud": record.cloud, "found": True, "started": True, "state": state, "was": record.state,
                   "ip": ip, "waited": wait, "waited_for_stop": stopping})
        return 0
    out = stdout_console()
    out.print(f"{name}: {state.lower()} ({record.cloud} {record.zone or record.region}"
              + (f", {ip}" if ip else "") + ")"
              + (": an earlier stop was in progress: waited for it to end, then started it" if stopping else "")
              + ("" if wait else " (starting)") + ": compute billing resumed")
    out.print("  its startup script runs again: it re-verifies the stack (nothing is reinstalled) and re-stages local data; "
              f"`trainvm verify {name}` once it is ready")
    return 0
