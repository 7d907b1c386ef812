"""The ``trainvm`` console script (and ``python -m provisioner``). Importing the command line (typer, click,
the app's commands) takes a few hundred milliseconds; a Ctrl-C in that time, before ``cli.main`` has its
error funnel in place, would otherwise end in a Python traceback and a death by SIGINT. This module imports
nothing but the standard library before it guards the import, so an interrupt at any point is one line and
exit 130 (docs/spec.md "Exit codes"), with ``--json`` also the one ``{"error": ...}`` document. SIGTERM (a CI
runner cancelling, ``kill``) is handled as Ctrl-C from the same point on: the command says what it leaves (``up``:
the VM that exists and what it costs) instead of dying without a word.

Only gc, os, signal and sys (loaded already by the interpreter or the launcher's ``import re``) are imported before
``entry`` puts its guard in place; json and threading come later. What runs before this module (interpreter
start-up, site's .pth files, the console-script launcher's ``import re``) is outside any Python guard.

``trainvm --help`` (and ``-h``) is printed by ``helpcache``: typer's text of an earlier run while nothing it was made
from has changed, without importing the command line (issue 37's start-up budget)."""

from __future__ import annotations

import gc
import os
import signal
import sys

EXIT_INTERRUPTED = 130  # provisioner.errors.EXIT_INTERRUPTED, not imported: this module must stay import-free
#: The cyclic garbage collector is off for this long after the process starts (see pause_gc).
GC_PAUSE_SECONDS = 1.0


def interrupted(argv: list[str]) -> None:
    """Say "aborted" (one line; with --json also the error document) and exit 130 at once."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while we say so changes nothing
    except ValueError:  # not the main thread
        pass
    head = argv[:argv.index("--")] if "--" in argv else argv
    try:
        if "--json" in head:
            import json  # lazy: not loaded by the interpreter at start-up (see the module doc)

            doc = {"message": "aborted", "hint": None, "exit_code": EXIT_INTERRUPTED, "type": "KeyboardInterrupt"}
            sys.stdout.write(json.dumps({"error": doc}, indent=2) + "\n")
            sys.stdout.flush()
        sys.stderr.write("aborted\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed pipe must not turn into a traceback
        pass
    os._exit(EXIT_INTERRUPTED)


def pause_gc(seconds: float | None = None) -> object:
    """Turn the cyclic garbage collector off now and back on after ``seconds`` (a daemon timer thread).

    Start-up (imports, the profile model, the catalog) allocates a few hundred thousand objects that all stay
    alive, so the ~100 collections it triggers find nothing (~15 ms of `trainvm plan`, bench/RESULTS.md). A
    command that runs longer (`up`, `logs --follow`) collects as usual once the timer fires; a short one ends
    first (``cli.entry`` exits with ``os._exit``). Reference counting frees everything else as always."""
    import threading  # lazy: not loaded by the interpreter at start-up (see the module doc)

    gc.disable()
    timer = threading.Timer(GC_PAUSE_SECONDS if seconds is None else seconds, gc.enable)
    timer.daemon = True
    timer.start()
    return timer


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: a KeyboardInterrupt in the main thread, so every command's interrupt path runs."""
    raise KeyboardInterrupt


def entry() -> None:
    try:
        signal.signal(signal.SIGTERM, _terminated)
        from provisioner import helpcache  # lazy: Ctrl-C guard (exit 130)

        argv = sys.argv[1:]
        if helpcache.replay(argv):  # `trainvm --help`: typer's text of an earlier run, while still the same
            os._exit(0)  # printed and flushed; no start-up left to pause the garbage collector for
        pause_gc()
        code = helpcache.run(argv)  # a help request the cache could not answer: typer prints it, and it is kept
        if code is not None:
            try:
                sys.stderr.flush()  # stdout is flushed: as cli.entry ends, without interpreter teardown
            except Exception:  # noqa: BLE001 - a closed pipe must not turn into a traceback
                pass
            os._exit(code)
        from provisioner.cli import entry as run  # lazy: Ctrl-C guard (exit 130)

        run()  # never returns: cli.entry ends the process with os._exit
    except KeyboardInterrupt:
        interrupted(sys.argv[1:])
