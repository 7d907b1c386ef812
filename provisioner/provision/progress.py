"""What ``up`` shows while it works: one step at a time (a create attempt, a startup phase), with the
elapsed time.

On a terminal (stderr) the current step is a live rich line with a spinner and a ticking clock, and
each finished step stays as a plain line. Elsewhere (a pipe, CI logs) every start and end is one plain
line. With ``--json`` nothing is shown (``Progress(enabled=False)``): stdout carries only the document.
Labels and verdicts carry cloud text (error messages, zone names): terminal control characters in them are
shown escaped (``output.printable``), and nothing in them is read as markup.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from provisioner.output import printable, stderr_console, styled

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as Bar
    from rich.progress import TaskID
    from rich.text import Text


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    def __init__(self, enabled: bool = True, live: bool | None = None, console: Console | None = None) -> None:
        self.enabled = enabled
        self.console = console if console is not None else stderr_console()
        self.live = enabled and (sys.stderr.isatty() if live is None else live)
        self._bar: Bar | None = None
        self._task: TaskID | None = None
        self._label: str | None = None
        self._t0 = 0.0

    # ---------------------------------------------------------------------------------------------- steps
    def start(self, label: str) -> None:
        """A step begins (the previous one, if still open, ends without a verdict)."""
        if self._label is not None:
            self.end()
        self._label, self._t0 = printable(label), time.monotonic()
        if not self.enabled:
            return
        if self.live:
            if self._bar is None:
                from rich.progress import Progress as Bar
                from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

                self._bar = Bar(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                                console=self.console, transient=True)
                self._bar.start()
            self._task = self._bar.add_task(self._label, total=None)
        else:
            self.console.print(f"{self._label} ...")

    def end(self, verdict: str = "", style: str = "") -> float:
        """The open step ends; prints ``label: verdict (elapsed)``. Returns the elapsed seconds."""
        elapsed = time.monotonic() - self._t0
        label, self._label = self._label, None
        if label is None:
            return 0.0
        if self._bar is not None and self._task is not None:
            self._bar.remove_task(self._task)
            self._task = None
        self.line(styled(label, ": " if verdict else "", (printable(verdict), style), f" ({_clock(elapsed)})"))
        return elapsed

    def line(self, text: str | Text) -> None:
        if not self.enabled:
            return
        if isinstance(text, str):
            text = printable(text)
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            self.console.print(text)

    @property
    def current(self) -> str | None:
        return self._label

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def close(self) -> None:
        if self._label is not None:
            self.end()
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
