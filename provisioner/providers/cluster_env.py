"""The node-list format of a multi-node cluster, shared by the group engines (providers/<cloud>/group.py: the writer)
and the startup script (render/cluster.py and its template: the reader). It lives beside the provider contract so
that a cloud package needs nothing from render/ (issue 37: providers import nothing above them).

The node list is the nodes' private IPv4 addresses in rank order (rank 0 first: its address is MASTER_ADDR),
comma-separated, in the instance metadata item / tag ``trainvm-cluster`` that the provider writes on every node after
the group is created. Where one value is too short for the list (Azure and AWS tags hold 256 characters), it
continues in ``trainvm-cluster-1``, ``trainvm-cluster-2``, ...; each item holds whole addresses."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

META_KEY = "trainvm-cluster"


def node_list_metadata(ips: list[str], value_limit: int) -> dict[str, str]:
    """The metadata items/tags that carry ``ips`` (rank order) in values of at most ``value_limit``."""
    if not ips:
        raise ValueError("a cluster has at least one node")
    for ip in ips:
        if not isinstance(ipaddress.ip_address(ip), ipaddress.IPv4Address):
            raise ValueError(f"{ip}: node addresses are private IPv4 addresses")
    if len(set(ips)) != len(ips):
        raise ValueError("a node address appears twice in the node list")
    chunks: list[list[str]] = [[]]
    for ip in ips:
        if chunks[-1] and len(",".join([*chunks[-1], ip])) > value_limit:
            chunks.append([])
        chunks[-1].append(ip)
    return {META_KEY if i == 0 else f"{META_KEY}-{i}": ",".join(c) for i, c in enumerate(chunks)}


def parse_node_list(items: Mapping[str, str]) -> list[str]:
    """The inverse of ``node_list_metadata`` (what the script does in bash), for tests and ``status``."""
    out: list[str] = []
    i = 0
    key = META_KEY
    while items.get(key):
        out.extend(items[key].split(","))
        i += 1
        key = f"{META_KEY}-{i}"
    return out
