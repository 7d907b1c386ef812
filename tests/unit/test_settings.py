"""Every TRAINVM_* setting is read through provisioner/settings.py and documented in docs/settings.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provisioner import settings

ROOT = Path(__file__).resolve().parents[2]
# a read of a TRAINVM_* variable (not an assignment, which is how --debug / --resolve-image set them)
READ = re.compile(r"""(environ\.get\(\s*["']TRAINVM_|getenv\(\s*["']TRAINVM_|environ\[\s*["']TRAINVM_[A-Z0-9_]+["']\s*\](?!\s*=[^=]))""")


def test_no_module_reads_a_trainvm_variable_directly() -> None:
    offenders = []
    for path in sorted((ROOT / "provisioner").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "provisioner/settings.py" or rel.startswith(("provisioner/perfprobe/", "provisioner/agent/")):
            continue  # perfprobe and the agent run on the VM without trainvm's other modules (TRAINVM_ROOT there)
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if READ.search(line):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "read TRAINVM_* settings through provisioner.settings (text/flag/is_set/seconds):\n" + "\n".join(offenders)


def test_every_setting_named_in_the_code_is_in_the_table() -> None:
    named = set()
    for path in (ROOT / "provisioner").rglob("*.py"):
        if path.parts[-2] == "perfprobe":
            continue
        for m in re.finditer(r"""settings\.\w+\(\s*["'](TRAINVM_[A-Z0-9_]+)["']|env_seconds\(\s*["'](TRAINVM_[A-Z0-9_]+)["']""", path.read_text()):
            named.add(m.group(1) or m.group(2))
    assert named and named <= set(settings.SETTINGS), named - set(settings.SETTINGS)


def test_docs_list_exactly_the_settings() -> None:
    doc = (ROOT / "docs" / "settings.md").read_text()
    rows = re.findall(r"^\| `(TRAINVM_[A-Z0-9_]+)` \|", doc, re.M)
    assert rows == list(settings.SETTINGS)


def test_unknown_setting_is_a_programming_error() -> None:
    with pytest.raises(KeyError, match="not a trainvm setting"):
        settings.text("TRAINVM_NO_SUCH_THING")


def test_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINVM_FROZEN", "0")
    monkeypatch.setenv("TRAINVM_NO_CACHE", "0")
    monkeypatch.setenv("TRAINVM_CATALOG", "  /x  ")
    assert not settings.flag("TRAINVM_FROZEN") and settings.is_set("TRAINVM_NO_CACHE")
    assert settings.text("TRAINVM_CATALOG") == "/x"
    monkeypatch.delenv("TRAINVM_TODAY", raising=False)
    assert settings.text("TRAINVM_TODAY", "d") == "d"
