"""``trainvm verify NAME``: compare a VM's stack report with the profile it was created from."""

from __future__ import annotations

from typing import Any

from provisioner.commands.clouds import locate_one, providers_for
from provisioner.errors import CloudError
from provisioner.output import emit_json, escape, stdout_console


def _print_verify(target: str, result: Any, json_out: bool) -> int:
    if json_out:
        emit_json(result.as_dict(target))
    else:
        from rich.table import Table

        out = stdout_console()
        table = Table(show_edge=False, pad_edge=False)
        for col in ("field", "expected", "observed", "verdict"):
            table.add_column(col)
        for field, expected, observed, verdict in result.rows():
            style = None if verdict == "ok" else "red"
            table.add_row(escape(field), escape(expected), escape(observed), verdict, style=style)
        out.print(table)
        out.print(f"{target}: [bold]{result.status}[/bold]")
    return 0 if result.status == "match" else 1


def run_verify_remote(name: str, json_out: bool, cloud: str | None = None) -> int:
    from provisioner.verify.compare import compare

    providers = providers_for(cloud)
    located = locate_one(name, providers, "verify")
    if located is None:
        raise CloudError(f"no trainvm VM named {name} on {cloud or 'any cloud with credentials'}")
    record, provider = located
    report, profile = provider.read_report(name)
    result = compare(profile or {}, report)
    if json_out:
        emit_json({**result.as_dict(name), "cloud": record.cloud, "location": record.zone or record.region})
        return 0 if result.status == "match" else 1
    stdout_console().print(f"{name} on {record.cloud} {record.zone or record.region}")
    return _print_verify(name, result, json_out)
