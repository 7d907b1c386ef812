"""``trainvm down``: delete a VM and everything created for it (idempotent). For a cluster: every node, its
placement resources and its firewall rules / network resources (the provider's ``delete``), and how many nodes."""

from __future__ import annotations

import sys

from provisioner.commands.clouds import check_name, locate_one, providers_for
from provisioner.errors import InputError
from provisioner.output import emit_json, stdout_console


def run_down(name: str, *, yes: bool, wait: bool, json_out: bool, cloud: str | None = None) -> int:
    check_name(name)
    providers = providers_for(cloud)
    located = locate_one(name, providers, "down")
    if located is None:
        # The VM is gone (deleted, or a spot VM evicted), but what was created for it may remain
        # (Azure: the resource group with its VNet/NSG). delete() is idempotent and cleans that up.
        cleaned = [cloud for cloud, provider in providers.items() if provider.delete(name, wait=wait)]
        if cleaned:
            if json_out:
                emit_json({"name": name, "cloud": cleaned[0], "clouds": cleaned, "deleted": True, "already_gone": True, "waited": wait})
            else:
                stdout_console().print(f"{name}: VM already gone; removed what was left on {', '.join(cleaned)}")
            return 0
        if json_out:
            emit_json({"name": name, "cloud": None, "clouds_checked": list(providers), "deleted": False, "already_gone": True})
        else:
            stdout_console().print(f"{name}: already gone (checked {', '.join(providers)})")
        return 0
    record, provider = located
    if record.cluster and record.cluster != name:
        raise InputError(f"{name} is node {record.rank} of cluster {record.cluster}; a cluster is deleted as a whole",
                         hint=f"trainvm down {record.cluster}")
    nodes = len(provider.cluster_nodes(record.cluster)) if record.cluster else 0
    noun = f"cluster {name} ({nodes} nodes)" if record.cluster else name
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(f"`down` would delete {noun} on {record.cloud}; pass --yes to confirm when not running interactively")
        import typer

        if not typer.confirm(f"Delete {noun} ({record.cloud} {record.zone or record.region}) and everything created for it?"):
            return 1
    deleted = provider.delete(name, wait=wait)
    if json_out:
        emit_json({"name": name, "cloud": record.cloud, "deleted": deleted, "already_gone": not deleted, "waited": wait,
                   **({"cluster": True, "nodes": nodes} if record.cluster else {})})
    else:
        where = f"{record.cloud} {record.zone or record.region}"
        if record.cluster and deleted:
            stdout_console().print(f"{name} on {where}: deleted {nodes} nodes and the cluster's placement and network resources"
                                   + ("" if wait else " (deletion in progress)"))
        else:
            stdout_console().print(f"{name} on {where}: {'deleted' if deleted else 'already gone'}" + ("" if wait or not deleted else " (deletion in progress)"))
    return 0
