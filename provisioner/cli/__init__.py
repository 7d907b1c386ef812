"""The ``trainvm`` command line. Commands stay thin: they parse flags, call the stage that does the
work, and print. Heavy modules (pydantic models, rich tables, cloud SDKs) are imported inside the
commands so ``trainvm --help`` stays fast. Every ``TrainvmError`` becomes one readable paragraph
on stderr and its exit code; ``--debug`` shows tracebacks.

The package: ``base`` (the one typer app, its groups, shared options), the commands by subject, each registering
on that app (``profile``: validate, schema, plan, lock, render, catalog; ``vm``: up, status, list, down, stop,
start, logs, ssh; ``images``: bake, images; ``verify``: verify, capture, probe, parity, diff), ``errors`` (the
error output) and, here, ``main`` / ``entry`` (argv, the error funnel, the exit)."""


import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from typer.models import CommandInfo

from provisioner.cli import images, profile, verify, vm  # noqa: F401 - each registers its commands on ``app``
from provisioner.cli.base import app, catalog_app, images_app
from provisioner.cli.errors import emit_error, fail

__all__ = ["app", "catalog_app", "entry", "images_app", "main"]

#: the order ``trainvm --help`` lists the commands in (the workflow's, not the modules'); the groups follow
HELP_ORDER = ("validate", "schema", "plan", "lock", "render", "up", "bake", "status", "list", "down", "stop", "start",
              "verify", "logs", "ssh", "capture", "probe", "parity", "diff")


def _command_name(command: CommandInfo) -> str:
    return command.name or (command.callback.__name__.replace("_", "-") if command.callback else "")


def _in_help_order() -> None:
    """Registration order is the modules' import order; ``--help`` lists in ``HELP_ORDER`` (a command missing from
    it is an error here, at import, rather than a line silently out of place)."""
    missing = [n for n in map(_command_name, app.registered_commands) if n not in HELP_ORDER]
    if missing:
        raise RuntimeError(f"provisioner.cli.HELP_ORDER does not place {missing}")
    app.registered_commands.sort(key=lambda c: HELP_ORDER.index(_command_name(c)))


_in_help_order()


def _split_global_flags(argv: list[str]) -> tuple[list[str], bool, bool, bool]:
    """argv without ``--debug``/``--version`` (accepted before or after the command, not after ``--``),
    and whether they and ``--json`` were given."""
    cut = argv.index("--") if "--" in argv else len(argv)
    head, tail = argv[:cut], argv[cut:]
    debug, version, json_out = "--debug" in head, "--version" in head, "--json" in head
    return [a for a in head if a not in ("--debug", "--version")] + tail, debug, version, json_out


@contextmanager
def _only_invoked_command(args: list[str]) -> Iterator[None]:
    """While ``trainvm CMD ...`` runs, the app holds only CMD. Typer builds every command of a group
    (signature inspection, click parameters) before it parses the line; for one command the other
    nineteen are wasted start-up time. Help, completion, unknown commands and options before the
    command see the whole app. The registration is restored afterwards (tests call main() in-process)."""
    first = args[0] if args else ""
    commands = {_command_name(c): c for c in app.registered_commands if c.callback}
    groups = {g.name: g for g in app.registered_groups}
    saved = app.registered_commands, app.registered_groups
    if first in commands:
        app.registered_commands, app.registered_groups = [commands[first]], []
    elif first in groups:
        app.registered_commands, app.registered_groups = [], [groups[first]]
    try:
        yield
    finally:
        app.registered_commands, app.registered_groups = saved


def main() -> None:
    """Console-script entry point: run the app and map errors to exit codes (docs/spec.md "Exit codes").
    With ``--json`` an error is also one ``{"error": {...}}`` document on stdout."""
    # trainvm uses no pydantic plugins: skip their entry-point scan (pydantic's documented switch)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from provisioner.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TrainvmError  # lazy: startup

    args, debug, version, json_out = _split_global_flags(sys.argv[1:])
    if debug:
        os.environ["TRAINVM_DEBUG"] = "1"
    if version:
        from provisioner import __version__  # lazy: startup

        sys.stdout.write(f"trainvm {__version__}\n")
        sys.exit(0)
    try:
        with _only_invoked_command(args):
            rc = app(args=args, prog_name="trainvm", standalone_mode=False)
        if rc == EXIT_INTERRUPTED:  # typer >= 0.13 turns a KeyboardInterrupt into Exit(130), returned here unsaid
            raise KeyboardInterrupt
        sys.exit(rc if isinstance(rc, int) else 0)
    except TrainvmError as exc:  # an interrupt that says what exists (errors.Aborted) is its own "aborted: ..." line
        fail(exc, exc.exit_code, getattr(exc, "hint", None), json_out=json_out,
              text=str(exc) if exc.exit_code == EXIT_INTERRUPTED else None)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # `trainvm ... | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except (typer.Abort, KeyboardInterrupt) as exc:
        fail(exc, EXIT_INTERRUPTED, None, json_out=json_out, text="aborted")
    except Exception as exc:  # click usage errors and anything unexpected
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):  # click (or typer's vendored click) error
            code = 2 if type(exc).__name__ != "ClickException" else exc.exit_code
            if json_out:
                emit_error(exc, code, None, kind="usage")
            show()
            sys.exit(code)
        fail(exc, EXIT_INTERNAL, "this is a bug in trainvm; rerun with --debug and report the traceback",
              internal=True, json_out=json_out)


def entry() -> None:
    """The ``trainvm`` console script: ``main()``, then exit without interpreter teardown.

    Freeing thousands of catalog records and every imported module costs ~50 ms after the output
    is already written; a CLI need not pay it. Output streams are flushed first, files are closed
    by then, and background threads (e.g. an SDK poller left behind by a timed-out wait) cannot
    delay the exit. In-process callers (tests) use ``main()``, which raises SystemExit as usual."""
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe (e.g. `| head`) must not turn into a traceback
            pass
    os._exit(code)
