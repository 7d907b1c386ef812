"""Pure request bodies of a GCE cluster (hardware.nodes > 1; docs/spec.md "Multi-node clusters"): the node
body (one ``instances.insert`` body, as ``gcp_group`` turns it into bulkInsert's ``instanceProperties``), the
intra-cluster firewall rule, and what a node's labels say about its cluster. No SDK import.

- Every node carries the labels ``trainvm-cluster=NAME`` and ``trainvm-nodes=N`` (bulkInsert gives all nodes the
  same properties), ``trainvm-rank=K`` (set per node after the bulkInsert; until then the rank is the name's
  suffix, ``gcp_group.node_names``) and the network tag ``cluster_tag(NAME)``.
- ``NAME-internal`` allows all TCP, UDP and ICMP from the nodes to the nodes (source and target: the cluster's
  tag): torchrun's c10d store and NCCL use arbitrary ports. It is made before the nodes and deleted after them.
"""

from __future__ import annotations

from provisioner.providers.base import LaunchSpec
from provisioner.providers.gcp.group import (
    CLUSTER_LABEL,
    RANK_LABEL,
    bulk_body,
    instance_properties,
    node_names,
    policy_body,
    policy_name,
)
from provisioner.providers.gcp.request import fit_name, instance_body, network_url
from provisioner.providers.gcp.rest_types import FirewallRule, InstanceBody
from provisioner.providers.offer import Offer

NODES_LABEL = "trainvm-nodes"


def cluster_tag(cluster: str) -> str:
    """The network tag every node of ``cluster`` carries (the internal rule's source and target)."""
    return fit_name(cluster, "-nodes")


def internal_rule_name(cluster: str) -> str:
    return fit_name(cluster, "-internal")


def node_body(spec: LaunchSpec, offer: Offer, image: str, project: str) -> InstanceBody:
    """One node's ``instances.insert`` body: the single-VM body with the cluster's labels and network tag."""
    body = instance_body(spec, offer, image, project)
    body["labels"] = {**body["labels"], CLUSTER_LABEL: spec.name, NODES_LABEL: str(spec.nodes)}
    tags = body.get("tags")
    body["tags"] = {"items": [*(tags["items"] if tags else []), cluster_tag(spec.name)]}
    return body


def internal_rule_body(spec: LaunchSpec, project: str) -> FirewallRule:
    """``firewalls.insert``: all TCP/UDP/ICMP between the nodes of the cluster, nothing from elsewhere."""
    tag = cluster_tag(spec.name)
    return {"name": internal_rule_name(spec.name),
            "description": f"trainvm: traffic between the nodes of cluster {spec.name} (profile {spec.profile_name}, "
                           f"sha256 {spec.profile_hash[:16]})",
            "network": network_url(project), "direction": "INGRESS", "priority": 1000,
            "sourceTags": [tag], "targetTags": [tag],
            "allowed": [{"IPProtocol": "tcp", "ports": ["0-65535"]}, {"IPProtocol": "udp", "ports": ["0-65535"]},
                        {"IPProtocol": "icmp"}]}


def is_internal_rule(rule: FirewallRule, cluster: str) -> bool:
    """A rule trainvm made for ``cluster`` (a re-run reuses it, ``down`` deletes it)."""
    return (str(rule.get("description") or "").startswith(f"trainvm: traffic between the nodes of cluster {cluster} ")
            and list(rule.get("targetTags") or ()) == [cluster_tag(cluster)])


def cluster_of(name: str, labels: dict[str, str]) -> tuple[str | None, int | None, int]:
    """(cluster, rank, nodes) of an instance from its name and labels; (None, None, 1) for a single VM."""
    cluster = labels.get(CLUSTER_LABEL)
    if not cluster:
        return None, None, 1
    try:
        nodes = max(1, int(labels.get(NODES_LABEL, "1")))
    except ValueError:
        nodes = 1
    rank = labels.get(RANK_LABEL, "")
    if rank.isdigit() and int(rank) < nodes:
        return cluster, int(rank), nodes
    names = node_names(cluster, nodes)  # before the rank label is written: the name's suffix
    return cluster, (names.index(name) if name in names else None), nodes


def request_preview(spec: LaunchSpec, offer: Offer, image: str, project: str) -> dict[str, object]:
    """Every body ``up`` sends for the cluster, in order: the compact policy (when ``spec.compact``), the internal
    firewall rule, the bulkInsert (the SSH rules of ``ssh_from`` are the single VM's)."""
    zone = str(offer.zone)
    region = zone.rsplit("-", 1)[0]
    link = f"projects/{project}/regions/{region}/resourcePolicies/{policy_name(spec.name)}" if spec.compact else None
    out: dict[str, object] = {}
    if spec.compact:
        out["resourcePolicies.insert"] = policy_body(spec.name, region)
    out["firewalls.insert"] = internal_rule_body(spec, project)
    out["instances.bulkInsert"] = bulk_body(node_names(spec.name, spec.nodes),
                                            instance_properties(node_body(spec, offer, image, project), link))
    return out
