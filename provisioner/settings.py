"""Numeric settings read from the environment (timeouts, polling and backoff intervals)."""

from __future__ import annotations

import os

from provisioner.errors import InputError


def env_seconds(name: str, default: float) -> float:
    """``$name`` as non-negative seconds, ``default`` when unset or empty; anything else is an input error (exit 2)."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{name}={raw!r} is not a number of seconds") from None
    if value < 0 or value != value:
        raise InputError(f"{name}={raw!r} must be a non-negative number of seconds")
    return value
