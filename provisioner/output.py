"""Printing: JSON on stdout (one document, nothing else there), human text via rich, warnings and
errors on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from provisioner.messages import Message


def emit_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")


def stdout_console():  # noqa: ANN201 - rich is imported lazily
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)


def stderr_console():  # noqa: ANN201
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else 160)


def print_messages(messages: Iterable[Message]) -> None:
    err = stderr_console()
    for m in messages:
        style = "red" if m.level == "error" else "yellow"
        err.print(f"[{style}]{m.level}[/{style}]: {printable(m.render())}", markup=True, highlight=False)


CONTROL = {**{c: f"\\x{c:02x}" for c in (*range(0, 9), *range(11, 32), 127, *range(0x80, 0xA0))},
           **{c: f"\\u{c:04x}" for c in (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}}


def printable(text: str) -> str:
    """``text`` with terminal control characters (ESC, BEL, C1, bidi overrides...) shown as ``\\xNN``
    escapes, so that nothing from a file or a cloud can drive the terminal; newlines and tabs stay."""
    return text.translate(CONTROL)


def escape(text: str) -> str:
    from rich.markup import escape as _escape

    return _escape(printable(text))
