"""The instances of a name and their records, on the API client (``AwsApi``): the typed adapter between boto3's
untyped ``DescribeInstances`` answers and the rest of the AWS provider.

- The instances of a name: those tagged ``Name`` = NAME (a single VM) or ``trainvm-group`` = NAME (a cluster's
  nodes, named ``NAME-K``), one ``DescribeInstances`` on the ``tag-value`` filter, rank order.
- An instance is an ``Instance`` (the fields of EC2's ``Instance`` structure trainvm reads, plus ``_region``: where
  it was found); ``as_instance`` is the one place a boto3 dict becomes one.
- ``record`` makes the provider's ``InstanceRecord`` of an instance (its tags: profile, hash, prices, cluster rank).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Required, TypedDict, cast

from provisioner.providers.aws import request as R
from provisioner.providers.aws.clients import DescribeInstancesResult, Ec2Instance
from provisioner.providers.aws.group_request import GROUP_TAG, NODES_TAG, rank_of
from provisioner.providers.aws.params import Filter
from provisioner.providers.base import ConflictError, InstanceRecord, LaunchSpec, costs_from_labels, price_from_labels
from provisioner.providers.stack_report import StackReport, last_console_report
from provisioner.providers.store import PAYLOAD_LABEL

if TYPE_CHECKING:
    from provisioner.providers.aws.api import AwsApi

MANAGED = "trainvm-managed"
LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
STATES = {"pending": "PROVISIONING", "running": "RUNNING", "stopping": "STOPPING", "stopped": "STOPPED",
          "shutting-down": "DELETING", "terminated": "TERMINATED"}
SSH_USER = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "admin"}


class Instance(Ec2Instance, total=False):
    """The fields of EC2's ``Instance`` (DescribeInstances, RunInstances) that trainvm reads (aws/clients.py
    ``Ec2Instance``), and ``_region``."""

    _region: Required[str]  # trainvm's: the region it was found in


class ClusterFields(TypedDict, total=False):
    cluster: str
    rank: int | None
    nodes: int


def as_instance(raw: Ec2Instance, region: str) -> Instance:
    """An instance of EC2's answer, with the region it was found in."""
    return cast(Instance, {**raw, "_region": region})


def instances_of(pages: Iterable[DescribeInstancesResult], region: str) -> builtins.list[Instance]:
    """The instances of ``DescribeInstances`` pages (their reservations' instances)."""
    return [as_instance(i, region) for page in pages for r in page.get("Reservations") or []
            for i in r.get("Instances") or []]


def tags_of(inst: Instance) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags") or []}


def is_managed(inst: Instance) -> bool:
    return tags_of(inst).get(MANAGED) == "true"


def launch_notes(spec: LaunchSpec) -> builtins.list[str]:
    """What ``up`` says about who can reach the VM (its security group)."""
    among = "; the nodes reach each other on every port" if spec.nodes > 1 else ""
    if spec.ssh_from:
        return [f"SSH (tcp/22) is allowed only from {spec.ssh_from} (security group {R.security_group_name(spec.name)}){among}"]
    return [f"no inbound traffic is allowed (security group {R.security_group_name(spec.name)}); "
            f"pass --ssh-from to open SSH{among}"]


