"""`--help` of every command (issue 30): real metavars (PROFILE, CLOUD, N...), never Python type names
(`<list[str]>`, `<int range>`, `{profile}`), one example line per command, and no option text that speaks of
an argument the command does not take."""

from __future__ import annotations

import re

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
