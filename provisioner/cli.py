"""The ``trainvm`` command line. Commands stay thin: they parse flags, call the stage that does the
work, and print. Heavy modules (pydantic models, rich tables, cloud SDKs) are imported inside the
commands so ``trainvm --help`` stays fast. Every ``TrainvmError`` becomes one readable paragraph
on stderr and its exit code; ``--debug`` shows tracebacks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    name="trainvm",
    help="Reproducible cloud GPU training VMs from one pinned profile.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
catalog_app = typer.Typer(help="The offers the planner sees.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ProfileArg = Annotated[Path, typer.Argument(help="Profile YAML file.", show_default=False)]


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    if debug:
        os.environ["TRAINVM_DEBUG"] = "1"


@app.command()
def validate(
    profiles: Annotated[list[Path], typer.Argument(help="Profile YAML files.", show_default=False)],
    json_out: JsonFlag = False,
) -> None:
    """Check profiles against the schema and the compatibility facts."""
    from provisioner.commands.validate import run_validate

    raise typer.Exit(run_validate(profiles, json_out))


@app.command()
def schema() -> None:
    """Print the JSON Schema (2020-12) of the profile format, for editors."""
    from provisioner.commands.validate import run_schema

    run_schema()


CloudOpt = Annotated[Optional[list[str]], typer.Option("--cloud", help="Only these clouds (repeatable): gcp, azure, aws.")]
RegionOpt = Annotated[Optional[list[str]], typer.Option("--region", help="Only regions matching these globs (repeatable).")]


@app.command()
def plan(
    profile: ProfileArg,
    cloud: CloudOpt = None,
    region: RegionOpt = None,
    spot: Annotated[Optional[bool], typer.Option("--spot/--on-demand", help="Override placement.spot.", show_default=False)] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Offers to show.")] = 5,
    explain: Annotated[bool, typer.Option("--explain", help="Show why each near miss was rejected.")] = False,
    show_script: Annotated[bool, typer.Option("--show-script", help="Also print the startup script for the chosen offer.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Pick the cheapest feasible offer (offline, from the embedded catalog)."""
    from provisioner.commands.plan import run_plan

    _check_clouds(cloud)
    raise typer.Exit(run_plan(profile, clouds=cloud, regions=region, spot=spot, top=top, explain=explain, show_script=show_script, json_out=json_out))


@catalog_app.command("show")
def catalog_show(
    cloud: Annotated[Optional[str], typer.Option("--cloud", help="gcp, azure or aws.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU name, e.g. H100.")] = None,
    region: Annotated[Optional[str], typer.Option("--region", help="Region glob, e.g. europe-*.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Rows to show (text mode).")] = 50,
    json_out: JsonFlag = False,
) -> None:
    """Show the offers the planner sees, with the catalog's source and date."""
    from provisioner.commands.plan import run_catalog_show

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_catalog_show(cloud=cloud, gpu=gpu, region=region, json_out=json_out, limit=limit))


def _check_clouds(clouds: Optional[list[str]]) -> None:
    bad = [c for c in clouds or [] if c not in ("gcp", "azure", "aws")]
    if bad:
        from provisioner.errors import InputError

        raise InputError(f"--cloud: unknown cloud {bad[0]!r} (choose gcp, azure or aws)")


def main() -> None:
    """Console-script entry point: run the app and map errors to exit codes."""
    from provisioner.errors import TrainvmError

    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except TrainvmError as exc:
        _fail(exc, exc.exit_code, getattr(exc, "hint", None))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except Exception as exc:  # click usage errors and anything unexpected
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):  # click (or typer's vendored click) error
            show()
            sys.exit(2 if type(exc).__name__ != "ClickException" else exc.exit_code)
        _fail(exc, 1, "this is a bug in trainvm; rerun with --debug and report the traceback", internal=True)


def _fail(exc: BaseException, code: int, hint: str | None, internal: bool = False) -> None:
    if os.environ.get("TRAINVM_DEBUG"):
        import traceback

        traceback.print_exception(exc)
    text = f"internal error: {type(exc).__name__}: {exc}" if internal else f"error: {exc}"
    sys.stderr.write(text.rstrip() + "\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
