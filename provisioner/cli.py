"""The ``trainvm`` command line. Commands stay thin: they parse flags, call the stage that does the
work, and print. Heavy modules (pydantic models, rich tables, cloud SDKs) are imported inside the
commands so ``trainvm --help`` stays fast. Every ``TrainvmError`` becomes one readable paragraph
on stderr and its exit code; ``--debug`` shows tracebacks."""


import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.core import TyperArgument

from provisioner.providers.names import CLOUD_NAMES, PROVISIONABLE, or_list

#: the clouds as options' help lists them (providers/names.py: --help does not import the registry)
_EVERY, _PROVISIONABLE = ", ".join(CLOUD_NAMES), ", ".join(PROVISIONABLE)


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

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ProfileArg = Annotated[Path, typer.Argument(help="Profile YAML file.", metavar="PROFILE", show_default=False)]
DataOpt = Annotated[Optional[str], typer.Option("--data", metavar="PATH", help="Path of the training data (disk and loader blocks read it).")]
BudgetOpt = Annotated[float, typer.Option("--budget", min=1, metavar="SECONDS", help="Seconds the perf probe aims to spend.")]
ResolveImageFlag = Annotated[bool, typer.Option("--resolve-image", help="Ask the registry for stack.container's digest and facts (network; TRAINVM_REGISTRY_USER/_PASSWORD for private images).")]


FrozenFlag = Annotated[bool, typer.Option("--frozen", help="Use only what NAME.lock pins: refuse a missing or stale lock, never fetch team sources (for CI; also TRAINVM_FROZEN=1).")]


def _resolve_images(on: bool) -> None:
    store = sys.modules.get("provisioner.container.store")  # not imported yet: nothing to forget (and no import)
    if store is not None:
        store.forget()  # what the registry said to an earlier in-process command is not this command's answer
    if on:
        os.environ["TRAINVM_RESOLVE_IMAGES"] = "1"


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors (accepted anywhere on the line).")] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    # main() takes --debug and --version out of argv wherever they are; these declarations are for --help.
    if debug:
        os.environ["TRAINVM_DEBUG"] = "1"


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

    _resolve_images(resolve_image)
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


CloudOpt = Annotated[Optional[list[str]], typer.Option("--cloud", metavar="CLOUD", help=f"Only these clouds (repeatable): {_EVERY}.")]
RegionOpt = Annotated[Optional[list[str]], typer.Option("--region", metavar="GLOB", help="Only regions matching these globs (repeatable).")]


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

    _resolve_images(resolve_image)
    _check_clouds(cloud)
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

    _check_clouds([cloud] if cloud else None)
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

    _check_clouds(cloud)
    raise typer.Exit(run_catalog_refresh(clouds=cloud, regions=region, json_out=json_out,
                                         accept_shrink=accept_shrink))


NameArg = Annotated[str, typer.Argument(help="VM name.", metavar="NAME", show_default=False)]
YesFlag = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
OneCloudOpt = Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help=f"Only this cloud ({_PROVISIONABLE}); needed when the name exists on two.")]


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

    _check_clouds([cloud])
    raise typer.Exit(run_render(profile, cloud=cloud, out=out, regions=region, json_out=json_out))


@app.command()
def up(
    profile: ProfileArg,
    name: Annotated[Optional[str], typer.Option("--name", metavar="NAME", help="VM name (default: trainvm-<profile>-<hash8>).")] = None,
    yes: YesFlag = False,
    wait_ready: Annotated[bool, typer.Option("--wait-ready", help="Also wait for the startup script's report and verify it.")] = False,
    ready_timeout: Annotated[float, typer.Option("--ready-timeout", min=0, metavar="SECONDS", help="Seconds --wait-ready waits.")] = 3600,
    cloud: CloudOpt = None,
    region: RegionOpt = None,
    spot: Annotated[Optional[bool], typer.Option("--spot/--on-demand", help="Override placement.spot.", show_default=False)] = None,
    ssh_from: Annotated[Optional[str], typer.Option("--ssh-from", metavar="CIDR", help="CIDR allowed to SSH in (overrides placement.ssh_from).")] = None,
    max_attempts: Annotated[int, typer.Option("--max-attempts", min=1, metavar="N", help="Give up after this many create attempts.")] = 30,
    start: Annotated[bool, typer.Option("--start", help="When the VM exists and is stopped, start it (compute billing resumes); without it that is exit 1.")] = False,
    json_out: JsonFlag = False,
    frozen: FrozenFlag = False,
) -> None:
    """Create the VM: plan, then try the offers in failover order until one runs.

    \b
    Example:
      trainvm up profiles/examples/bert-finetune-t4.yaml --yes --wait-ready
    """
    from provisioner.commands.up import run_up  # lazy: startup

    _check_clouds(cloud)
    raise typer.Exit(run_up(profile, name=name, yes=yes, wait_ready=wait_ready, clouds=cloud, regions=region, spot=spot,
                            ssh_from=ssh_from, json_out=json_out, ready_timeout=ready_timeout, max_attempts=max_attempts,
                            frozen=frozen, start=start))


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
    from provisioner.providers.registry import bakers  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_bake(profile, cloud=cloud or next(iter(bakers())), region=region, json_out=json_out))


