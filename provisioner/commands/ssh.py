"""``trainvm ssh NAME [--node K] [-- CMD...]``: exec ``ssh`` (on GCE ``gcloud compute ssh``, which installs your
key) with the VM's user, key and address, as the VM's provider knows them (``Provider.ssh_argv``).
For a cluster, ``--node K`` picks node K (rank order, default 0). Before that, a short TCP probe of port 22: when it does not answer, say how to open the firewall
(``Provider.open_ssh_hint``) instead of letting ssh hang."""

from __future__ import annotations

import os
import shutil
import socket

from provisioner.commands.clouds import check_name, locate_one, providers_for
from provisioner.commands.verify import not_found
from provisioner.errors import InputError, TrainvmError
from provisioner.settings import env_seconds


class SshClosedError(TrainvmError):
    exit_code = 1


def port_open(host: str, port: int = 22, timeout: float = 5.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _exec(argv: list[str]) -> None:  # replaced in tests
    os.execvp(argv[0], argv)


def run_ssh(name: str, command: list[str], cloud: str | None = None, node: int | None = None) -> int:
    probe = env_seconds("TRAINVM_SSH_PROBE_SECONDS", 5.0)  # 0: skip the probe
    located = locate_one(check_name(name), providers_for(cloud), "ssh")
    if located is None:
        raise not_found(name, cloud)
    record, provider = located
    if record.cluster:  # a cluster: node K (default 0, the one holding MASTER_ADDR)
        nodes = provider.cluster_nodes(record.cluster)
        k = 0 if node is None else node
        if not 0 <= k < len(nodes):
            raise InputError(f"--node {k}: cluster {record.cluster} has {len(nodes)} nodes (--node 0 to {len(nodes) - 1})")
        record = nodes[k]
        name = record.name
    elif node not in (None, 0):
        raise InputError(f"--node {node}: {name} is a single VM, not a cluster (it is node 0)")
    if not record.ip:
        raise InputError(f"{name} has no public IP address; it may still be starting or be stopped",
                         hint=f"`trainvm status {name}` shows its state")
    argv = provider.ssh_argv(record, list(command))
    if shutil.which(argv[0]) is None:
        raise InputError(f"`{argv[0]}` is not on PATH; trainvm ssh runs: {' '.join(argv)}")
    if probe > 0 and not port_open(record.ip, record.ssh_port, probe):
        raise SshClosedError(f"SSH (tcp:{record.ssh_port}) on {name} ({record.ip}) did not answer within {probe:g} s",
                             hint=provider.open_ssh_hint(record))
    _exec(argv)
    return 0
