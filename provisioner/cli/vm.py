"""The VM commands: ``up``, ``status``, ``list``, ``down``, ``stop``, ``start``, ``logs``, ``ssh``. Each parses
its flags, checks ``--cloud`` and calls its stage in ``provisioner/commands/``, imported inside the command
(start-up: ``--help`` loads no cloud SDK)."""


from typing import Annotated, Optional

import typer

from provisioner.cli.base import (
    PROVISIONABLE_CLOUDS,
    CloudOpt,
    FrozenFlag,
    JsonFlag,
    LookCloudOpt,
    ProfileArg,
    RegionOpt,
    app,
    check_clouds,
)

NameArg = Annotated[str, typer.Argument(help="VM name.", metavar="NAME", show_default=False)]
YesFlag = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
OneCloudOpt = Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help=f"Only this cloud ({PROVISIONABLE_CLOUDS}); needed when the name exists on two.")]
ListCloudOpt = Annotated[Optional[str], typer.Option("--cloud", metavar="CLOUD", help=f"Only list the VMs on this cloud ({PROVISIONABLE_CLOUDS}).")]


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

    check_clouds(cloud)
    raise typer.Exit(run_up(profile, name=name, yes=yes, wait_ready=wait_ready, clouds=cloud, regions=region, spot=spot,
                            ssh_from=ssh_from, json_out=json_out, ready_timeout=ready_timeout, max_attempts=max_attempts,
                            frozen=frozen, start=start))


@app.command()
def status(name: Annotated[Optional[str], typer.Argument(help="VM name (default: all).", metavar="NAME")] = None,
           cloud: OneCloudOpt = None, json_out: JsonFlag = False) -> None:
    """trainvm VMs with state, zone, type, price and cost so far (rebuilt from cloud labels).

    \b
    Example:
      trainvm status trainvm-bert-finetune-1a2b3c4d
    """
    from provisioner.commands.status import run_status  # lazy: startup

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_status(name, json_out, cloud))


@app.command("list")
def list_(cloud: ListCloudOpt = None, json_out: JsonFlag = False) -> None:
    """All trainvm VMs on every cloud with credentials.

    \b
    Example:
      trainvm list --cloud gcp --json
    """
    from provisioner.commands.status import run_status  # lazy: startup

    check_clouds([cloud] if cloud else None)
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

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_down(name, yes=yes, wait=not no_wait, json_out=json_out, cloud=cloud, missing_ok=missing_ok))


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

    check_clouds([cloud] if cloud else None)
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

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_start(name, cloud=cloud, wait=not no_wait, json_out=json_out))


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

    check_clouds([cloud] if cloud else None)
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

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_ssh(name, command or [], cloud, node))
