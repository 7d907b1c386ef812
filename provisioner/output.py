"""Printing: JSON on stdout (one document, nothing else there), human text via rich, warnings and
errors on stderr.

Text from users and clouds (profile values, YAML keys, cloud error messages, console lines) is never
interpreted as rich markup: the two consoles below are the one place that decides it, with markup,
emoji codes and highlighting off. Styling is explicit: :func:`styled` builds a line from plain strings
and ``(text, style)`` pairs."""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.errors import InputError
from provisioner.messages import Message

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text


def os_error_words(exc: OSError, path: Path, *, folder: bool) -> str:
    """What went wrong writing ``path`` (a folder to create when ``folder``, else a file), in the user's words,
    without "[Errno 17]"."""
    where = Path(exc.filename) if isinstance(exc.filename, str) else path
    code = exc.errno or 0
    if code in (errno.EEXIST, errno.ENOTDIR):
        # the path itself, or a folder above it, is a file
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), where)
        if blocker == path:
            return "is a file, not a folder; give a folder (it is created if missing)" if folder else "is not a file"
        return f"{blocker} is a file, not a folder"
    if code == errno.ENOENT:
        return f"no such folder: {path.parent}"
    if code == errno.EISDIR:
        return "is a folder; give a file name"
    if code in (errno.EACCES, errno.EPERM):
        return f"permission denied ({where})"
    if code == errno.ENAMETOOLONG:
        return "the name is too long for the file system"
    return f"{exc.strerror or exc} ({where})"


def write_output(path: Path, data: str | bytes, flag: str) -> None:
    """Write a command's output file (``-o``/``--out``); an input error (exit 2) in user words when it cannot."""
    try:
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
    except OSError as exc:
        raise InputError(f"{flag} {path}: {os_error_words(exc, path, folder=False)}") from None


def check_output_file(path: Path, flag: str) -> None:
    """Refuse, before any work is done, an output file (``-o``/``--out``) that cannot be written: a folder, or a
    parent that is missing or a file. The same words as :func:`write_output` (exit 2)."""
    if path.is_dir():
        code = errno.EISDIR
    elif not path.parent.is_dir():
        code = errno.ENOTDIR if any(p.exists() and not p.is_dir() for p in path.parents) else errno.ENOENT
    else:
        return
    exc = OSError(code, os.strerror(code), str(path))
    raise InputError(f"{flag} {path}: {os_error_words(exc, path, folder=False)}")


def emit_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")


def stdout_console() -> Console:  # rich is imported lazily (the annotation is a string: TYPE_CHECKING above)
    from rich.console import Console

    return Console(highlight=False, markup=False, emoji=False, soft_wrap=True,
                   width=None if sys.stdout.isatty() else 160)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True,
                   width=None if sys.stderr.isatty() else 160)


def styled(*parts: str | tuple[str, str]) -> Text:  # rich.text.Text, imported lazily
    """One line from plain strings and ``(text, style)`` pairs; nothing in them is parsed as markup."""
    from rich.text import Text

    return Text.assemble(*parts)


LEVEL_STYLE = {"error": "red", "warning": "yellow", "note": "yellow", "skipped": "yellow", "not asked": "yellow"}


def notice(level: str, text: str) -> None:
    """``level: text`` on stderr (level coloured on a terminal)."""
    stderr_console().print(styled((level, LEVEL_STYLE.get(level, "")), ": ", text))


def print_messages(messages: Iterable[Message]) -> None:
    err = stderr_console()
    for m in messages:
        err.print(styled((m.level, LEVEL_STYLE[m.level]), ": ", printable(m.render())))


CONTROL = {**{c: f"\\x{c:02x}" for c in (*range(0, 9), *range(11, 32), 127, *range(0x80, 0xA0))},
           **{c: f"\\u{c:04x}" for c in (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}}


def printable(text: str) -> str:
    """``text`` with terminal control characters (ESC, BEL, C1, bidi overrides...) shown as ``\\xNN``
    escapes, so that nothing from a file or a cloud can drive the terminal; newlines and tabs stay."""
    return text.translate(CONTROL)


def escape(text: str) -> str:
    """Control characters made visible (:func:`printable`). Markup needs no escaping: the consoles
    print text verbatim. New code styles with :func:`styled`."""
    return printable(text)
