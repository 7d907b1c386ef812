"""`--help` of every command (issue 30): real metavars (PROFILE, CLOUD, N...), never Python type names
(`<list[str]>`, `<int range>`, `{profile}`), one example line per command, and no option text that speaks of
an argument the command does not take."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = [["bake"], ["validate"], ["schema"], ["plan"], ["catalog", "show"], ["catalog", "refresh"], ["lock"], ["render"], ["up"], ["status"], ["list"],
            ["down"], ["stop"], ["start"], ["verify"], ["logs"], ["ssh"], ["capture"], ["probe"], ["parity"], ["diff"],
            ["images"], ["images", "delete"]]
TYPE_LEAK = re.compile(r"<(?:list\[|tuple\[|\w+ range>|str>|int>|float>|path>|bool>|Path>)|\{\w+\}|\bTEXT\b|\bINTEGER\b|\bFLOAT\b")


def test_every_command_is_checked() -> None:
    from provisioner.cli import app, catalog_app, images_app

    names = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    names |= {f"catalog {c.name}" for c in catalog_app.registered_commands}
    names |= {"images"} | {f"images {c.name}" for c in images_app.registered_commands}
    assert names == {" ".join(c) for c in COMMANDS}


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_help_shows_real_metavars_and_an_example(cli, argv) -> None:
    r = cli(*argv, "--help")
    assert r.code == 0, r.err
    assert not TYPE_LEAK.search(r.out), TYPE_LEAK.search(r.out)
    example = re.search(r"^  Examples?:\n((?:    trainvm .*\n)+)", r.out, re.M)
    assert example and all(line.split()[1:len(argv) + 1] == argv for line in example.group(1).splitlines()), r.out


def test_usage_names_the_arguments_in_capitals(cli) -> None:
    assert "Usage: trainvm plan [OPTIONS] PROFILE\n" in cli("plan", "--help").out
    assert "Usage: trainvm validate [OPTIONS] PROFILE...\n" in cli("validate", "--help").out
    assert "Usage: trainvm status [OPTIONS] [NAME]\n" in cli("status", "--help").out
    assert "Usage: trainvm ssh [OPTIONS] NAME [-- COMMAND]...\n" in cli("ssh", "--help").out
    assert "--cloud CLOUD" in cli("plan", "--help").out and "--top N" in cli("plan", "--help").out


def test_list_help_speaks_of_no_name(cli) -> None:
    out = cli("list", "--help").out.lower()
    assert "name" not in out.replace("trainvm list", "")


def test_top_level_help_lists_the_commands_in_workflow_order(cli) -> None:
    """The commands live in several modules of the cli/ package (issue 37); `trainvm --help` still lists them in
    the workflow's order, the groups last, as before the split."""
    out = cli("--help").out
    listed = re.findall(r"^  ([a-z]+)  ", out.split("\nCommands:\n", 1)[1], re.M)
    assert listed == ["validate", "schema", "plan", "lock", "render", "up", "bake", "status", "list", "down", "stop",
                      "start", "verify", "logs", "ssh", "capture", "probe", "parity", "diff", "catalog", "images"]


def test_the_command_line_is_a_package_of_short_modules() -> None:
    """Issue 37: cli/ is a package (base, profile, vm, images, verify, errors; main and entry in __init__), each
    module under ~300 lines, and a module per subject registers its commands on the one app."""
    import provisioner.cli
    from tests.helpers import REPO

    modules = sorted((REPO / "provisioner" / "cli").glob("*.py"))
    assert {p.stem for p in modules} >= {"__init__", "base", "profile", "vm", "images", "verify", "errors"}
    long = {p.name: n for p in modules if (n := len(p.read_text(encoding="utf-8").splitlines())) > 300}
    assert not long, long
    where = {c.callback.__module__ for c in provisioner.cli.app.registered_commands if c.callback}
    assert where == {f"provisioner.cli.{m}" for m in ("profile", "vm", "images", "verify")}


