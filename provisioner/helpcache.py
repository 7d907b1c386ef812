"""``trainvm --help`` without importing the command line: the text typer printed last time, printed again while
nothing it was made from has changed.

Importing typer (and the click it vendors) costs more than the whole start-up budget of ``--help`` (issue 37:
<= 5x ``python -c pass``; typer alone is ~5.6x, bench/RESULTS.md). The top-level help is a function of the code that
prints it and of a few inputs, so the console script (``console.entry``) keeps typer's own output in the user's
cache folder together with what it was a function of, and prints it again only when all of it is unchanged:

* every module file loaded while it was printed (trainvm's ``cli`` package, typer, click, the standard library):
  path, modification time and size; and each ``sys.path`` entry's (one missing then: that it is still missing),
  so that an install or upgrade misses;
* the interpreter, ``sys.path``, the arguments, the terminal's width (``COLUMNS``, the size of stdout's terminal:
  what click reads to wrap) and the environment variables typer, click and trainvm read.

On a miss the command runs as always (``provisioner.cli.main``); its output is captured on the way to stdout and
stored when it exits 0 having written nothing to stderr. Only ``trainvm --help`` and ``trainvm -h`` are served, and
not for shell completion (``_TRAINVM_COMPLETE``). ``TRAINVM_NO_CACHE=1`` turns it off: nothing is stored while it is
set, and as the key holds every ``TRAINVM_*`` variable, no text stored without it is printed with it (so a hit needs
no ``provisioner.settings``, whose ``typing`` import alone costs a few ms). A cache that cannot be read or written
only costs the usual start-up. Before a miss this module imports only what the interpreter has loaded already
(``marshal``, ``os``, ``sys``)."""

from __future__ import annotations

import marshal
import os
import sys

#: the arguments whose output is kept (the top-level help)
HELP_ARGS = (["--help"], ["-h"])
FORMAT = 1
#: set by the shell's completion script: typer then completes the line instead of printing help
COMPLETION_VAR = "_TRAINVM_COMPLETE"
#: environment variables (by prefix) that typer, click or trainvm may read while printing help
ENV_PREFIXES = ("TYPER", "_TYPER", "CLICK", "_CLICK", "TRAINVM", "_TRAINVM", "COLUMNS", "LINES", "TERM", "NO_COLOR",
                "FORCE_COLOR", "PYTHON", "PYDANTIC", "LANG", "LC_")

Stamp = tuple[str, int, int]
#: format, interpreter version and path, sys.path, the arguments, the terminal's columns, the environment read
Key = tuple[int, str, str, tuple[str, ...], tuple[str, ...], int | None, tuple[tuple[str, str], ...]]


def cache_file() -> str:
    """The file in trainvm's cache folder (the one ``provisioner.cache.cache_dir`` names; no pathlib here)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "trainvm", "help.marshal")


def _columns() -> int | None:
    """The width of stdout's terminal as ``shutil.get_terminal_size`` asks it (None: not a terminal)."""
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return None


def key(argv: list[str]) -> Key:
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)))
    return (FORMAT, sys.version, sys.executable, tuple(sys.path), tuple(argv), _columns(), env)


def _stat(path: str) -> Stamp:
    """(path, mtime, size); (path, -1, -1) for a path that does not exist (a ``sys.path`` entry that may appear)."""
    try:
        st = os.stat(path)
    except OSError:
        return (path, -1, -1)
    return (path, st.st_mtime_ns, st.st_size)


def stamps() -> tuple[Stamp, ...]:
    """(path, mtime, size) of every module file loaded now and of every entry of ``sys.path``."""
    files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
    return tuple(map(_stat, sorted({f for f in files if isinstance(f, str)} | {p for p in sys.path if p})))


def lookup(argv: list[str]) -> str | None:
    """The help text kept for ``argv`` when nothing it was made from has changed, else None."""
    try:
        with open(cache_file(), "rb") as fh:
            kept_key, kept_stamps, text = marshal.loads(fh.read())
    except Exception:  # noqa: BLE001 - missing, truncated, another Python's marshal format: a miss
        return None
    if kept_key != key(argv) or not isinstance(text, str):
        return None
    for path, mtime, size in kept_stamps:
        if _stat(path) != (path, mtime, size):
            return None
    return text


def store(argv: list[str], text: str, the_key: Key) -> None:
    """Keep ``text`` for ``argv`` (written to a temporary file, then renamed: a reader never sees half of it)."""
    path = cache_file()
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(marshal.dumps((the_key, stamps(), text)))
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a read-only home, a full disk: just don't keep it
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `trainvm --help | head`: the reader has all it wanted (as cli.main says it)
        pass


def wanted(argv: list[str]) -> bool:
    """Whether ``argv`` asks for the kept help (not for shell completion, where typer completes the line)."""
    return argv in HELP_ARGS and COMPLETION_VAR not in os.environ


def replay(argv: list[str]) -> bool:
    """Print the kept help for ``argv`` when it is still what typer would print; False: nothing printed."""
    text = lookup(argv) if wanted(argv) else None
    if text is None:
        return False
    _write(text)
    return True


def run(argv: list[str]) -> int | None:
    """After a :func:`replay` that printed nothing: let typer print the help for ``argv`` (``provisioner.cli.main``),
    keep it, and return the exit code; None when ``argv`` is not a help request (the caller runs the command line
    as usual)."""
    if not wanted(argv):
        return None
    the_key = key(argv)
    import contextlib  # lazy: startup (the miss only)
    import io  # lazy: startup (the miss only)

    from provisioner import settings  # lazy: startup (the miss only)
    from provisioner.cli import main  # lazy: startup (the miss only: typer)

    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code
    finally:  # what the command printed, also when main() did not end normally
        _write(out.getvalue())
        sys.stderr.write(err.getvalue())
    if code not in (0, None):
        return code if isinstance(code, int) else 1
    if not err.getvalue() and not settings.is_set("TRAINVM_NO_CACHE"):  # a run that said more is not replayed
        store(argv, out.getvalue(), the_key)
    return 0
