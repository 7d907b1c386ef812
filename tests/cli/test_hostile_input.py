"""Faults and hostile input (issue 30): each is a clear message with the project's exit code, never an
internal error (70) or a traceback."""

from __future__ import annotations

import pytest

BASE = 'hardware: {gpu: T4}\nstack: {os: ubuntu-22.04, driver: "550.127.05", cuda: "12.4", python: "3.11.9", packages: [torch==2.4.1+cu124]}\n'
HUGE_HEX, HUGE_OCT = "0x" + "f" * 5000, "0o" + "7" * 6000  # > 4,300 decimal digits each


@pytest.mark.parametrize(("doc", "field", "line"), [
    (f"name: {HUGE_HEX}\n" + BASE, "name", 1),
    ("name: x\n" + BASE + f"placement: {{max_price_per_hour: {HUGE_OCT}}}\n", "placement.max_price_per_hour", 4),
    ("name: x\n" + BASE + f"lifecycle: {{max_run_hours: {HUGE_HEX}}}\n", "lifecycle.max_run_hours", 4),
], ids=["name", "max_price_per_hour", "max_run_hours"])
@pytest.mark.parametrize("verb", ["validate", "plan"])
def test_an_integer_of_thousands_of_digits_is_a_located_field_error(cli, write_yaml, doc, field, line, verb) -> None:
    p = write_yaml(doc)
    r = cli(verb, str(p))
    assert r.code == 1, r.err
    assert f"{p}:{line}: {field}: " in r.err and "digits" in r.err
    assert "internal error" not in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("name", ["r" * 300 + ".txt", "d/" * 3000 + "r.txt"], ids=["file-name", "path"])
def test_a_requirements_name_longer_than_the_file_system_allows_is_a_field_error(cli, write_yaml, name) -> None:
    p = write_yaml(f"name: x\n{BASE}".replace("packages: [torch==2.4.1+cu124]", f"requirements: {name}"))
    r = cli("validate", str(p))
    assert r.code == 1, r.err
    assert f"{p}:3: stack.requirements: lock file " in r.err and "too long for the file system" in r.err
    assert "internal error" not in r.err and "Traceback" not in r.err and name not in r.err  # not echoed whole
