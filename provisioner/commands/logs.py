"""``trainvm logs NAME [--follow]``: the VM's console (the startup script's provisioning log with its
``TRAINVM_STATUS`` lines) and the phase timings read from it.

Sources (``Provider.console``): GCE serial port 1 (live); Azure boot diagnostics (the serial log blob,
refreshed by Azure every few minutes, so it lags). ``--follow`` says at once what it waits for (on stderr, so that
stdout stays the console), prints the console as it grows and polls (``TRAINVM_LOGS_POLL_SECONDS``) until the
script reports ``ready`` or ``rehearsed`` (a profile rehearsed without a GPU: ``trainvm verify`` judges it; exit 0)
or ``failed`` (exit 1), or until ``--timeout`` seconds (default 1800): then it
says so, names the last phase and exits 5 (not ready yet). Ctrl-C stops earlier, exit 130."""

from __future__ import annotations

import sys
import time

from provisioner.commands.clouds import check_name, locate_one, providers_for
from provisioner.commands.verify import not_found
from provisioner.output import emit_json, stdout_console, styled
from provisioner.settings import env_seconds
from provisioner.verify.console import ConsoleFollower, PhaseSpan, events, phase_spans


def _span_doc(span: PhaseSpan) -> dict[str, object]:
    return {"phase": span.phase, "result": span.result, "seconds": span.seconds,
            "started": span.started.isoformat() if span.started else None,
            "ended": span.ended.isoformat() if span.ended else None}


def _print_timings(spans: list[PhaseSpan], status: str | None) -> None:
    out = stdout_console()
    out.print(styled(("phase timings", "bold"), f" (status: {status or 'no status line yet'})"))
    for span in spans:
        secs = "running" if span.seconds is None and span.result is None else (
            "-" if span.seconds is None else f"{span.seconds:.0f} s")
        out.print(f"  {span.phase:<10} {span.result or '':<9} {secs}")


FOLLOW_TIMEOUT = 1800.0


def _say(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def run_logs(name: str, *, follow: bool, json_out: bool, cloud: str | None = None,
             timeout: float = FOLLOW_TIMEOUT) -> int:
    located = locate_one(check_name(name), providers_for(cloud), "logs")
    if located is None:
        raise not_found(name, cloud)
    record, provider = located
    interval = env_seconds("TRAINVM_LOGS_POLL_SECONDS", 5.0)
    follower, text = ConsoleFollower(), []
    start = time.monotonic()
    timed_out = False
    if follow and not json_out:
        _say(f"waiting for the console of {name} ({record.cloud} {record.zone or record.region}) until its startup "
             f"script reports ready or failed, at most {timeout:g} s (--timeout); Ctrl-C stops")
    while True:
        chunk = provider.console(name, follower.offset)
        if chunk is None:
            raise not_found(name)
        follower.feed(*chunk)
        text.append(chunk[0])
        if not json_out and chunk[0]:
            sys.stdout.write(chunk[0])
            sys.stdout.flush()
        final = follower.status is not None and not follower.status.startswith("running:")
        if not follow or final:
            break
        if time.monotonic() - start + interval > timeout:
            timed_out = True
            break
        time.sleep(interval)
    whole = "".join(text)
    spans = phase_spans(events(whole))
    failed = (follower.status or "").startswith("failed")
    code = 5 if timed_out else (1 if follow and failed else 0)
    if json_out:
        emit_json({"name": name, "status": follower.status, "phase": follower.phase,
                   "phases": [_span_doc(s) for s in spans], "console": whole,
                   **({"followed": True, "timed_out": timed_out} if follow else {})})
        return code
    if whole and not whole.endswith("\n"):
        sys.stdout.write("\n")
    _print_timings(spans, follower.status)
    if timed_out:
        where = f"in phase {follower.phase}" if follower.phase else "before its first phase (no status line yet)"
        _say(f"stopped following after {time.monotonic() - start:.0f} s (--timeout {timeout:g}): {name} has not "
             f"reported ready or failed, {where}; `trainvm logs {name} --follow` goes on")
    elif follow:
        _say(f"{name}: startup script {follower.status}" + (f" (phase {follower.phase})" if failed and follower.phase else ""))
    return code
