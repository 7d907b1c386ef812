"""What `up` shows while it works (provisioner/provision/progress.py): plain lines when stderr is not a
terminal, a live rich line on a terminal, nothing with --json; cloud text is shown, never obeyed."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from provisioner.provision.progress import Progress
from tests.conftest import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _progress(*, live: bool, enabled: bool = True) -> tuple[Progress, io.StringIO]:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=live, width=100, highlight=False, markup=False, emoji=False)
    return Progress(enabled=enabled, live=live, console=console), buf


def _steps(p: Progress) -> None:
    with p:
        p.start("attempt 1: gcp us-central1-a n1-standard-8")
        p.end("STOCKOUT no capacity", "red")
        p.start("phase driver")
        p.start("phase cuda")  # the previous step ends without a verdict
        p.end("done", "green")
        p.line("startup script: ready")


def test_plain_lines_when_not_a_terminal() -> None:
    p, buf = _progress(live=False)
    _steps(p)
    assert buf.getvalue().splitlines() == [
        "attempt 1: gcp us-central1-a n1-standard-8 ...",
        "attempt 1: gcp us-central1-a n1-standard-8: STOCKOUT no capacity (0s)",
        "phase driver ...",
        "phase driver (0s)",
        "phase cuda ...",
        "phase cuda: done (0s)",
        "startup script: ready",
    ]
    assert not ANSI.search(buf.getvalue())  # a pipe or a CI log gets no control codes


def test_live_line_on_a_terminal_keeps_only_the_finished_steps() -> None:
    p, buf = _progress(live=True)
    _steps(p)
    out = buf.getvalue()
    assert p._bar is None  # the live display was started and stopped
    assert "\x1b[?25l" in out and "\x1b[?25h" in out  # cursor hidden while live, shown again
    shown = ANSI.sub("", out)
    for done in ("attempt 1: gcp us-central1-a n1-standard-8: STOCKOUT no capacity (0s)", "phase driver (0s)",
                 "phase cuda: done (0s)", "startup script: ready"):
        assert done in shown
    # the plain "... " start lines are the non-terminal form; on a terminal the live line replaces them
    assert "phase cuda ...\n" not in shown


def test_disabled_shows_nothing() -> None:
    p, buf = _progress(live=True, enabled=False)
    _steps(p)
    assert buf.getvalue() == ""


def test_elapsed_time_is_shown_in_minutes_past_a_minute(monkeypatch) -> None:
    p, buf = _progress(live=False)
    now = [1000.0]
    monkeypatch.setattr("provisioner.provision.progress.time.monotonic", lambda: now[0])
    p.start("phase packages")
    now[0] += 125
    assert p.end("done") == 125
    assert buf.getvalue().splitlines()[-1] == "phase packages: done (2m05s)"


@pytest.mark.parametrize("live", [False, True], ids=["plain", "live"])
def test_cloud_text_in_a_step_is_shown_not_obeyed(live: bool) -> None:
    p, buf = _progress(live=live)
    with p:
        p.start("attempt 1: [bold]zone[/bold] \x1b]0;pwned\x07")
        p.end("QUOTA_EXCEEDED \x1b[2J[red]x[/red]", "red")
    shown = buf.getvalue()
    assert "\x1b]0;" not in shown and "\x1b[2J" not in shown and "\x07" not in shown
    assert "[bold]zone[/bold]" in shown and "[red]x[/red]" in shown and "\\x1b[2J" in shown


def _fake_tty(monkeypatch) -> None:
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def test_up_wait_ready_on_a_terminal_is_live_and_json_stays_silent(cli, clouds, monkeypatch) -> None:
    from tests.cli.test_cloud_cli import REPORT

    fake = clouds["gcp"]
    original = fake.create

    def create(spec, offer):  # the VM reports ready with the profile's stack
        rec = original(spec, offer)
        fake.reports[spec.name] = dict(REPORT, packages={**REPORT["packages"], "datasets": "2.21.0", "accelerate": "0.34.2"})
        fake.consoles[spec.name] = "TRAINVM_STATUS=running:driver\nTRAINVM_STATUS=ready\n"
        return rec

    fake.create = create
    _fake_tty(monkeypatch)
    r = cli("up", T4, "--yes", "--wait-ready", "--cloud", "gcp", "--ready-timeout", "20")
    assert r.code == 0, r.err
    assert "\x1b[?25l" in r.err  # the live line ran on the "terminal"
    shown = ANSI.sub("", r.err)
    assert re.search(r"attempt 1: gcp \S+ \S+: created \S+ \(\d+s\)", shown), shown
    assert re.search(r"phase driver: ready \(\d+s\)", shown) and "startup script: ready" in shown, shown
    r = cli("up", T4, "--yes", "--wait-ready", "--cloud", "gcp", "--json", "--name", "trainvm-json-1", "--ready-timeout", "20")
    assert r.code == 0 and r.err == "" and json.loads(r.out)["name"] == "trainvm-json-1"
