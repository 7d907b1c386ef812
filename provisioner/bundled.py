"""Where the bundled templates/ and profiles/ live (the one place that knows): inside the installed wheel
(``provisioner/templates``), or at the top of a source checkout."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    inside = _PKG / name
    if inside.is_dir():
        return inside
    return _PKG.parent / name


def templates_dir() -> Path:
    return _find("templates")


def profiles_dir() -> Path:
    return _find("profiles")
