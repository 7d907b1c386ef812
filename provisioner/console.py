"""The ``trainvm`` console script (and ``python -m provisioner``). Importing the command line (typer, click,
the app's commands) takes a few hundred milliseconds; a Ctrl-C in that time, before ``cli.main`` has its
error funnel in place, would otherwise end in a Python traceback and a death by SIGINT. This module imports
nothing but the standard library before it guards the import, so an interrupt at any point is one line and
exit 130 (docs/spec.md "Exit codes"), with ``--json`` also the one ``{"error": ...}`` document."""

from __future__ import annotations

import os
import signal
import sys

EXIT_INTERRUPTED = 130  # provisioner.errors.EXIT_INTERRUPTED, not imported: this module must stay import-free


def interrupted(argv: list[str]) -> None:
    """Say "aborted" (one line; with --json also the error document) and exit 130 at once."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while we say so changes nothing
    except ValueError:  # not the main thread
        pass
    head = argv[:argv.index("--")] if "--" in argv else argv
    try:
        if "--json" in head:
            import json

            doc = {"message": "aborted", "hint": None, "exit_code": EXIT_INTERRUPTED, "type": "KeyboardInterrupt"}
            sys.stdout.write(json.dumps({"error": doc}, indent=2) + "\n")
            sys.stdout.flush()
        sys.stderr.write("aborted\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed pipe must not turn into a traceback
        pass
    os._exit(EXIT_INTERRUPTED)


def entry() -> None:
    try:
        from provisioner.cli import entry as run

        run()  # never returns: cli.entry ends the process with os._exit
    except KeyboardInterrupt:
        interrupted(sys.argv[1:])
