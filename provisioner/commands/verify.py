"""``trainvm verify NAME``: compare a VM's stack report with the profile it was created from.

States (JSON ``status``) and exit codes: ``match`` 0; ``drift`` 1; ``failed`` 1 (the startup script
failed: phase, line and its message); ``provisioning`` 5 (no report yet, or ``running:PHASE``: "provisioning (phase P)", no table and no drift
rows; a cluster's nodes still provisioning are "pending" rows, never DRIFT); ``rehearsed`` 6 (a profile rehearsed on a machine without a GPU, ``CloudSpec.rehearsal``:
every phase ran, nothing drifted, and the GPU facts are "not checked" rows: never a match). A VM
whose stored profile cannot be read is an error (exit 3), never a match; so is a report that is there but cannot be
read (``ReportUnreadableError`` from the provider's strict reader, naming the channel and each bad field), never
"provisioning"; ``--profile FILE`` verifies against a local profile instead."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.commands.clouds import check_name, locate_one, providers_for
from provisioner.errors import EXIT_NO, EXIT_NOT_READY, EXIT_OK, EXIT_REHEARSED, CloudError, NotFoundError
from provisioner.output import emit_json, stdout_console, styled
from provisioner.profile import load_profile
from provisioner.providers.capabilities import ClusterReader
from provisioner.verify.cluster import compare_cluster
from provisioner.verify.compare import compare

if TYPE_CHECKING:
    from provisioner.providers.base import InstanceRecord, Provider
    from provisioner.verify.compare import VerifyResult

STATE_STYLE = {"match": "bold green", "drift": "bold red", "failed": "bold red", "provisioning": "bold yellow",
               "rehearsed": "bold yellow"}


def exit_code(result: VerifyResult) -> int:
    return {"match": EXIT_OK, "provisioning": EXIT_NOT_READY, "rehearsed": EXIT_REHEARSED}.get(result.status, EXIT_NO)


def print_verify(target: str, result: VerifyResult, json_out: bool, extra: dict[str, object] | None = None) -> int:
    if json_out:
        emit_json({**result.as_dict(target), **(extra or {})})
    else:
        from rich.table import Table

        out = stdout_console()
        rows = result.rows()
        if any(verdict != "pending" for *_, verdict in rows):  # a VM still provisioning: nothing judged, no table
            table = Table(show_edge=False, pad_edge=False)
            for col in ("field", "expected", "observed", "verdict"):
                table.add_column(col)
            for field, expected, observed, verdict in rows:
                table.add_row(field, expected, observed, verdict, style="red" if verdict == "DRIFT" else None)
            out.print(table)
        out.print(styled(f"{target}: ", (result.describe(), STATE_STYLE.get(result.status, "bold"))))
    return exit_code(result)


_print_verify = print_verify  # verify --local (commands/mirror.py)


def not_found(name: str, cloud: str | None = None) -> NotFoundError:
    return NotFoundError(f"no trainvm VM named {name} on {cloud or 'any cloud with credentials'}",
                         hint="`trainvm list` shows the VMs trainvm can see")


def run_verify_remote(name: str, json_out: bool, profile_path: Path | None = None, cloud: str | None = None) -> int:
    check_name(name)
    providers = providers_for(cloud)
    located = locate_one(name, providers, "verify")
    if located is None:
        raise not_found(name, cloud)
    record, provider = located
    report, stored = provider.read_report(name)
    if profile_path is not None:
        profile = load_profile(profile_path).profile.model_dump(mode="json")
    elif stored is None:
        raise CloudError(f"the profile stored on {name} ({record.cloud}) could not be read, so there is nothing to verify against",
                         hint=f"verify against the profile file instead: trainvm verify {name} --profile PROFILE.yaml")
    else:
        profile = stored
    nodes = int((profile.get("hardware") or {}).get("nodes") or 1)
    if nodes > 1:
        result = _verify_cluster(name, record, provider, profile, nodes)
    else:
        result = compare(profile, report)
    if not json_out:
        stdout_console().print(f"{name} on {record.cloud} {record.zone or record.region}")
    return print_verify(name, result, json_out, {"cloud": record.cloud, "location": record.zone or record.region})


def _verify_cluster(name: str, record: InstanceRecord, provider: Provider, profile: dict[str, object], nodes: int) -> VerifyResult:
    """Every node's report (the provider's ``read_cluster_reports(name)``: node name -> report or None,
    rank order) judged against the profile and against each other (provisioner/verify/cluster.py)."""
    if not isinstance(provider, ClusterReader):
        raise CloudError(f"{name} is a {nodes}-node cluster, and trainvm cannot list a cluster's nodes on {record.cloud} yet",
                         hint="verify one node against the profile with --profile, or `trainvm verify --local` on each node")
    return compare_cluster(profile, provider.read_cluster_reports(name), nodes)
