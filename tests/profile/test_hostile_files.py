"""Hostile input files (issue 19 / issue 12 "bounded input"): every case ends as a clear input error (exit 1
or 2, no traceback, no "internal error"), and quickly: each runs `trainvm validate` in a subprocess with a
hang guard (a guard, not a timing assertion). Control characters from the file never reach the terminal raw."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GOOD = (REPO / "profiles" / "examples" / "bert-finetune-t4.yaml").read_text()
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")) + "name: *i\n"


def trainvm(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("TRAINVM_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or REPO, env=env)


def assert_clean_input_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode in (1, 2), (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert "\x1b" not in r.stderr + r.stdout and "\x07" not in r.stderr + r.stdout
    for n in needles:
        assert n in r.stderr, r.stderr[-2000:]


def make(tmp_path: Path, kind: str) -> Path:
    p = tmp_path / "p.yaml"
    if kind == "alias_bomb":
        p.write_text(ALIAS_BOMB)
    elif kind == "many_aliases":
        p.write_text("x: &x 1\nl: [" + ", ".join(["*x"] * 5000) + "]\n")
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev_zero":
        p.symlink_to("/dev/zero")
    elif kind == "dev_urandom":
        p.symlink_to("/dev/urandom")
    elif kind == "sparse":
        with open(p, "wb") as f:
            f.truncate(3 << 30)
    elif kind == "big":
        p.write_text("name: x\n" + "# filler\n" * 400_000)
    elif kind == "symlink_loop":
        (tmp_path / "q.yaml").symlink_to(p)
        p.symlink_to(tmp_path / "q.yaml")
    elif kind == "surrogate":
        p.write_text('name: "\\ud800"\n')
    elif kind == "escape_key":
        p.write_text(GOOD + '"\\e[31mevil\\e[0m\\a": 1\n')
    elif kind == "escape_value":
        p.write_text(GOOD.replace("name: bert-finetune", 'name: "\\e[2Jx\\a"'))
    elif kind == "hexint":
        p.write_text(GOOD.replace("  gpu_count: 1", "  gpu_count: 0x1"))
    elif kind == "hexint_value":
        p.write_text(GOOD.replace("stack:\n", "stack:\n  python: 0x1F\n", 1))
    elif kind == "long_extends":
        p.write_text("extends: " + "a" * 5000 + "\nname: x\n")
    elif kind == "nul_extends":
        p.write_text('extends: "a\\0b"\nname: x\n')
    elif kind == "binary":
        p.write_bytes(b"\xff\xfe\x00name: x\n")
    elif kind == "deep":
        p.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    else:
        raise AssertionError(kind)
    return p


CASES = ["alias_bomb", "many_aliases", "fifo", "dev_zero", "dev_urandom", "sparse", "big", "symlink_loop", "surrogate",
         "escape_key", "escape_value", "hexint_value", "long_extends", "nul_extends", "binary", "deep"]


@pytest.mark.parametrize("kind", CASES)
def test_hostile_profile_is_a_clear_input_error(tmp_path, kind):
    r = trainvm("validate", str(make(tmp_path, kind)))
    assert_clean_input_error(r, "p.yaml")


def test_hexint_is_an_int(tmp_path):
    r = trainvm("validate", str(make(tmp_path, "hexint")))
    assert r.returncode == 0, r.stderr


def test_escape_codes_are_shown_escaped(tmp_path):
    r = trainvm("validate", str(make(tmp_path, "escape_key")))
    assert_clean_input_error(r)
    assert "\\x1b[31mevil" in r.stderr


@pytest.mark.parametrize("kind", ["fifo", "sparse", "dev_zero"])
def test_hostile_lock_file(tmp_path, kind):
    lock = tmp_path / "requirements.lock"
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "sparse":
        with open(lock, "wb") as f:
            f.truncate(2 << 30)
    else:
        lock.symlink_to("/dev/zero")
    (tmp_path / "p.yaml").write_text(GOOD.replace("  packages:", "  requirements: requirements.lock\n  packages:", 1))
    r = trainvm("validate", str(tmp_path / "p.yaml"))
    assert_clean_input_error(r, "requirements.lock")


def test_down_with_a_path_like_name_is_an_input_error():
    r = trainvm("down", "a/b", "--yes")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


def test_ten_thousand_env_entries_load(tmp_path):
    env = "".join(f"    VAR_{i}: value-{i}\n" for i in range(10_000))
    p = tmp_path / "p.yaml"
    p.write_text(GOOD.replace("stack:\n", "stack:\n  env:\n" + env, 1))
    r = trainvm("validate", str(p), timeout=300)  # a hang guard only (linear: bench/profile_loading.py has figures)
    assert r.returncode == 0, r.stderr[-2000:]
