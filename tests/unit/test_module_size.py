"""No module in provisioner/ over 400 lines (issue 37, "Shape as a maintainer means it"): a module that grows past it
is split by what it holds (render/context.py per phase, commands/up.py's wait for the startup script)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "provisioner"
MAX_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    over = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"