class AwsInstances:
    """The live instances of a name in a region or every region, one instance, its console, its record."""

    def __init__(self, api: AwsApi) -> None:
        self.api = api

    def live(self, region: str, name: str | None = None, *, managed: bool = True) -> builtins.list[Instance]:
        """The live instances (of ``name``: tagged ``Name`` or ``trainvm-group`` = name) in ``region``, rank order."""
        filters: builtins.list[Filter] = [{"Name": "instance-state-name", "Values": LIVE_STATES}]
        if name is not None:  # any tag of that value; narrowed to Name / trainvm-group below
            filters.append({"Name": "tag-value", "Values": [name]})
        if managed:
            filters.append({"Name": f"tag:{MANAGED}", "Values": ["true"]})
        ec2 = self.api.ec2(region)
        found = instances_of(self.api.call(lambda: list(ec2.get_paginator("describe_instances").paginate(Filters=filters))),
                             region)
        if name is not None:
            found = [i for i in found if name in (tags_of(i).get("Name"), tags_of(i).get(GROUP_TAG))]
        return sorted(found, key=_order)

    def get(self, region: str, instance_id: str) -> Instance | None:
        got = self.api.call(lambda: self.api.ec2(region).describe_instances(InstanceIds=[instance_id]), missing=None)
        found = instances_of([got] if got else [], region)
        return found[0] if found else None

    def everywhere(self, name: str) -> builtins.list[Instance]:
        """Every live instance of ``name`` in every region: trainvm's first, rank order."""
        found = self.api.each_region(lambda region: self.live(region, name, managed=False))
        return sorted(found, key=lambda i: (not is_managed(i), *_order(i)))

    def first(self, name: str) -> Instance | None:
        found = self.everywhere(name)
        return found[0] if found else None

    def managed(self, name: str) -> Instance | None:
        """The instance of ``name`` (a cluster's rank 0); a ConflictError when it is not trainvm's."""
        inst = self.first(name)
        if inst is not None and not is_managed(inst):
            raise ConflictError(f"{name} in {inst['_region']} is not managed by trainvm (no {MANAGED} tag); not touching it")
        return inst

    def nodes(self, cluster: str) -> builtins.list[Instance]:
        """The cluster's nodes in the region that has them (the one with rank 0 when several do), rank order."""
        found = [i for i in self.everywhere(cluster) if tags_of(i).get(GROUP_TAG) == cluster and is_managed(i)]
        return [i for i in found if i["_region"] == found[0]["_region"]]

    def console_text(self, inst: Instance) -> str:
        region, iid = inst["_region"], inst["InstanceId"]
        got = self.api.call(lambda: self.api.ec2(region).get_console_output(InstanceId=iid, Latest=True), missing=None)
        return str((got or {}).get("Output") or "")  # botocore base64-decodes GetConsoleOutput's Output itself

    def report(self, inst: Instance) -> StackReport | None:
        return last_console_report(self.console_text(inst), f"{inst['InstanceId']}'s console output")

    def record(self, inst: Instance, *, notes: builtins.list[str] | None = None, existing: bool = False) -> InstanceRecord:
        tags = tags_of(inst)
        zone = (inst.get("Placement") or {}).get("AvailabilityZone")
        profile = R.profile_from_tags(tags) or {}
        stack = profile.get("stack") if isinstance(profile, dict) else None
        os_name = stack.get("os") if isinstance(stack, dict) else None
        user = SSH_USER.get(str(os_name), "ubuntu")
        launched = inst.get("LaunchTime")  # EC2: "the time that the instance was last launched" (each start resets it)
        when = launched.isoformat() if isinstance(launched, datetime) else (str(launched) if launched else None)
        ip, state = inst.get("PublicIpAddress"), inst["State"]["Name"]
        return InstanceRecord(
            name=tags.get("Name", inst["InstanceId"]), cloud="aws", region=inst["_region"], zone=zone,
            instance_type=inst.get("InstanceType", ""), state=STATES.get(state, state.upper()),
            profile=tags.get("trainvm-profile"), hash=tags.get("trainvm-hash"), price_hourly=price_from_labels(tags),
            **costs_from_labels(tags), created=when, last_start=when,
            last_stop=stop_time(inst.get("StateTransitionReason")),
            ip=ip, image=tags.get("trainvm-image") or inst.get("ImageId"),
            ssh_command=f"ssh {user}@{ip}" if ip else None, ssh_user=user,
            notes=tuple(notes or ()), adopted=existing, spot=inst.get("InstanceLifecycle") == "spot",
            owner=tags.get("trainvm-owner"), cloud_id=inst["InstanceId"], payload=tags.get(PAYLOAD_LABEL),
            **_cluster_fields(tags))


_STOPPED_AT = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


def stop_time(reason: str | None) -> str | None:
    """When a stop was asked, from EC2's ``StateTransitionReason`` ("User initiated (2026-11-20 10:00:00 GMT)");
    None where the reason carries no time (e.g. a shutdown from inside the guest)."""
    m = _STOPPED_AT.search(reason or "")
    return m.group(1).replace(" ", "T") + "+00:00" if m else None


def _order(inst: Instance) -> tuple[int, int]:
    """A cluster's nodes by rank, then by launch index; a single VM is rank 0."""
    return (rank_of(tags_of(inst)) or 0, int(inst.get("AmiLaunchIndex") or 0))


def _cluster_fields(tags: dict[str, str]) -> ClusterFields:
    """InstanceRecord.cluster/rank/nodes of a cluster's node (aws_group_request's tags); nothing for one VM."""
    if not tags.get(GROUP_TAG):
        return {}
    nodes = tags.get(NODES_TAG, "")
    return {"cluster": tags[GROUP_TAG], "rank": rank_of(tags), "nodes": int(nodes) if nodes.isdigit() else 1}
