"""The image commands: ``bake`` (a private image of the profile's locked stack), ``images`` (the group's callback:
list them) and ``images delete``."""


from typing import Annotated, Optional

import typer

from provisioner.cli.base import JsonFlag, ProfileArg, app, check_clouds, images_app


@app.command()
def bake(
    profile: ProfileArg,
    cloud: Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help="The cloud to bake on (default: the first that can; docs/bake.md).")] = None,
    region: Annotated[Optional[str], typer.Option("--region", metavar="GLOB", help="Only regions matching this glob.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Bake a private image of the profile's locked stack; `up` boots it and installs nothing (docs/bake.md).

    \b
    Example:
      trainvm bake profiles/examples/tf-resnet50.yaml --cloud gcp
    """
    from provisioner.bake.run import run_bake  # lazy: startup
    from provisioner.hooks import bakers  # lazy: startup

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_bake(profile, cloud=cloud or next(iter(bakers())), region=region, json_out=json_out))


@images_app.callback()
def images(
    ctx: typer.Context,
    cloud: Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help="Only this cloud.")] = None,
    profile: Annotated[Optional[str], typer.Option("--profile", metavar="PATH", help="Only the images that match this profile, and which one `up` would boot per cloud and region (or why none).")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Baked images (trainvm bake): size, age, regions, the profile they were baked for, monthly storage cost.

    \b
    Example:
      trainvm images --cloud gcp
      trainvm images --profile profiles/examples/tf-resnet50.yaml
    """
    if ctx.invoked_subcommand is not None:
        return
    from provisioner.commands.images import run_images  # lazy: startup

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_images(cloud=cloud, json_out=json_out, profile=profile))


@images_app.command("delete")
def images_delete(
    name: Annotated[str, typer.Argument(help="Image name.", metavar="NAME", show_default=False)],
    cloud: Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help="The image's cloud.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Delete one baked image (only images trainvm baked).

    \b
    Example:
      trainvm images delete trainvm-tf-resnet50-0123456789-20261127100000-ab12 --cloud gcp
    """
    from provisioner.commands.images import run_images_delete  # lazy: startup

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_images_delete(name, cloud=cloud, json_out=json_out))
