"""The profile commands: ``validate``, ``schema``, ``plan``, ``lock``, ``render``, and ``catalog show`` /
``catalog refresh`` (the offers ``plan`` chooses from). Each parses its flags and calls its stage in
``provisioner/commands/``, imported inside the command (start-up)."""


import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from provisioner.cli.base import CloudOpt, FrozenFlag, JsonFlag, ProfileArg, RegionOpt, app, catalog_app, check_clouds
from provisioner.providers.names import CLOUD_NAMES, or_list

ResolveImageFlag = Annotated[bool, typer.Option("--resolve-image", help="Ask the registry for stack.container's digest and facts (network; TRAINVM_REGISTRY_USER/_PASSWORD for private images).")]


def resolve_images(on: bool) -> None:
    store = sys.modules.get("provisioner.container.store")  # not imported yet: nothing to forget (and no import)
    if store is not None:
        store.forget()  # what the registry said to an earlier in-process command is not this command's answer
    if on:
        os.environ["TRAINVM_RESOLVE_IMAGES"] = "1"


@app.command()
def validate(
    profiles: Annotated[list[Path], typer.Argument(help="Profile YAML files.", metavar="PROFILE", show_default=False)],
    json_out: JsonFlag = False,
    resolve_image: ResolveImageFlag = False,
) -> None:
    """Check profiles against the schema and the compatibility facts.

    \b
    Example:
      trainvm validate profiles/examples/*.yaml
    """
    from provisioner.commands.validate import run_validate  # lazy: startup

    resolve_images(resolve_image)
    raise typer.Exit(run_validate(profiles, json_out))


@app.command()
def schema() -> None:
    """Print the JSON Schema (2020-12) of the profile format, for editors.

    \b
    Example:
      trainvm schema > trainvm-profile.schema.json
    """
    from provisioner.commands.validate import run_schema  # lazy: startup

    run_schema()


@app.command()
def plan(
    profile: ProfileArg,
    cloud: CloudOpt = None,
    region: RegionOpt = None,
    spot: Annotated[Optional[bool], typer.Option("--spot/--on-demand", help="Override placement.spot.", show_default=False)] = None,
    top: Annotated[int, typer.Option("--top", min=1, metavar="N", help="Offers to show.")] = 5,
    explain: Annotated[bool, typer.Option("--explain", help="Show why each near miss was rejected.")] = False,
    show_script: Annotated[bool, typer.Option("--show-script", help="Also print the startup script for the chosen offer.")] = False,
    json_out: JsonFlag = False,
    resolve_image: ResolveImageFlag = False,
    frozen: FrozenFlag = False,
    quota: Annotated[bool, typer.Option("--quota", help="Also read the clouds' quotas (needs credentials) and say which regions `up` would skip.")] = False,
) -> None:
    """Pick the cheapest feasible offer (offline, from the embedded catalog).

    \b
    Example:
      trainvm plan profiles/examples/bert-finetune-t4.yaml --cloud gcp --top 3
    """
    from provisioner.commands.plan import run_plan  # lazy: startup

    resolve_images(resolve_image)
    check_clouds(cloud)
    raise typer.Exit(run_plan(profile, clouds=cloud, regions=region, spot=spot, top=top, explain=explain, show_script=show_script, json_out=json_out,
                        frozen=frozen, quota=quota))


@catalog_app.command("show")
def catalog_show(
    cloud: Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help=f"{or_list(CLOUD_NAMES)}.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", metavar="GPU", help="GPU name or alias, as hardware.gpu takes it (e.g. H100, A100-40GB).")] = None,
    region: Annotated[Optional[str], typer.Option("--region", metavar="GLOB", help="Region glob, e.g. europe-*.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, metavar="N", help="Rows to show (text mode).")] = 50,
    json_out: JsonFlag = False,
) -> None:
    """Show the offers the planner sees, with the catalog's source and date.

    \b
    Example:
      trainvm catalog show --gpu A100-40GB --region 'europe-*'
    """
    from provisioner.commands.plan import run_catalog_show  # lazy: startup

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_catalog_show(cloud=cloud, gpu=gpu, region=region, json_out=json_out, limit=limit))


@catalog_app.command("refresh")
def catalog_refresh(
    cloud: CloudOpt = None,
    region: RegionOpt = None,
    json_out: JsonFlag = False,
    accept_shrink: Annotated[bool, typer.Option("--accept-shrink", help="Write the refresh even when a region loses more than half its rows (refused by default: a truncated answer looks like that).")] = False,
) -> None:
    """Renew the catalog's prices from the clouds' official price APIs (network) into ~/.cache/trainvm/catalog.

    Plans then use it (TRAINVM_CATALOG still wins; the embedded snapshot stays the fallback). A failed or
    suspicious refresh writes nothing and keeps the current catalog.

    \b
    Example:
      trainvm catalog refresh --cloud azure --region 'eastus*'
    """
    from provisioner.commands.catalog_refresh import run_catalog_refresh  # lazy: startup

    check_clouds(cloud)
    raise typer.Exit(run_catalog_refresh(clouds=cloud, regions=region, json_out=json_out,
                                         accept_shrink=accept_shrink))


@app.command()
def lock(
    profile: ProfileArg,
    upgrade: Annotated[bool, typer.Option("--upgrade", help="Re-resolve every package and move team sources to their refs' current commits.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 when the lock is missing or no longer matches the profile (for CI).")] = False,
    frozen: Annotated[bool, typer.Option("--frozen", help="Never fetch team sources; fail when the lock and the cache disagree (for CI).")] = False,
    index_url: Annotated[Optional[str], typer.Option("--index-url", metavar="URL", help="PyPI-compatible index to resolve from (default https://pypi.org/simple).")] = None,
    torch_index_url: Annotated[Optional[str], typer.Option("--torch-index-url", metavar="URL", help="Index for the PyTorch CUDA build (default https://download.pytorch.org/whl/<variant>).")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Pin the profile's whole Python closure for its target VM, with hashes, in NAME.lock.

    \b
    Example:
      trainvm lock profiles/examples/bert-finetune-t4.yaml
    """
    from provisioner.commands.lock import run_lock  # lazy: startup

    raise typer.Exit(run_lock(profile, upgrade=upgrade, check=check, frozen=frozen, index_url=index_url,
                              torch_index_url=torch_index_url, json_out=json_out))


@app.command()
def render(
    profile: ProfileArg,
    cloud: Annotated[str, typer.Option("--cloud", metavar="CLOUD", help=f"{or_list(CLOUD_NAMES)}.")],
    out: Annotated[Optional[Path], typer.Option("--out", metavar="DIR", help="Write user-data, payload.tar.gz, payload/ and request.json into this folder.")] = None,
    region: RegionOpt = None,
    json_out: JsonFlag = False,
) -> None:
    """Write the startup script and the create-request body for the planned offer.

    \b
    Example:
      trainvm render profiles/examples/bert-finetune-t4.yaml --cloud aws --out build/aws
    """
    from provisioner.commands.render import run_render  # lazy: startup

    check_clouds([cloud])
    raise typer.Exit(run_render(profile, cloud=cloud, out=out, regions=region, json_out=json_out))
