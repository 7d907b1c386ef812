"""``trainvm logs NAME [--follow]``: the VM's console (the startup script's provisioning log with its
``TRAINVM_STATUS`` lines) and the phase timings read from it.

Sources (``Provider.console``): GCE serial port 1 (live); Azure boot diagnostics (the serial log blob,
refreshed by Azure every few minutes, so it lags). ``--follow`` polls until the script reports
``ready`` or ``failed`` (Ctrl-C stops earlier, exit 130)."""

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


def run_logs(name: str, *, follow: bool, json_out: bool, cloud: str | None = None) -> int:
    located = locate_one(check_name(name), providers_for(cloud), "logs")
    if located is None:
        raise not_found(name, cloud)
    _record, provider = located
    interval = env_seconds("TRAINVM_LOGS_POLL_SECONDS", 5.0)
    follower, text = ConsoleFollower(), []
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
        time.sleep(interval)
    whole = "".join(text)
    spans = phase_spans(events(whole))
    if json_out:
        emit_json({"name": name, "status": follower.status, "phase": follower.phase,
                   "phases": [_span_doc(s) for s in spans], "console": whole})
    else:
        if whole and not whole.endswith("\n"):
            sys.stdout.write("\n")
        _print_timings(spans, follower.status)
    return 0
