"""Multi-node rendezvous (hardware.nodes > 1): what the startup script needs to write the torchrun/MPI
variables into /etc/trainvm/env, and the node-list format shared by the providers (writer) and the
script (reader).

The node list is the nodes' private IPv4 addresses in rank order (rank 0 first: its address is
MASTER_ADDR), comma-separated, in the instance metadata item / tag ``trainvm-cluster`` that the provider
writes on every node after the group is created. Where one value is too short for the list (Azure and
AWS tags hold 256 characters), it continues in ``trainvm-cluster-1``, ``trainvm-cluster-2``, ...; each
item holds whole addresses. A node finds its own rank as the index of the listed address that one of its
interfaces has (``ip -4 -o addr``), and that interface is NCCL_SOCKET_IFNAME. The writer's side (``META_KEY``,
``node_list_metadata``, ``parse_node_list``) lives in providers/cluster_env.py, which the group engines import; it is
re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provisioner.catalog.families import family_of
from provisioner.errors import RenderError
from provisioner.providers.cluster_env import META_KEY, node_list_metadata, parse_node_list
from provisioner.providers.registry import placement

__all__ = ["META_KEY", "ClusterContext", "cluster_context", "node_list_metadata", "parse_node_list"]
#: torchrun's default --master-port (static rendezvous).
MASTER_PORT = 29500
#: How many times the script looks for the node list (TV_RETRY_SLEEP, 10 s, apart): 15 minutes.
WAIT_ATTEMPTS = 90
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:/=-]*$")
_ENV_KEY = re.compile(r"^[A-Z_][A-Z0-9_]*$")


@dataclass(frozen=True)
class ClusterContext:
    nodes: int
    nproc_per_node: int
    master_port: int
    meta_key: str
    wait_attempts: int
    fabric: str  # the transport NCCL will use: the shape's fabric when usable, else tcp
    nccl_env: tuple[str, ...]  # KEY=VALUE lines (plain values, no quoting needed)

    @property
    def static_env(self) -> tuple[str, ...]:
        """The rendezvous values known at render time (the script adds MASTER_ADDR and NODE_RANK)."""
        return (f"MASTER_PORT={self.master_port}", f"NNODES={self.nodes}", f"NPROC_PER_NODE={self.nproc_per_node}",
                f"WORLD_SIZE={self.nodes * self.nproc_per_node}")


def cluster_context(nodes: int, cloud: str, instance_type: str, gpu_count: int) -> ClusterContext | None:
    """None for one node (``nodes``: the profile's ``hardware.nodes``); else the rendezvous values of a node of
    ``instance_type``."""
    if nodes <= 1:
        return None

    facts = placement(cloud, family_of(cloud, instance_type), instance_type)
    fabric = facts.fabric
    if not fabric.usable:
        from provisioner.providers.placement import fabrics  # lazy: startup

        fabric = fabrics()["tcp"]
    env = []
    for key, value in sorted(fabric.nccl_env.items()):
        if not _ENV_KEY.match(key) or not _SAFE_VALUE.match(value):
            raise RenderError(f"placement facts: NCCL variable {key}={value!r} is not a plain KEY=VALUE")
        env.append(f"{key}={value}")
    return ClusterContext(nodes, gpu_count, MASTER_PORT, META_KEY, WAIT_ATTEMPTS, fabric.name, tuple(env))
