"""Plain helpers shared by test modules (import them: ``from tests.helpers import REPO``). Fixtures stay in
conftest.py, which pytest loads itself; importing conftest as a module would load it twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "profiles" / "examples").glob("*.yaml"))
BASES = sorted((REPO / "profiles" / "base").glob("*.yaml"))

STACK = {
    "os": "ubuntu-22.04",
    "driver": "550.127.05",
    "cuda": "12.4",
    "python": "3.11.9",
    "packages": ["torch==2.4.1+cu124"],
}


def make_profile(hardware: dict[str, Any] | None = None, **stack: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": "t", "stack": {**STACK, **stack}}
    if hardware is not None:
        doc["hardware"] = hardware
    return doc
