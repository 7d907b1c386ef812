"""The commands that compare stacks and machines: ``verify`` (a VM or this machine against a profile),
``capture`` (this workstation as a profile), ``probe`` (this machine's stack report or performance), ``parity``
(two perf results) and ``diff`` (two profiles or reports)."""


from pathlib import Path
from typing import Annotated, Optional

import typer

from provisioner.cli.base import JsonFlag, LookCloudOpt, app, check_clouds

DataOpt = Annotated[Optional[str], typer.Option("--data", metavar="PATH", help="Path of the training data (disk and loader blocks read it).")]
BudgetOpt = Annotated[float, typer.Option("--budget", min=1, metavar="SECONDS", help="Seconds the perf probe aims to spend.")]


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

        check_clouds([cloud] if cloud else None)
        raise typer.Exit(verify_perf(target, local=local, python=python, data=data, json_out=json_out, budget=budget,
                                     baseline=baseline, cloud=cloud))
    if local:
        from provisioner.commands.mirror import run_verify_local  # lazy: startup

        raise typer.Exit(run_verify_local(Path(target), python=python, json_out=json_out))
    from provisioner.commands.verify import run_verify_remote  # lazy: startup

    check_clouds([cloud] if cloud else None)
    raise typer.Exit(run_verify_remote(target, json_out, profile, cloud))


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