def test_help_loads_only_the_cli_package_of_trainvm() -> None:
    """`trainvm --help` (the console script's path when the help cache misses) loads of trainvm only the cli package,
    the error tree and the clouds' names for the options' help (providers/names.py, wording.py): never a command's
    stage."""
    from tests.helpers import REPO

    code = ("import sys\nsys.argv=['trainvm', '--help']\nfrom provisioner.cli import main\ntry:\n    main()\n"
            "except SystemExit:\n    pass\nsys.stderr.write(' '.join(sorted(m for m in sys.modules if m.startswith('provisioner'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    loaded = set(out.stderr.split())
    assert loaded - {m for m in loaded if m == "provisioner.cli" or m.startswith("provisioner.cli.")} == {
        "provisioner", "provisioner.errors", "provisioner.providers", "provisioner.providers.names",
        "provisioner.wording"}, out.stderr


def _console(*args: str, cache: Path, py_flags: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess[str]:
    """``trainvm ARGS`` through the console script's entry (console.entry), the user cache in ``cache``."""
    from tests.helpers import REPO

    full = {**os.environ, "XDG_CACHE_HOME": str(cache), **env}
    for name in ("TRAINVM_NO_CACHE", "COLUMNS"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run([sys.executable, *py_flags, "-m", "provisioner", *args], capture_output=True, text=True,
                          cwd=REPO, env=full, timeout=120)


def _typer_help(cache: Path, **env: str) -> str:
    """What typer prints for ``trainvm --help`` (``cli.main``, no help cache involved)."""
    code = "import sys\nsys.argv = ['trainvm', '--help']\nfrom provisioner.cli import main\nmain()\n"
    from tests.helpers import REPO

    full = {**os.environ, "XDG_CACHE_HOME": str(cache), **env}
    if "COLUMNS" not in env:
        full.pop("COLUMNS", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=full, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _imported(importtime_stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in importtime_stderr.splitlines()
            if line.startswith("import time:") and "self [us]" not in line}


def test_console_help_is_typers_text_and_a_repeat_imports_no_typer(tmp_path: Path) -> None:
    """Issue 37 (start-up): `trainvm --help` prints typer's own text; the next run prints the same text from the user
    cache (provisioner/helpcache.py) without importing typer, click or trainvm's cli package."""
    cache = tmp_path / "cache"
    expected = _typer_help(tmp_path / "other")
    for flag in ("--help", "-h"):
        first = _console(flag, cache=cache)
        again = _console(flag, cache=cache, py_flags=("-X", "importtime"))
        assert first.returncode == again.returncode == 0, first.stderr + again.stderr
        assert first.stdout == again.stdout == expected
        loaded = _imported(again.stderr)
        assert "provisioner.helpcache" in loaded
        assert not {m for m in loaded if m.split(".")[0] in ("typer", "click", "rich", "pydantic")}, sorted(loaded)
        assert not {m for m in loaded if m.startswith("provisioner.") and m not in
                    ("provisioner.console", "provisioner.helpcache")}, sorted(loaded)
    assert (cache / "trainvm" / "help.marshal").is_file()


def test_console_help_cache_is_used_only_while_its_inputs_are_unchanged(tmp_path: Path) -> None:
    """A kept text is printed only for the same inputs: another terminal width is typer's text for that width, a module
    file changed since (its stamp) is a miss, and TRAINVM_NO_CACHE=1 neither reads nor writes the cache."""
    import marshal

    cache = tmp_path / "cache"
    kept = cache / "trainvm" / "help.marshal"
    assert _console("--help", cache=cache, COLUMNS="100").returncode == 0
    key, stamps, text = marshal.loads(kept.read_bytes())
    kept.write_bytes(marshal.dumps((key, stamps, "KEPT\n")))
    assert _console("--help", cache=cache, COLUMNS="100").stdout == "KEPT\n"  # the kept text is what is printed

    narrow = _console("--help", cache=cache, COLUMNS="60")  # another width: typer again, for that width
    assert narrow.stdout == _typer_help(tmp_path / "other", COLUMNS="60") != text

    key, stamps, _ = marshal.loads(kept.read_bytes())
    path, mtime, size = stamps[0]
    kept.write_bytes(marshal.dumps((key, ((path, mtime - 1, size), *stamps[1:]), "STALE\n")))
    assert _console("--help", cache=cache, COLUMNS="60").stdout == narrow.stdout  # a changed file: typer again

    kept.write_bytes(marshal.dumps((key, stamps, "KEPT\n")))
    off = _console("--help", cache=cache, COLUMNS="60", TRAINVM_NO_CACHE="1")
    assert off.stdout == narrow.stdout and marshal.loads(kept.read_bytes())[2] == "KEPT\n"  # not read, not written
    kept.unlink()
    assert _console("--help", cache=cache, TRAINVM_NO_CACHE="1").returncode == 0 and not kept.exists()
    _console("--help", cache=cache, _TRAINVM_COMPLETE="complete_bash", COMP_WORDS="trainvm --he", COMP_CWORD="1")
    assert not kept.exists()  # shell completion is typer's answer to that line, never kept as the help
