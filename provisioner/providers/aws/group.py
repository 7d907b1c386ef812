"""The AWS group engine for clusters (hardware.nodes > 1): a cluster placement group (when compact), then one
``RunInstances`` with ``MinCount = MaxCount = N`` (EC2 launches all N or none: an InsufficientInstanceCapacity
answer means nothing was created), ranks by ``AmiLaunchIndex`` tagged per node (``Name`` = ``NAME-K``,
``trainvm-rank``), and the node list tagged on every node once all run (requests: aws_group_request.py).

All or nothing: any failure after the launch terminates every node that exists, awaits the termination, then
deletes the placement group (EC2 refuses while a member is not terminated: ``InvalidPlacementGroup.InUse``,
retried for a bounded time), the security group, the instance profile and the key pair, and marks the error
``verified``; a capacity error so raised lets failover move the whole group to the next AZ. A re-run with the
same spec in the same AZ sends the same ``ClientToken`` (EC2 answers it with that request's instances).

Called by ``AwsProvider`` for a spec with ``nodes > 1`` and for names that are a cluster's: ``find`` returns the
rank-0 node's record, ``delete``/``stop``/``start`` act on every node. EFA interfaces are not requested:
trainvm installs no EFA software, so NCCL runs over TCP on the primary ENA interface (docs/spec.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from provisioner.catalog.models import Offer
from provisioner.providers.aws import group_request as G
from provisioner.providers.aws import request as R
from provisioner.providers.base import (
    AttemptInProgressError,
    CapacityError,
    ConflictError,
    InstanceRecord,
    InvalidRequestError,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
)
from provisioner.render.cluster import node_list_metadata

if TYPE_CHECKING:
    from provisioner.providers.aws.provider import AwsProvider
    from provisioner.verify.report import StackReport

T = TypeVar("T")
#: Per-node calls (rank tags, console reads) in flight at once.
PARALLEL = 16
LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


def _tags(inst: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags") or []}


def _order(inst: dict[str, Any]) -> tuple[int, int]:
    rank = G.rank_of(_tags(inst))
    return (rank if rank is not None else 1 << 30, int(inst.get("AmiLaunchIndex") or 0))


def _each(fn: Callable[[Any], T], items: list[Any]) -> list[T]:
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(items)))) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [f.result() for f in futures]


class AwsGroup:
    def __init__(self, provider: AwsProvider) -> None:
        self.p = provider

    # ------------------------------------------------------------------ lookups
    def nodes_in(self, region: str, cluster: str, *, managed: bool = True) -> list[dict[str, Any]]:
        """The live instances tagged ``trainvm-group=cluster`` in ``region``, rank order."""
        filters = [{"Name": "instance-state-name", "Values": LIVE_STATES},
                   {"Name": f"tag:{G.GROUP_TAG}", "Values": [cluster]}]
        if managed:
            filters.append({"Name": "tag:trainvm-managed", "Values": ["true"]})
        ec2 = self.p.ec2(region)
        pages = self.p.call(lambda: list(ec2.get_paginator("describe_instances").paginate(Filters=filters)))
        found = [dict(i, _region=region) for page in pages for r in page.get("Reservations") or []
                 for i in r.get("Instances") or []]
        return sorted(found, key=_order)

    def nodes(self, cluster: str) -> list[dict[str, Any]]:
        """The cluster's nodes in the region that has them (the one with rank 0 when several do)."""
        found = self.p.each_region(lambda region: self.nodes_in(region, cluster))
        if not found:
            return []
        first = sorted(found, key=_order)[0]["_region"]
        return sorted((i for i in found if i["_region"] == first), key=_order)

    def cluster_nodes(self, cluster: str) -> list[InstanceRecord]:
        return [self.p._record(i) for i in self.nodes(cluster)]

    def read_cluster_reports(self, cluster: str) -> dict[str, StackReport | None]:
        from provisioner.verify.report import last_console_report

        nodes = self.nodes(cluster)
        texts = _each(self.p._console_text, nodes)
        return {self.p._record(i).name: last_console_report(t) for i, t in zip(nodes, texts, strict=True)}

    # ------------------------------------------------------------------ create
    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        region = offer.region
        if self.p._instances(region, spec.name, managed=False):
            raise ConflictError(f"an instance named {spec.name} already exists in {region}; a cluster of that name "
                                f"cannot be created next to it: run `trainvm down {spec.name}` or pass --name")
        existing = self.nodes_in(region, spec.name, managed=False)
        if existing:
            return self._adopt(existing, spec)
        zone = self.p.zone_name(region, str(offer.zone))
        ami = self.p.ami_for(spec, region)
        pg = G.placement_group_name(spec.name) if spec.compact else None
        G.cluster_params(R.run_instances_params(spec, offer, ami, zone, security_group_id="sg-check",
                                                instance_profile=None), spec, pg)  # checks first
        made: dict[str, Any] = {}
        try:
            gid, made["sg"] = self.p.ensure_security_group(region, spec)
            self._allow_members(region, gid)
            profile = self.p.ensure_instance_profile(spec, region)
            made["profile"] = profile is not None
            made["key"] = key = self.p.ensure_key_pair(region, spec)
            if pg:
                made["pg"] = True
                self._ensure_placement_group(region, spec)
            params = G.cluster_params(R.run_instances_params(spec, offer, ami, zone, security_group_id=gid,
                                                             instance_profile=profile, key_name=key), spec, pg)
            insts = self._launch(region, params, spec, str(offer.zone), made)
            self._tag_ranks(region, spec.name, insts)
            running = self._until_running(region, [i["InstanceId"] for i in insts], spec.name)
            self.write_node_list(region, running)
            return self.p._record(running[0], notes=self.p._notes(spec))
        except ProviderError as exc:
            self._cleanup(region, spec, made, exc)
            raise

    def _allow_members(self, region: str, group_id: str) -> None:
        perms = G.member_ingress(group_id)
        self.p.call(lambda: self.p.ec2(region).authorize_security_group_ingress(GroupId=group_id, IpPermissions=perms),
                    exists=None)

    def _ensure_placement_group(self, region: str, spec: LaunchSpec) -> None:
        params = G.placement_group_params(spec)
        ec2 = self.p.ec2(region)
        made = self.p.call(lambda: ec2.create_placement_group(**params), exists=None)
        if made is None and self._placement_group(region, spec.name) is None:
            raise ConflictError(f"the placement group {params['GroupName']} exists in {region} and is not trainvm's; "
                                "pass --name to choose another name")

    def _placement_group(self, region: str, cluster: str) -> dict[str, Any] | None:
        """The cluster's placement group when it exists and is trainvm's."""
        name = G.placement_group_name(cluster)
        got = self.p.call(lambda: self.p.ec2(region).describe_placement_groups(GroupNames=[name]), missing=None)
        for g in (got or {}).get("PlacementGroups") or []:
            if _tags(g).get("trainvm-managed") == "true":
                return dict(g)
        return None

    def _launch(self, region: str, params: dict[str, Any], spec: LaunchSpec, zone_id: str,
                made: dict[str, Any]) -> list[dict[str, Any]]:
        """RunInstances for all nodes (``made["ids"]`` set at once); EC2 answers a known ClientToken with that
        request's instances, even terminated ones: then once more with a token salted by the first's id."""
        insts: list[dict[str, Any]] = []
        for _ in range(3):
            insts = self.p._run(region, params)["Instances"]
            made["ids"] = [i["InstanceId"] for i in insts]
            if not any(i["State"]["Name"] in ("shutting-down", "terminated") for i in insts):
                break
            params["ClientToken"] = R.client_token(spec, zone_id, salt=min(made["ids"]))
        if len(insts) != spec.nodes:
            raise CapacityError(f"RunInstances launched {len(insts)} of {spec.nodes} nodes", code="MinCountNotMet")
        return sorted(insts, key=lambda i: int(i.get("AmiLaunchIndex") or 0))

    def _tag_ranks(self, region: str, cluster: str, insts: list[dict[str, Any]]) -> None:
        ec2 = self.p.ec2(region)

        def one(pair: tuple[int, dict[str, Any]]) -> None:
            rank, inst = pair
            tags = G.node_tags(cluster, rank)
            self.p.call(lambda: ec2.create_tags(Resources=[inst["InstanceId"]], Tags=tags))

        _each(one, list(enumerate(insts)))

    def _wait(self, region: str, waiter: str, ids: list[str]) -> None:
        """A botocore waiter over every node, bounded by the provider's ``op_timeout`` (``AwsCalls.wait``)."""
        self.p.wait(region, waiter, ids)

    def _until_running(self, region: str, ids: list[str], cluster: str) -> list[dict[str, Any]]:
        try:
            self._wait(region, "instance_running", ids)
        except RetryExhaustedError as exc:
            now = {i["InstanceId"]: i for i in self.nodes_in(region, cluster, managed=False)}
            gone = [i for i in ids if now.get(i, {}).get("State", {}).get("Name") in (None, "shutting-down")]
            reasons = [str((self.p._get(region, i) or {}).get("StateReason", {}).get("Code") or "") for i in gone]
            if any("InsufficientInstanceCapacity" in r or "Spot" in r for r in reasons):
                raise CapacityError(f"{len(gone)} of the {len(ids)} nodes of {cluster} were terminated on their way up "
                                    f"({', '.join(sorted(set(reasons)))})", code="InsufficientInstanceCapacity") from exc
            states = sorted({str(now.get(i, {}).get("State", {}).get("Name", "terminated")) for i in ids})
            raise RetryExhaustedError(f"the nodes of {cluster} did not all reach running within {self.p.op_timeout:g} s "
                                      f"(TRAINVM_AWS_OP_TIMEOUT; states: {', '.join(states)})",
                                      code="OPERATION_TIMEOUT") from exc
        nodes = [i for i in self.nodes_in(region, cluster) if i["InstanceId"] in ids]
        if len(nodes) != len(ids):
            raise ProviderError(f"{len(ids) - len(nodes)} nodes of {cluster} vanished after they ran",
                                code="DELETED_DURING_CREATE")
        return nodes

    def write_node_list(self, region: str, nodes: list[dict[str, Any]]) -> None:
        """``trainvm-cluster`` (the private IPs, rank order) on every node: the same tags, one CreateTags."""
        from provisioner.providers.registry import METADATA_VALUE_LIMIT

        items = node_list_metadata([i["PrivateIpAddress"] for i in nodes], METADATA_VALUE_LIMIT["aws"])
        tags = [{"Key": k, "Value": v} for k, v in items.items()]
        ids = [i["InstanceId"] for i in nodes]
        self.p.call(lambda: self.p.ec2(region).create_tags(Resources=ids, Tags=tags))

    def _adopt(self, nodes: list[dict[str, Any]], spec: LaunchSpec) -> InstanceRecord:
        region = nodes[0]["_region"]
        tags = [_tags(i) for i in nodes]
        if any(t.get("trainvm-managed") != "true" for t in tags):
            raise ConflictError(f"instances of a cluster {spec.name} exist in {region} and are not managed by trainvm")
        if any(t.get("trainvm-hash") != spec.labels.get("trainvm-hash") for t in tags):
            raise ConflictError(f"a cluster {spec.name} already exists in {region} for another version of the profile; "
                                f"run `trainvm down {spec.name}` or pass --name")
        ranks = sorted(r for r in (G.rank_of(t) for t in tags) if r is not None)
        if len(nodes) != spec.nodes or ranks != list(range(spec.nodes)):
            raise ConflictError(f"the cluster {spec.name} in {region} has {len(nodes)} of {spec.nodes} nodes (ranks "
                                f"{ranks}): an earlier `up` did not finish; run `trainvm down {spec.name}` first")
        try:
            running = self._until_running(region, [i["InstanceId"] for i in nodes], spec.name)
        except RetryExhaustedError as exc:  # another `up` (or an interrupted one) is still launching them
            if exc.code != "OPERATION_TIMEOUT":
                raise
            raise AttemptInProgressError(f"{exc}: another `trainvm up` (or an interrupted one) is creating cluster "
                                         f"{spec.name}", name=spec.name, where=region) from exc
        self.write_node_list(region, running)
        return self.p._record(running[0], notes=self.p._notes(spec), existing=True)

    # ------------------------------------------------------------------ cleanup and delete
    def _cleanup(self, region: str, spec: LaunchSpec, made: dict[str, Any], failed: ProviderError) -> None:
        """Terminate every node (those carrying this profile's hash, and those the launch answered with), await
        it, then the placement group, security group, instance profile and key pair."""
        notes = []
        try:
            mine = {i["InstanceId"] for i in self.nodes_in(region, spec.name)
                    if _tags(i).get("trainvm-hash") == spec.labels.get("trainvm-hash")}
            mine |= set(made.get("ids") or [])
            left = self._terminate(region, sorted(mine)) if mine else []
            if left:
                failed.leaves(*(f"{spec.name} node {i} ({region})" for i in left))
                notes.append(f"nodes of {spec.name} in {region} still exist after their termination; "
                             f"run `trainvm down {spec.name}`")
            else:
                if made.get("pg"):
                    self.delete_placement_group(region, spec.name)
                if made.get("sg"):
                    self.p.delete_security_group(region, spec.name)
                if made.get("profile"):
                    self.p.delete_instance_profile(spec.name)
                if made.get("key"):
                    self.p.delete_key_pair(region, spec.name)
                failed.verified()
        except ProviderError as exc:
            failed.leaves(f"{spec.name} ({region})")
            notes.append(f"cleaning up {spec.name} in {region} failed ({exc}); run `trainvm down {spec.name}`")
        if notes:
            failed.args = ("; ".join([str(failed), *notes]),)

    def _live(self, region: str, ids: list[str]) -> list[str]:
        """Those of ``ids`` that exist and are not terminated (one DescribeInstances: an ``instance-id`` filter,
        which, unlike ``InstanceIds``, does not fail on an unknown id)."""
        ec2, filters = self.p.ec2(region), [{"Name": "instance-id", "Values": ids}]
        pages = self.p.call(lambda: list(ec2.get_paginator("describe_instances").paginate(Filters=filters)))
        return [i["InstanceId"] for page in pages for r in page.get("Reservations") or [] for i in r.get("Instances") or []
                if i["State"]["Name"] != "terminated"]

    def _terminate(self, region: str, ids: list[str]) -> list[str]:
        """Terminate ``ids`` and await it; the ids that are still not terminated."""
        live = self._live(region, ids)
        if not live:
            return []
        self.p.call(lambda: self.p.ec2(region).terminate_instances(InstanceIds=live), missing=None)
        self._wait(region, "instance_terminated", live)
        return self._live(region, live)

    def delete_placement_group(self, region: str, cluster: str) -> bool:
        """Delete the cluster's placement group when it is trainvm's. EC2 answers ``InvalidPlacementGroup.InUse``
        while a member is not yet terminated: retried for at most min(60 s, op_timeout) (``poll``); past that,
        EC2's last error propagates."""
        import time

        from provisioner.providers.poll import poll

        if self._placement_group(region, cluster) is None:
            return False
        name = G.placement_group_name(cluster)

        def in_use(exc: BaseException) -> bool:
            return isinstance(exc, InvalidRequestError) and exc.code == "InvalidPlacementGroup.InUse"

        def delete() -> Any:
            return self.p.call(lambda: self.p.ec2(region).delete_placement_group(GroupName=name), missing=None)

        poll(delete, deadline=time.monotonic() + min(60.0, self.p.op_timeout), transient=in_use, tries=None,
             backoff=max(self.p.poll_interval / 2, 0.01), timed_out=lambda last: last)
        return True

    def delete(self, nodes: list[dict[str, Any]], cluster: str, *, wait: bool) -> bool:
        """Terminate every node; with ``wait``, then the placement group, security group and instance profile
        (they can go only once the nodes are terminated: without it they are left to a later ``down``)."""
        region, ids = nodes[0]["_region"], [i["InstanceId"] for i in nodes]
        if wait:
            left = self._terminate(region, ids)
            if left:
                raise RetryExhaustedError(f"nodes {', '.join(left)} of {cluster} are not terminated yet; "
                                          f"run `trainvm down {cluster}` again", code="OPERATION_TIMEOUT")
            self.delete_placement_group(region, cluster)
            self.p.delete_security_group(region, cluster)
            self.p.delete_instance_profile(cluster)
        else:
            self.p.call(lambda: self.p.ec2(region).terminate_instances(InstanceIds=ids), missing=None)
        self.p.delete_key_pair(region, cluster)
        return True

    def power(self, nodes: list[dict[str, Any]], action: str, wait: bool) -> InstanceRecord:
        """StopInstances / StartInstances on every node at once (private IPs, and so the node list, stay)."""
        region, ids, ec2 = nodes[0]["_region"], [i["InstanceId"] for i in nodes], self.p.ec2(nodes[0]["_region"])
        if action == "stop":
            self.p.call(lambda: ec2.stop_instances(InstanceIds=ids))
        else:
            self.p.call(lambda: ec2.start_instances(InstanceIds=ids))
        if wait:
            self._wait(region, "instance_stopped" if action == "stop" else "instance_running", ids)
        return self.p._record(self.p._get(region, ids[0]) or nodes[0])