images_app = typer.Typer(invoke_without_command=True, rich_markup_mode=None)  # help: the callback's docstring
app.add_typer(images_app, name="images")


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

    _check_clouds([cloud] if cloud else None)
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

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_images_delete(name, cloud=cloud, json_out=json_out))


@app.command()
def status(name: Annotated[Optional[str], typer.Argument(help="VM name (default: all).", metavar="NAME")] = None,
           cloud: OneCloudOpt = None, json_out: JsonFlag = False) -> None:
    """trainvm VMs with state, zone, type, price and cost so far (rebuilt from cloud labels).

    \b
    Example:
      trainvm status trainvm-bert-finetune-1a2b3c4d
    """
    from provisioner.commands.status import run_status  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_status(name, json_out, cloud))


ListCloudOpt = Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help=f"Only list the VMs on this cloud ({_PROVISIONABLE}).")]


@app.command("list")
def list_(cloud: ListCloudOpt = None, json_out: JsonFlag = False) -> None:
    """All trainvm VMs on every cloud with credentials.

    \b
    Example:
      trainvm list --cloud gcp --json
    """
    from provisioner.commands.status import run_status  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_status(None, json_out, cloud))


@app.command()
def down(
    name: NameArg,
    yes: YesFlag = False,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Return once deletion has started.")] = False,
    cloud: OneCloudOpt = None,
    missing_ok: Annotated[bool, typer.Option("--missing-ok", help="Exit 0 when no cloud has NAME, even if trainvm on this machine never created it.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Delete the VM and everything created for it (idempotent).

    \b
    Example:
      trainvm down trainvm-bert-finetune-1a2b3c4d --yes
    """
    from provisioner.commands.down import run_down  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_down(name, yes=yes, wait=not no_wait, json_out=json_out, cloud=cloud, missing_ok=missing_ok))


LookCloudOpt = Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help=f"Only look on this cloud ({_PROVISIONABLE}).", show_default=False)]


@app.command()
def stop(
    name: NameArg,
    cloud: LookCloudOpt = None,
    yes: YesFlag = False,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Return once stopping has started.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Stop the VM: compute billing ends, its disks and their data stay (and bill); `start` resumes it.

    \b
    Example:
      trainvm stop trainvm-bert-finetune-1a2b3c4d --yes
    """
    from provisioner.commands.power import run_stop  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_stop(name, cloud=cloud, yes=yes, wait=not no_wait, json_out=json_out))


@app.command()
def start(
    name: NameArg,
    cloud: LookCloudOpt = None,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Return once starting has begun.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Start a stopped VM; its startup script re-verifies the stack (nothing is reinstalled).

    \b
    Example:
      trainvm start trainvm-bert-finetune-1a2b3c4d
    """
    from provisioner.commands.power import run_start  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_start(name, cloud=cloud, wait=not no_wait, json_out=json_out))


@app.command()
def verify(
    target: Annotated[str, typer.Argument(help="VM name, or with --local a profile file.", metavar="TARGET", show_default=False)],
    local: Annotated[bool, typer.Option("--local", help="Probe this machine instead of a VM; TARGET is a profile.")] = False,
    python: Annotated[Optional[str], typer.Option("--python", metavar="PYTHON", help="With --local: the interpreter to inspect.")] = None,
    perf: Annotated[bool, typer.Option("--perf", help="Compare performance with the perf baseline (PROFILE.perf.json) instead.")] = False,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", metavar="FILE", help="With --perf on a VM: PROFILE.yaml or a perf result JSON.")] = None,
    data: DataOpt = None,
    budget: BudgetOpt = 30.0,
    cloud: LookCloudOpt = None,
    profile: Annotated[Optional[Path], typer.Option("--profile", metavar="PROFILE", help="Verify a VM against this profile file instead of the one stored on it.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Compare a VM's stack report (or this machine) field by field with the profile.

    States: match (exit 0), drift (1), failed (1: the startup script failed; phase, line, message),
    provisioning (5: no report yet or a phase still running). A VM whose stored profile cannot be
    read is an error (3), never a match.

    \b
    Examples:
      trainvm verify trainvm-bert-finetune-1a2b3c4d
      trainvm verify profiles/examples/bert-finetune-t4.yaml --local
    """
    if perf:
        from provisioner.commands.perf import verify_perf  # lazy: startup

        _check_clouds([cloud] if cloud else None)
        raise typer.Exit(verify_perf(target, local=local, python=python, data=data, json_out=json_out, budget=budget,
                                     baseline=baseline, cloud=cloud))
    if local:
        from provisioner.commands.mirror import run_verify_local  # lazy: startup

        raise typer.Exit(run_verify_local(Path(target), python=python, json_out=json_out))
    from provisioner.commands.verify import run_verify_remote  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_verify_remote(target, json_out, profile, cloud))


@app.command()
def logs(
    name: NameArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep reading until the startup script reports ready (exit 0) or failed (exit 1).")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=0, metavar="SECONDS", help="With --follow: stop after this many seconds without ready/failed (exit 5).")] = 1800,
    cloud: OneCloudOpt = None,
    json_out: JsonFlag = False,
) -> None:
    """The VM's provisioning log (its console) and the startup phases' timings.

    \b
    Example:
      trainvm logs trainvm-bert-finetune-1a2b3c4d --follow
    """
    from provisioner.commands.logs import run_logs  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_logs(name, follow=follow, json_out=json_out, cloud=cloud, timeout=timeout))


@app.command()
def ssh(
    name: NameArg,
    command: Annotated[Optional[list[str]], typer.Argument(help="Command to run on the VM (after --).", metavar="-- COMMAND", show_default=False)] = None,
    cloud: OneCloudOpt = None,
    node: Annotated[Optional[int], typer.Option("--node", metavar="N", help="For a cluster: the node (rank) to open SSH to; default 0.",
                                                show_default=False)] = None,
) -> None:
    """Open SSH to the VM (its user, key and address), or run `-- CMD...` there.

    \b
    Example:
      trainvm ssh trainvm-bert-finetune-1a2b3c4d -- nvidia-smi
    """
    from provisioner.commands.ssh import run_ssh  # lazy: startup

    _check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_ssh(name, command or [], cloud, node))


