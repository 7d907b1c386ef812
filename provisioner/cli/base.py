"""The one typer app of ``trainvm``, its two command groups (``catalog``, ``images``) and what several command
modules share: the options they spell alike and the ``--cloud`` check. The command modules (``profile``, ``vm``,
``images``, ``verify``) register on ``app``; ``provisioner.cli`` imports them all and runs the app.

No ``from __future__ import annotations`` here or in the command modules: typer would evaluate every string
annotation at start-up (bench/RESULTS.md)."""


import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.core import TyperArgument

from provisioner.providers.names import CLOUD_NAMES, PROVISIONABLE

#: the clouds as options' help lists them (providers/names.py: --help does not import the registry)
EVERY_CLOUD, PROVISIONABLE_CLOUDS = ", ".join(CLOUD_NAMES), ", ".join(PROVISIONABLE)


def _plain_argument_help() -> None:
    """Arguments in help as their metavar says (``Usage: trainvm plan [OPTIONS] PROFILE``; ``PROFILE  Profile YAML
    file.``): typer >= 0.2x writes a required argument as ``{profile}`` and adds its Python type (``<path>``,
    ``<list[str]>``) beside it. Options with a metavar already show only it (``--cloud CLOUD``)."""
    if not hasattr(TyperArgument, "_usage_display_name"):  # an older typer prints plain metavars itself
        return

    def usage(self: TyperArgument) -> str:
        name = self.metavar or (self.name or "").upper()
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    def display_type(self: TyperArgument, ctx: object) -> None:
        return None

    TyperArgument._usage_display_name = usage  # type: ignore[method-assign]
    TyperArgument.display_type_rich = display_type  # type: ignore[method-assign,assignment]


_plain_argument_help()

app = typer.Typer(
    name="trainvm",
    help="Reproducible cloud GPU training VMs from one pinned profile.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
catalog_app = typer.Typer(help="The offers the planner sees.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(catalog_app, name="catalog")
images_app = typer.Typer(invoke_without_command=True, rich_markup_mode=None)  # help: the callback's docstring (images.py)
app.add_typer(images_app, name="images")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ProfileArg = Annotated[Path, typer.Argument(help="Profile YAML file.", metavar="PROFILE", show_default=False)]
FrozenFlag = Annotated[bool, typer.Option("--frozen", help="Use only what NAME.lock pins: refuse a missing or stale lock, never fetch team sources (for CI; also TRAINVM_FROZEN=1).")]
CloudOpt = Annotated[Optional[list[str]], typer.Option("--cloud", metavar="CLOUD", help=f"Only these clouds (repeatable): {EVERY_CLOUD}.")]
RegionOpt = Annotated[Optional[list[str]], typer.Option("--region", metavar="GLOB", help="Only regions matching these globs (repeatable).")]
LookCloudOpt = Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help=f"Only look on this cloud ({PROVISIONABLE_CLOUDS}).", show_default=False)]


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors (accepted anywhere on the line).")] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    # main() takes --debug and --version out of argv wherever they are; these declarations are for --help.
    if debug:
        os.environ["TRAINVM_DEBUG"] = "1"


def check_clouds(clouds: Optional[list[str]]) -> None:
    from provisioner.providers.registry import CLOUDS, unknown_cloud_message  # lazy: startup

    bad = [c for c in clouds or [] if c not in CLOUDS]
    if bad:
        from provisioner.errors import InputError  # lazy: startup

        raise InputError(f"--cloud: {unknown_cloud_message(bad[0])}")
