"""AWS: the EC2 requests of the one create path (providers/aws/group.py) beyond the single VM's: a single VM is a
group of one and sends aws_request's body as it is (``launch_params``); a cluster's (hardware.nodes > 1) are built
from it. Pure: no boto3 import.

- ``CreatePlacementGroup``: ``Strategy=cluster``, named after the cluster, tagged like the VM (placement
  group names are unique per account and region, at most 255 ASCII characters);
- ``RunInstances``: the single VM's body (aws_request.run_instances_params) with ``MinCount = MaxCount = N``
  (EC2 launches all N or none), ``Placement.GroupName`` when compact, and
  ``MetadataOptions.InstanceMetadataTags=enabled`` (each node reads the node list from IMDS tags). EC2 gives
  every instance of one request the same tags, so the launch tags carry the cluster (``trainvm-group``) and
  its size (``trainvm-nodes``) but no ``Name``: ``Name`` = ``NAME-K`` and ``trainvm-rank`` = K are tagged per
  node afterwards, K being the order of ``AmiLaunchIndex`` (RunInstances answers in no guaranteed order).
  The node list (``trainvm-cluster``, ``-1``, ... from render/cluster.py) is tagged once all nodes run.
- The security group additionally lets every member of the group reach every other on any protocol and
  port (a self-referencing rule): NCCL and c10d use arbitrary ports.
- The instance role may stop/terminate only instances tagged with this cluster (``trainvm-group``).
"""

from __future__ import annotations

import copy
import math

from provisioner.providers.aws import request as R
from provisioner.providers.aws.params import IpPermission, PlacementGroupParams, RunInstancesParams, Tag
from provisioner.providers.base import InvalidRequestError, LaunchSpec

GROUP_TAG = "trainvm-group"  # the cluster's name ("trainvm-cluster" is the node list: render/cluster.py)
RANK_TAG = "trainvm-rank"
NODES_TAG = "trainvm-nodes"
#: an IPv4 address and its comma take at most 16 characters of a 256-character tag value
_IPS_PER_TAG = R.TAG_VALUE_MAX // 16


def node_name(cluster: str, rank: int) -> str:
    return f"{cluster}-{rank}"


def placement_group_name(cluster: str) -> str:
    return cluster


def placement_group_params(spec: LaunchSpec) -> PlacementGroupParams:
    return {"GroupName": placement_group_name(spec.name), "Strategy": "cluster",
            "TagSpecifications": [{"ResourceType": "placement-group",
                                   "Tags": [Tag(Key=k, Value=v) for k, v in sorted(spec.labels.items())]
                                   + [Tag(Key="Name", Value=spec.name)]}]}


def node_list_tag_count(nodes: int) -> int:
    """The most tags the node list of ``nodes`` addresses takes (whole addresses per 256-character value)."""
    return math.ceil(nodes / _IPS_PER_TAG)


def cluster_params(single: RunInstancesParams, spec: LaunchSpec, placement_group: str | None) -> RunInstancesParams:
    """The RunInstances call for all nodes, from the single VM's ``run_instances_params``."""
    n = spec.nodes
    if n < 2:
        raise InvalidRequestError(f"a cluster has at least 2 nodes (hardware.nodes: {n})")
    body = copy.deepcopy(single)
    body["MinCount"] = body["MaxCount"] = n
    if placement_group:
        body["Placement"]["GroupName"] = placement_group
    cluster_tags: list[Tag] = [{"Key": GROUP_TAG, "Value": spec.name}, {"Key": NODES_TAG, "Value": str(n)}]
    for ts in body["TagSpecifications"]:
        ts["Tags"] = [t for t in ts["Tags"] if t["Key"] != "Name"] + cluster_tags
    later = 2 + node_list_tag_count(n)  # Name, trainvm-rank, the node list
    count = len(body["TagSpecifications"][0]["Tags"]) + later
    if count > R.MAX_TAGS:
        raise InvalidRequestError(f"a node of {n} needs {count} tags (the resolved profile's, the cluster's and "
                                  f"the node list's); EC2 allows {R.MAX_TAGS} per instance",
                                  code="PROFILE_TOO_LARGE")
    body["ClientToken"] = R.request_token(spec, "", body)  # another request than the single VM's
    return body


def launch_params(single: RunInstancesParams, spec: LaunchSpec, placement_group: str | None) -> RunInstancesParams:
    """The one RunInstances of 1..N nodes: a single VM's body as it is (a group of one), a cluster's from it."""
    return single if spec.nodes == 1 else cluster_params(single, spec, placement_group)


def node_tags(cluster: str, rank: int) -> list[Tag]:
    return [{"Key": "Name", "Value": node_name(cluster, rank)}, {"Key": RANK_TAG, "Value": str(rank)}]


def member_ingress(group_id: str) -> list[IpPermission]:
    """All traffic from members of the security group itself (the cluster's nodes)."""
    return [{"IpProtocol": "-1", "UserIdGroupPairs": [
        {"GroupId": group_id, "Description": "trainvm cluster: all traffic between its nodes"}]}]


def rank_of(tags: dict[str, str]) -> int | None:
    raw = tags.get(RANK_TAG, "")
    return int(raw) if raw.isdigit() else None


def preview(spec: LaunchSpec, single: RunInstancesParams) -> dict[str, object]:
    """``request_preview``'s cluster part: the placement group and the RunInstances for N."""
    pg = placement_group_name(spec.name) if spec.compact else None
    out: dict[str, object] = {}
    if pg:
        out["CreatePlacementGroup"] = placement_group_params(spec)
    out["RunInstances"] = cluster_params(single, spec, pg)
    out["AuthorizeSecurityGroupIngress"] = {"GroupId": single["SecurityGroupIds"][0],
                                            "IpPermissions": member_ingress(single["SecurityGroupIds"][0])}
    return out
