"""``trainvm down``: delete a VM and everything created for it (idempotent for a VM that existed: "already gone",
exit 0, when this machine's record (commands/vm_record.py) has the name or leftovers were cleaned; a name no
cloud has and trainvm never made here is exit 4, naming the live VMs it resembles). For a cluster: every node, its
placement resources and its firewall rules / network resources (the provider's ``delete``), and how many nodes.
Several VMs of one name (EC2 keeps no name unique): every one is deleted and reported, and `down` fails (exit 3)
naming those that remain. The payload object it was created with goes too (providers/store.py ``release_payload``, as ``bake`` releases its builder's), unless another VM of that store still
uses it (the ``trainvm-payload`` label); the store itself is kept."""

from __future__ import annotations

import difflib
import sys
from typing import TYPE_CHECKING

import typer

from provisioner.commands import vm_record
from provisioner.commands.clouds import check_name, locate_one, providers_for
from provisioner.errors import CloudError, InputError, NotFoundError
from provisioner.output import emit_json, stdout_console
from provisioner.providers.store import release_payload as release_payload  # its old home: callers import it here

if TYPE_CHECKING:
    from provisioner.providers.base import InstanceRecord, Provider


def run_down(name: str, *, yes: bool, wait: bool, json_out: bool, cloud: str | None = None, missing_ok: bool = False) -> int:
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
        seen = vm_record.known(name)
        if seen is None and not missing_ok:  # a name trainvm never made here (a typo?): never "success"
            raise _no_such_vm(name, providers)
        if json_out:
            emit_json({"name": name, "cloud": None, "clouds_checked": list(providers), "deleted": False, "already_gone": True,
                       "recorded": seen})
        else:
            why = (f"; {seen['by']} {'created' if seen['by'] == 'up' else 'deleted'} it on {seen.get('cloud')} at {seen.get('at')}"
                   if seen else "")
            stdout_console().print(f"{name}: already gone (checked {', '.join(providers)}{why})")
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

        if not typer.confirm(f"Delete {noun} ({record.cloud} {record.zone or record.region}) and everything created for it?"):
            return 1
    twins = [] if record.cluster else same_name(provider, name)  # EC2 keeps no name unique: two `up` may make two
    deleted = provider.delete(name, wait=wait)
    vm_record.note(name, record.cloud, "down")  # a second `down` here says "already gone", not "no VM named"
    left = _delete_twins(provider, name, twins) if len(twins) > 1 and wait else []
    payload = release_payload(provider, record, name)
    instances = [{"id": t.cloud_id, "zone": t.zone or t.region, "deleted": t.cloud_id not in {r.cloud_id for r in left}}
                 for t in twins] if len(twins) > 1 else []
    if json_out:
        emit_json({"name": name, "cloud": record.cloud, "deleted": deleted, "already_gone": not deleted, "waited": wait,
                   "payload": payload, **({"cluster": True, "nodes": nodes} if record.cluster else {}),
                   **({"instances": instances, "remaining": len(left)} if instances else {})})
    else:
        for one in instances:
            stdout_console().print(f"{name} ({one['id']}, {one['zone']}): "
                                   + ("deleted" if one["deleted"] else "still exists") + ("" if wait else " (deletion in progress)"))
        where = f"{record.cloud} {record.zone or record.region}"
        if record.cluster and deleted:
            stdout_console().print(f"{name} on {where}: deleted {nodes} nodes and the cluster's placement and network resources"
                                   + ("" if wait else " (deletion in progress)"))
        else:
            stdout_console().print(f"{name} on {where}: {'deleted' if deleted else 'already gone'}" + ("" if wait or not deleted else " (deletion in progress)"))
        if payload["state"] != "none":
            stdout_console().print(f"payload {payload['sha256'] or ''}: {payload['message']}")
    if left:
        raise CloudError(f"{len(left)} of {len(twins)} VMs named {name} on {record.cloud} remain after `down`: "
                         + ", ".join(f"{r.cloud_id} ({r.zone or r.region})" for r in left),
                         hint=f"run `trainvm down {name}` again; `trainvm status {name}` lists them")
    return 0


class NoSuchVmError(NotFoundError):
    """``down`` of a name no cloud has and this machine never created (exit 4); ``similar``: live trainvm VMs whose
    names resemble it (the ``--json`` error document carries them)."""

    def __init__(self, message: str, *, hint: str | None = None, similar: list[str]) -> None:
        super().__init__(message, hint=hint)
        self.similar = similar


def _no_such_vm(name: str, providers: dict[str, Provider]) -> NotFoundError:
    """Exit 4 for a name no cloud has and this machine never created: with the live trainvm VMs it resembles."""
    names: list[str] = []
    for provider in providers.values():
        try:
            names.extend(dict.fromkeys(r.cluster or r.name for r in provider.list()))
        except CloudError:  # the similar names are a courtesy: the answer is the same without them
            continue
    similar = difflib.get_close_matches(name, list(dict.fromkeys(names)), n=3, cutoff=0.75)
    return NoSuchVmError(
        f"no VM named {name} on {', '.join(providers)}, and trainvm on this machine never created one"
        + (f"; did you mean {' or '.join(similar)}?" if similar else ""),
        hint=("`trainvm list` shows the VMs trainvm can see; a VM created and deleted from another machine leaves "
              f"no record here: `trainvm down {name} --missing-ok` exits 0 for a name that is gone"), similar=similar)


def same_name(provider: Provider, name: str) -> list[InstanceRecord]:
    """Every single VM (not a cluster node) called ``name`` on ``provider``'s cloud."""
    return [r for r in provider.list() if r.name == name and not r.cluster]


def _delete_twins(provider: Provider, name: str, twins: list[InstanceRecord]) -> list[InstanceRecord]:
    """After ``delete``, those of ``twins`` that remain: ``delete`` again while it removes one more each time (a
    provider whose ``delete`` takes one VM of the name per call), at most once per twin."""
    left = same_name(provider, name)
    for _ in twins:
        if not left:
            break
        provider.delete(name, wait=True)
        now = same_name(provider, name)
        if len(now) >= len(left):
            break
        left = now
    return left