@app.command()
def capture(
    out: Annotated[Optional[Path], typer.Option("-o", "--out", metavar="FILE", help="Write the profile here (default: stdout).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", metavar="NAME", help="Profile name.")] = None,
    python: Annotated[Optional[str], typer.Option("--python", metavar="PYTHON", help="Interpreter whose packages to capture.")] = None,
    data: Annotated[Optional[str], typer.Option("--data", metavar="PATH", help="Path of the training data (its disk is recorded).")] = None,
    perf: Annotated[bool, typer.Option("--perf", help="Also record the perf baseline beside -o (PROFILE.perf.json).")] = False,
    budget: BudgetOpt = 30.0,
    container: Annotated[Optional[str], typer.Option("--container", metavar="IMAGE", help="The image this workstation trains in: write a stack.container profile (pinned by digest).")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Probe this workstation and write a profile that reproduces it.

    \b
    Example:
      trainvm capture -o my-workstation.yaml --name my-workstation
    """
    from provisioner.commands.mirror import run_capture  # lazy: startup

    if container is not None:
        from provisioner.probe.capture_container import run_capture_container  # lazy: startup

        raise typer.Exit(run_capture_container(image=container, out=out, name=name, data=data, json_out=json_out))

    if perf and out is None:
        from provisioner.errors import InputError  # lazy: startup

        raise InputError("capture --perf: also give -o PROFILE.yaml; the perf baseline is written beside it as PROFILE.perf.json")
    rc = run_capture(out=out, name=name, python=python, data=data, json_out=json_out)
    if perf:
        from provisioner.commands.perf import capture_baseline  # lazy: startup

        capture_baseline(out, python, data, budget)
    raise typer.Exit(rc)


# ---- performance: probe --perf, parity (provisioner/commands/perf.py) ----


@app.command()
def probe(
    perf: Annotated[bool, typer.Option("--perf", help="Run the performance probe (blocks 0-7) instead of the stack probe.")] = False,
    python: Annotated[Optional[str], typer.Option("--python", metavar="PYTHON", help="Interpreter to run under (default: trainvm's own).")] = None,
    data: DataOpt = None,
    out: Annotated[Optional[Path], typer.Option("-o", "--out", metavar="FILE", help="Also write the JSON result here.")] = None,
    budget: BudgetOpt = 30.0,
    json_out: JsonFlag = False,
) -> None:
    """Probe this machine: the stack report (JSON), or with --perf its measured performance.

    \b
    Example:
      trainvm probe --perf -o workstation.perf.json
    """
    from provisioner.commands.perf import run_probe  # lazy: startup

    raise typer.Exit(run_probe(perf=perf, python=python, data=data, json_out=json_out, out=out, budget=budget))


@app.command()
def parity(
    a: Annotated[Path, typer.Argument(help="Reference perf result (JSON), e.g. the workstation's.", metavar="A", show_default=False)],
    b: Annotated[Path, typer.Argument(help="Perf result to judge (JSON), e.g. the VM's.", metavar="B", show_default=False)],
    json_out: JsonFlag = False,
) -> None:
    """Per-metric match/worse/better of B against A, with the likely cause of each slowdown (exit 1 when worse).

    \b
    Example:
      trainvm parity workstation.perf.json vm.perf.json
    """
    from provisioner.commands.perf import run_parity  # lazy: startup

    raise typer.Exit(run_parity(a, b, json_out))


@app.command()
def diff(
    a: Annotated[Path, typer.Argument(help="Profile (YAML) or report (JSON).", metavar="A", show_default=False)],
    b: Annotated[Path, typer.Argument(help="Profile (YAML) or report (JSON).", metavar="B", show_default=False)],
    json_out: JsonFlag = False,
) -> None:
    """Field-by-field difference of two profiles or reports (exit 1 when they differ).

    \b
    Example:
      trainvm diff profiles/examples/bert-finetune-t4.yaml my-workstation.yaml
    """
    from provisioner.commands.mirror import run_diff  # lazy: startup

    raise typer.Exit(run_diff(a, b, json_out))


def _check_clouds(clouds: Optional[list[str]]) -> None:
    from provisioner.providers.registry import CLOUDS, unknown_cloud_message  # lazy: startup

    bad = [c for c in clouds or [] if c not in CLOUDS]
    if bad:
        from provisioner.errors import InputError  # lazy: startup

        raise InputError(f"--cloud: {unknown_cloud_message(bad[0])}")


def _split_global_flags(argv: list[str]) -> tuple[list[str], bool, bool, bool]:
    """argv without ``--debug``/``--version`` (accepted before or after the command, not after ``--``),
    and whether they and ``--json`` were given."""
    cut = argv.index("--") if "--" in argv else len(argv)
    head, tail = argv[:cut], argv[cut:]
    debug, version, json_out = "--debug" in head, "--version" in head, "--json" in head
    return [a for a in head if a not in ("--debug", "--version")] + tail, debug, version, json_out


@contextmanager
def _only_invoked_command(args: list[str]) -> Iterator[None]:
    """While ``trainvm CMD ...`` runs, the app holds only CMD. Typer builds every command of a group
    (signature inspection, click parameters) before it parses the line; for one command the other
    nineteen are wasted start-up time. Help, completion, unknown commands and options before the
    command see the whole app. The registration is restored afterwards (tests call main() in-process)."""
    first = args[0] if args else ""
    commands = {c.name or c.callback.__name__.replace("_", "-"): c for c in app.registered_commands if c.callback}
    groups = {g.name: g for g in app.registered_groups}
    saved = app.registered_commands, app.registered_groups
    if first in commands:
        app.registered_commands, app.registered_groups = [commands[first]], []
    elif first in groups:
        app.registered_commands, app.registered_groups = [], [groups[first]]
    try:
        yield
    finally:
        app.registered_commands, app.registered_groups = saved


def main() -> None:
    """Console-script entry point: run the app and map errors to exit codes (docs/spec.md "Exit codes").
    With ``--json`` an error is also one ``{"error": {...}}`` document on stdout."""
    # trainvm uses no pydantic plugins: skip their entry-point scan (pydantic's documented switch)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from provisioner.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TrainvmError  # lazy: startup

    args, debug, version, json_out = _split_global_flags(sys.argv[1:])
    if debug:
        os.environ["TRAINVM_DEBUG"] = "1"
    if version:
        from provisioner import __version__  # lazy: startup

        sys.stdout.write(f"trainvm {__version__}\n")
        sys.exit(0)
    try:
        with _only_invoked_command(args):
            rc = app(args=args, prog_name="trainvm", standalone_mode=False)
        if rc == EXIT_INTERRUPTED:  # typer >= 0.13 turns a KeyboardInterrupt into Exit(130), returned here unsaid
            raise KeyboardInterrupt
        sys.exit(rc if isinstance(rc, int) else 0)
    except TrainvmError as exc:  # an interrupt that says what exists (errors.Aborted) is its own "aborted: ..." line
        _fail(exc, exc.exit_code, getattr(exc, "hint", None), json_out=json_out,
              text=str(exc) if exc.exit_code == EXIT_INTERRUPTED else None)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # `trainvm ... | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except (typer.Abort, KeyboardInterrupt) as exc:
        _fail(exc, EXIT_INTERRUPTED, None, json_out=json_out, text="aborted")
    except Exception as exc:  # click usage errors and anything unexpected
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):  # click (or typer's vendored click) error
            code = 2 if type(exc).__name__ != "ClickException" else exc.exit_code
            if json_out:
                _emit_error(exc, code, None, kind="usage")
            show()
            sys.exit(code)
        _fail(exc, EXIT_INTERNAL, "this is a bug in trainvm; rerun with --debug and report the traceback",
              internal=True, json_out=json_out)


def entry() -> None:
    """The ``trainvm`` console script: ``main()``, then exit without interpreter teardown.

    Freeing thousands of catalog records and every imported module costs ~50 ms after the output
    is already written; a CLI need not pay it. Output streams are flushed first, files are closed
    by then, and background threads (e.g. an SDK poller left behind by a timed-out wait) cannot
    delay the exit. In-process callers (tests) use ``main()``, which raises SystemExit as usual."""
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe (e.g. `| head`) must not turn into a traceback
            pass
    os._exit(code)


def _emit_error(exc: BaseException, code: int, hint: str | None, *, kind: str | None = None,
                text: str | None = None) -> None:
    import json  # lazy: startup

    from provisioner.secrets import redact  # lazy: startup

    message = redact(text or (exc.format_message() if hasattr(exc, "format_message") else str(exc)))  # click: no "Error: "
    doc: dict[str, object] = {"message": message, "hint": hint, "exit_code": code,
                              "type": kind or type(exc).__name__}
    messages = getattr(exc, "messages", None)
    if messages:  # ProfileError: every validation message, located
        doc["messages"] = [m.to_json() for m in messages]
    attempts = getattr(exc, "attempts", None)
    if attempts:  # ProvisionError: what was tried
        doc["attempts"] = [a.to_json() for a in attempts]
    skipped = getattr(exc, "skipped", None)
    if skipped:  # no cloud could be asked: which, and why
        doc["skipped"] = skipped
    similar = getattr(exc, "similar", None)
    if similar is not None:  # `down` of an unknown name: the live VMs it resembles
        doc["similar"] = similar
    results = getattr(exc, "results", None)
    if results:  # validate: every file's result, the unreadable one included
        doc["results"] = results
    sys.stdout.write(json.dumps({"error": doc}, indent=2, default=str) + "\n")


def _fail(exc: BaseException, code: int, hint: str | None, internal: bool = False, json_out: bool = False,
          text: str | None = None) -> None:
    from provisioner.settings import is_set  # lazy: startup

    if is_set("TRAINVM_DEBUG"):
        import traceback  # lazy: startup

        traceback.print_exception(exc)
    from provisioner.output import printable  # lazy: startup
    from provisioner.secrets import redact  # lazy: startup

    if internal:
        text = f"internal error: {type(exc).__name__}: {exc}"
    if json_out:
        _emit_error(exc, code, hint, kind="internal" if internal else None, text=text)
    # no credential, no terminal control code
    sys.stderr.write(printable(redact((text or f"error: {exc}").rstrip())) + "\n")
    if hint:
        sys.stderr.write(f"hint: {printable(hint)}\n")
    sys.exit(code)


if __name__ == "__main__":
    entry()
