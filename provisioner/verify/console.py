"""Reading the startup script's console protocol from a VM's console output (GCE serial port 1, Azure
boot diagnostics): ``TRAINVM_STATUS=<running:PHASE|ready|rehearsed|baked|failed:PHASE:LINE>`` (``baked``: a bake builder, docs/bake.md;
``rehearsed``: a profile rehearsed on a machine without a GPU, ``CloudSpec.rehearsal``) lines and the script's
log lines ``<ISO time> trainvm <PHASE>: phase start`` / ``phase end: <result>`` (``tv_log``), which
carry the phase timings. The console may prefix every line (``google_metadata_script_runner[812]:
startup-script: ``, ``cloud-init[812]: ``), so matches are not anchored. Pure: no cloud calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

STATUS_LINE_RE = re.compile(r"TRAINVM_STATUS=(ready|rehearsed|baked|running:[\w.-]+|failed:[\w.-]+:\d*)")
LOG_LINE_RE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}) trainvm ([\w.-]+): (.*)$")


@dataclass(frozen=True)
class ConsoleEvent:
    """One protocol event: ``kind`` is "status" (``value`` = the status), "start" or "end" of a phase
    (``value`` = the phase's result for "end")."""

    kind: str
    phase: str | None
    value: str | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class PhaseSpan:
    phase: str
    started: datetime | None
    ended: datetime | None = None
    result: str | None = None

    @property
    def seconds(self) -> float | None:
        if self.started is None or self.ended is None:
            return None
        return (self.ended - self.started).total_seconds()


def _phase_of(status: str) -> str | None:
    parts = status.split(":")
    return parts[1] if len(parts) > 1 else None


def events(text: str) -> list[ConsoleEvent]:
    """The protocol events of ``text`` (whole lines), in order."""
    found: list[ConsoleEvent] = []
    for line in text.splitlines():
        m = STATUS_LINE_RE.search(line)
        if m:
            found.append(ConsoleEvent("status", _phase_of(m.group(1)), m.group(1)))
            continue
        m = LOG_LINE_RE.search(line)
        if not m:
            continue
        at, phase, message = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S%z"), m.group(2), m.group(3).strip()
        if message == "phase start":
            found.append(ConsoleEvent("start", phase, None, at))
        elif message.startswith("phase end:"):
            found.append(ConsoleEvent("end", phase, message.split(":", 1)[1].strip(), at))
    return found


def phase_spans(evs: Iterable[ConsoleEvent]) -> list[PhaseSpan]:
    """Each phase of the latest run with its start, end and result (a failed phase has no "end"
    line: its end is the ``failed:`` status)."""
    spans: dict[str, PhaseSpan] = {}
    for ev in evs:
        if ev.kind == "start" and ev.phase:
            if ev.phase in spans:  # a new run (reboot, re-run) starts over
                spans = {}
            spans[ev.phase] = PhaseSpan(ev.phase, ev.at)
        elif ev.kind == "end" and ev.phase in spans:
            spans[ev.phase] = PhaseSpan(ev.phase, spans[ev.phase].started, ev.at, ev.value)
        elif ev.kind == "status" and ev.value and ev.value.startswith("failed:") and ev.phase in spans:
            span = spans[ev.phase]
            spans[ev.phase] = PhaseSpan(span.phase, span.started, span.ended, span.result or "failed")
    return list(spans.values())


class ConsoleFollower:
    """Feeds console text as it arrives (chunks may split lines) and yields the new events."""

    def __init__(self) -> None:
        self.offset = 0
        self._tail = ""
        self.status: str | None = None
        self.phase: str | None = None

    def feed(self, text: str, next_offset: int) -> list[ConsoleEvent]:
        self.offset = next_offset
        text = self._tail + text
        cut = text.rfind("\n") + 1
        self._tail = text[cut:]
        new = events(text[:cut])
        for ev in new:
            if ev.kind == "status":
                self.status = ev.value
                self.phase = ev.phase or self.phase
            elif ev.kind == "start":
                self.phase = ev.phase
        return new
