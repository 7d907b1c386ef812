"""The one AWS create path, for 1..N nodes: a single VM is a group of one. One ``RunInstances`` with
``MinCount = MaxCount = N`` (EC2 launches all N or none: an InsufficientInstanceCapacity answer means nothing was
created); for a cluster (N > 1) also a cluster placement group (when compact), the security group's rule between
members, ranks by ``AmiLaunchIndex`` tagged per node (``Name`` = ``NAME-K``, ``trainvm-rank``) and the node list
tagged on every node once all run (requests: group_request.py). A single VM keeps the request and tags it always
had: ``Name`` = NAME, no cluster tag, no placement group, no tagging after the launch.

Before anything is made: the instances of that name in the offer's region (``AwsInstances.live``: ``Name`` or
``trainvm-group``) are adopted when they carry this profile's hash and are complete (once running; still pending
at the deadline: AttemptInProgressError, left to the `up` creating them, and failover stops); a cluster where a
VM is asked for, a VM where a cluster is asked for, another hash or not trainvm's: ConflictError.

The ``ClientToken`` comes from name + hash + AZ + the request's stable parameters (aws_request.token_inputs): a
re-sent request returns the same instances. EC2 answers a known token with that request's instances even once
terminated: then once more with a token salted by the first one's id. Two `up`s of one profile started together
send one token with user data that differ (each presigns its payload URL): EC2 launches the first and refuses the
second (``IdempotentParameterMismatch``), which adopts the first's instances as soon as DescribeInstances shows
them; when none shows, the token is an earlier attempt's and the next one is derived from it.

All or nothing: any failure after the first resource terminates every instance that carries this profile's hash
or that the launch answered with, awaits the termination, then deletes the placement group (EC2 refuses while a
member is not terminated: ``InvalidPlacementGroup.InUse``, retried for a bounded time), the security group, the
instance profile and the key pair this attempt made, and marks the error ``verified``; a capacity error so raised
lets failover move the whole group to the next AZ. EFA interfaces are not requested: trainvm installs no EFA
software, so NCCL runs over TCP on the primary ENA interface (docs/spec.md).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, TypedDict, TypeVar

from provisioner.providers.aws import group_request as G
from provisioner.providers.aws import request as R
from provisioner.providers.aws.clients import PlacementGroup, StateReason
from provisioner.providers.aws.instances import (
    AwsInstances,
    Instance,
    as_instance,
    launch_notes,
    tags_of,
)
from provisioner.providers.aws.params import Filter, RunInstancesParams, Tag
from provisioner.providers.base import (
    AttemptInProgressError,
    CapacityError,
    ConflictError,
    InstanceRecord,
    InvalidRequestError,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    VanishedError,
    refuse_foreign,
)
from provisioner.providers.cluster_env import node_list_metadata
from provisioner.providers.offer import Offer
from provisioner.providers.poll import poll
from provisioner.providers.registry import METADATA_VALUE_LIMIT

if TYPE_CHECKING:
    from provisioner.providers.aws.api import AwsApi
    from provisioner.providers.aws.resources import AwsResources

T = TypeVar("T")
U = TypeVar("U")
#: Per-node calls (rank tags, console reads) in flight at once.
PARALLEL = 16
GONE = (None, "shutting-down", "terminated")


class Made(TypedDict, total=False):  # what one ``create`` attempt made (``_cleanup`` removes exactly that)
    sg: bool
    profile: bool
    key: str | None
    pg: bool
    ids: list[str]


def _tags(group: PlacementGroup) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in group.get("Tags") or []}


def each(fn: Callable[[U], T], items: list[U]) -> list[T]:
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(items)))) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [f.result() for f in futures]


def _reason(inst: Instance | None) -> StateReason:
    return (inst.get("StateReason") if inst else None) or StateReason()


class _LaunchedByAnother(Exception):
    """RunInstances was refused because another `up` of the profile launched with its token: ``found`` are that
    `up`'s instances, ``error`` why they cannot be taken yet (not a ProviderError: ``create`` adopts them, or raises
    ``error``, instead of cleaning up what that `up` uses)."""

    def __init__(self, found: list[Instance], error: ProviderError | None = None) -> None:
        super().__init__(f"launched by another `up`: {[i['InstanceId'] for i in found]}")
        self.found, self.error = found, error


class _Incomplete(Exception):
    """The token's instances did not all show in time; ``found``: those that did."""

    def __init__(self, found: list[Instance]) -> None:
        super().__init__(f"{len(found)} instance(s) shown")
        self.found = found


class AwsGroup:
    """The create path (1..N nodes) and the group's own resources (placement group, member rule), on the provider's
    parts: the API client, the instance lookups and the per-VM resources."""

    def __init__(self, api: AwsApi, instances: AwsInstances, resources: AwsResources) -> None:
        self.api, self.instances, self.resources = api, instances, resources

    # ------------------------------------------------------------------ create
    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        region, n = offer.region, spec.nodes
        existing = self.instances.live(region, spec.name, managed=False)
        if existing:
            cluster = [i for i in existing if tags_of(i).get(G.GROUP_TAG) == spec.name]
            if n == 1 and cluster:
                raise ConflictError(f"a cluster named {spec.name} exists in {region}; run `trainvm down {spec.name}` "
                                    "or pass --name")
            if n > 1 and len(cluster) < len(existing):
                raise ConflictError(f"an instance named {spec.name} already exists in {region}; a cluster of that name "
                                    f"cannot be created next to it: run `trainvm down {spec.name}` or pass --name")
            return self._adopt(existing, spec)
        zone = self.api.zone_name(region, str(offer.zone))
        ami = self.resources.ami_for(spec, region)
        pg = G.placement_group_name(spec.name) if spec.compact and n > 1 else None
        G.launch_params(R.run_instances_params(spec, offer, ami, zone, security_group_id="sg-check",
                                               instance_profile=None), spec, pg)  # checks first
        made: Made = {}
        try:
            gid, made["sg"] = self.resources.ensure_security_group(region, spec)
            if n > 1:
                self._allow_members(region, gid)
            profile = self.resources.ensure_instance_profile(spec, region)
            made["profile"] = profile is not None
            made["key"] = key = self.resources.ensure_key_pair(region, spec)
            if pg:
                made["pg"] = True
                self._ensure_placement_group(region, spec)
            params = G.launch_params(R.run_instances_params(spec, offer, ami, zone, security_group_id=gid,
                                                            instance_profile=profile, key_name=key), spec, pg)
            insts = self._launch(region, params, spec, str(offer.zone), made)
            if n > 1:
                self._tag_ranks(region, spec.name, insts)
            running = self._until_running(region, [i["InstanceId"] for i in insts], spec.name)
            if n > 1:
                self.write_node_list(region, running)
            return self.instances.record(running[0], notes=launch_notes(spec))
        except _LaunchedByAnother as other:  # what this attempt made is that `up`'s too: nothing is cleaned up
            if other.error is not None:
                raise other.error from None
            return self._adopt(other.found, spec)
        except ProviderError as exc:
            self._cleanup(region, spec, made, exc)
            raise

    def _allow_members(self, region: str, group_id: str) -> None:
        perms = G.member_ingress(group_id)
        self.api.call(lambda: self.api.ec2(region).authorize_security_group_ingress(GroupId=group_id, IpPermissions=perms),
                    exists=None)

    def _ensure_placement_group(self, region: str, spec: LaunchSpec) -> None:
        params = G.placement_group_params(spec)
        ec2 = self.api.ec2(region)
        made = self.api.call(lambda: ec2.create_placement_group(**params), exists=None)
        if made is None and self._placement_group(region, spec.name) is None:
            raise ConflictError(f"the placement group {params['GroupName']} exists in {region} and is not trainvm's; "
                                "pass --name to choose another name")

    def _placement_group(self, region: str, cluster: str) -> dict[str, object] | None:
        """The cluster's placement group when it exists and is trainvm's."""
        name = G.placement_group_name(cluster)
        got = self.api.call(lambda: self.api.ec2(region).describe_placement_groups(GroupNames=[name]), missing=None)
        for g in (got or {}).get("PlacementGroups") or []:
            if _tags(g).get("trainvm-managed") == "true":
                return dict(g)
        return None

    def _launch(self, region: str, params: RunInstancesParams, spec: LaunchSpec, zone_id: str,
                made: Made) -> list[Instance]:
        """RunInstances for all nodes (``made["ids"]`` set at once); EC2 answers a known ClientToken with that
        request's instances, even terminated ones: then once more with a token salted by the first's id."""
        insts: list[Instance] = []
        for _ in range(3):
            try:
                insts = self._run(region, params)
            except InvalidRequestError as exc:
                if exc.code != "IdempotentParameterMismatch":
                    raise
                found = self._launched_with_token(region, spec)
                if found:
                    raise _LaunchedByAnother(found) from exc
                params["ClientToken"] = R.client_token(spec, zone_id, salt=params["ClientToken"])
                continue
            made["ids"] = [i["InstanceId"] for i in insts]
            if not any(i["State"]["Name"] in ("shutting-down", "terminated") for i in insts):
                break
            params["ClientToken"] = R.client_token(spec, zone_id, salt=min(made["ids"]))
        if len(insts) != spec.nodes:
            raise CapacityError(f"RunInstances launched {len(insts)} of {spec.nodes} nodes", code="MinCountNotMet")
        return sorted(insts, key=lambda i: int(i.get("AmiLaunchIndex") or 0))

    def _run(self, region: str, params: RunInstancesParams) -> list[Instance]:
        """RunInstances' instances; a just-created instance profile may take seconds to be usable (IAM is eventually
        consistent): that one answer is retried (``poll``, within min(60 s, op_timeout)); past that, EC2's last
        error propagates (an InvalidRequestError, cleaned up by ``create``)."""
        def iam_lag(exc: BaseException) -> bool:
            text = str(exc).lower()
            return isinstance(exc, InvalidRequestError) and "iam" in text and "instance profile" in text

        ec2 = self.api.ec2(region)
        out = poll(
            lambda: self.api.call(lambda: ec2.run_instances(**params)), deadline=time.monotonic() + min(60.0, self.api.op_timeout),
            transient=iam_lag, tries=None, backoff=max(self.api.poll_interval / 2, 0.01), timed_out=lambda last: last)
        return [as_instance(i, region) for i in out["Instances"]]

    def _launched_with_token(self, region: str, spec: LaunchSpec) -> list[Instance]:
        """EC2 refused the token (name, hash, AZ, stable parameters: aws_request.token_inputs) as bound to a request
        whose other parameters differ: another `up` of this profile launched with it (its presigned payload URL,
        owner or price tags differ). Its instances, once DescribeInstances shows them all (eventually consistent;
        a cluster's once that `up` tagged their ranks: within min(30 s, op_timeout)), are the answer. Some show
        but not all: that `up` is still at it (AttemptInProgressError, through ``_LaunchedByAnother``). None
        shows: the token is an earlier attempt's, whose instances are gone; the caller derives the next token from
        this one, as every `up` of the profile does."""
        def complete(found: list[Instance]) -> bool:
            return bool(found) and sorted(G.rank_of(tags_of(i)) or 0 for i in found) == list(range(spec.nodes))

        try:
            found: list[Instance] = poll(
                lambda: self.instances.live(region, spec.name, managed=False),
                deadline=time.monotonic() + min(30.0, self.api.op_timeout), ready=complete,
                interval=max(self.api.poll_interval / 2, 0.01), timed_out=_Incomplete)
        except _Incomplete as last:
            if not last.found:
                return []
            raise _LaunchedByAnother(last.found, AttemptInProgressError(
                f"{spec.name} in {region}: another `trainvm up` launched it with this request and has not finished "
                "it", name=spec.name, where=region)) from None
        return found

    def _tag_ranks(self, region: str, cluster: str, insts: list[Instance]) -> None:
        ec2 = self.api.ec2(region)

        def one(pair: tuple[int, Instance]) -> None:
            rank, inst = pair
            tags = G.node_tags(cluster, rank)
            self.api.call(lambda: ec2.create_tags(Resources=[inst["InstanceId"]], Tags=tags))

        each(one, list(enumerate(insts)))

    def _until_running(self, region: str, ids: list[str], name: str) -> list[Instance]:
        """Await ``instance_running`` on every instance (bounded by ``op_timeout``); what stopped the wait is
        classified: an instance terminated for capacity/spot (CapacityError: failover goes on), otherwise
        terminated or stopped meanwhile (VanishedError), still pending (OPERATION_TIMEOUT)."""
        try:
            self.api.wait(region, "instance_running", ids)
        except RetryExhaustedError as exc:
            now = {i: self.instances.get(region, i) for i in ids}
            state = {i: inst["State"]["Name"] if inst else None for i, inst in now.items()}

            def what(some: list[str]) -> str:  # "NAME (i-1) was", "2 of the 4 nodes of NAME (i-1, i-2) were"
                return (f"{name} ({some[0]}) was" if len(ids) == 1 else
                        f"{len(some)} of the {len(ids)} nodes of {name} ({', '.join(some)}) were")

            gone = [i for i in ids if state[i] in GONE]
            if gone:
                reasons = [_reason(now[i]) for i in gone]
                codes = [str(r.get("Code") or "") for r in reasons]
                why = next((str(r.get("Message") or c) for r, c in zip(reasons, codes, strict=True) if c), "")
                capacity = next((c for c in codes if "InsufficientInstanceCapacity" in c or "Spot" in c), None)
                if capacity:  # e.g. Server.InsufficientInstanceCapacity
                    raise CapacityError(f"{what(gone)} terminated on the way up: {why}",
                                        code=capacity.split(".")[-1]) from exc
                raise VanishedError(f"{what(gone)} terminated while `up` waited for it ({why or 'no reason given'})",
                                    code="DELETED_DURING_CREATE") from exc
            stopped = [i for i in ids if state[i] in ("stopping", "stopped")]
            if stopped:
                raise VanishedError(f"{what(stopped)} stopped while `up` waited for it",
                                    code="DELETED_DURING_CREATE") from exc
            if exc.code == "WaiterError":
                pending = [i for i in ids if state[i] == "pending"]
                raise RetryExhaustedError(f"{what(pending or ids)} still pending after {self.api.op_timeout:g} s "
                                          "(TRAINVM_AWS_OP_TIMEOUT)", code="OPERATION_TIMEOUT") from exc
            raise
        found = {i["InstanceId"]: i for i in self.instances.live(region, name)}
        if any(i not in found for i in ids):
            raise VanishedError(f"{name}: {sum(i not in found for i in ids)} of {len(ids)} instances are gone after "
                                "they ran", code="DELETED_DURING_CREATE")
        return [found[i] for i in ids]

    def write_node_list(self, region: str, nodes: list[Instance]) -> None:
        """``trainvm-cluster`` (the private IPs, rank order) on every node: the same tags, one CreateTags."""
        items = node_list_metadata([i["PrivateIpAddress"] for i in nodes], METADATA_VALUE_LIMIT["aws"])
        tags: list[Tag] = [{"Key": k, "Value": v} for k, v in items.items()]
        ids = [i["InstanceId"] for i in nodes]
        self.api.call(lambda: self.api.ec2(region).create_tags(Resources=ids, Tags=tags))

    def _adopt(self, found: list[Instance], spec: LaunchSpec) -> InstanceRecord:
        """The instances of an earlier (or a concurrent) `up` of this profile: complete (one per rank), awaited
        while pending, the node list tagged again for a cluster."""
        region, n = found[0]["_region"], spec.nodes
        for inst in found:
            refuse_foreign(tags_of(inst), spec, "an instance" if n == 1 else "a cluster", f"in {region}")
        ranks = sorted(G.rank_of(tags_of(i)) or 0 for i in found)
        if ranks != list(range(n)):
            raise ConflictError(f"{spec.name} in {region} has {len(found)} instances for {n} nodes (ranks {ranks}): "
                                f"an earlier `up` did not finish; run `trainvm down {spec.name}` first")
        nodes = found
        if any(i["State"]["Name"] == "pending" for i in found):  # an interrupted or a concurrent `up` is creating it
            try:
                nodes = self._until_running(region, [i["InstanceId"] for i in found], spec.name)
            except RetryExhaustedError as exc:
                if exc.code != "OPERATION_TIMEOUT":
                    raise
                raise AttemptInProgressError(  # another `up` owns the name: never terminated, never duplicated
                    f"{exc} in {region}: another `trainvm up` (or an interrupted one) is creating it", name=spec.name,
                    where=region) from exc
        if n > 1:
            self.write_node_list(region, nodes)
        return self.instances.record(nodes[0], notes=launch_notes(spec), existing=True)

    # ------------------------------------------------------------------ cleanup and delete
    def _cleanup(self, region: str, spec: LaunchSpec, made: Made, failed: ProviderError) -> None:
        """Terminate every instance (those carrying this profile's hash, and those the launch answered with), await
        it, then the placement group, security group, instance profile and key pair this attempt made."""
        notes = []
        try:
            mine = {i["InstanceId"] for i in self.instances.live(region, spec.name)
                    if tags_of(i).get("trainvm-hash") == spec.labels.get("trainvm-hash")}
            mine |= set(made.get("ids") or [])
            left = self.terminate(region, sorted(mine)) if mine else []
            if left:
                failed.leaves(*(f"{spec.name} ({i}, {region})" for i in left))
                notes.append(f"{spec.name} in {region} still exists after its termination; run `trainvm down {spec.name}`")
            else:
                if made.get("pg"):
                    self.delete_placement_group(region, spec.name)
                if made.get("sg"):
                    self.resources.delete_security_group(region, spec.name)
                if made.get("profile"):
                    self.resources.delete_instance_profile(spec.name)
                if made.get("key"):
                    self.resources.delete_key_pair(region, spec.name)
                failed.verified()
        except ProviderError as exc:
            failed.leaves(f"{spec.name} ({region})")
            notes.append(f"cleaning up {spec.name} in {region} failed ({exc}); run `trainvm down {spec.name}`")
        if notes:
            failed.args = ("; ".join([str(failed), *notes]),)

    def _live(self, region: str, ids: list[str]) -> list[str]:
        """Those of ``ids`` that exist and are not terminated (one DescribeInstances: an ``instance-id`` filter,
        which, unlike ``InstanceIds``, does not fail on an unknown id)."""
        ec2, filters = self.api.ec2(region), [Filter(Name="instance-id", Values=ids)]
        pages = self.api.call(lambda: list(ec2.get_paginator("describe_instances").paginate(Filters=filters)))
        return [i["InstanceId"] for page in pages for r in page.get("Reservations") or [] for i in r.get("Instances") or []
                if i["State"]["Name"] != "terminated"]

    def terminate(self, region: str, ids: list[str]) -> list[str]:
        """Terminate ``ids`` and await it; the ids that are still not terminated."""
        live = self._live(region, ids)
        if not live:
            return []
        self.api.call(lambda: self.api.ec2(region).terminate_instances(InstanceIds=live), missing=None)
        self.api.wait(region, "instance_terminated", live)
        return self._live(region, live)

    def delete_placement_group(self, region: str, cluster: str) -> bool:
        """Delete the cluster's placement group when it is trainvm's. EC2 answers ``InvalidPlacementGroup.InUse``
        while a member is not yet terminated: retried for at most min(60 s, op_timeout) (``poll``); past that,
        EC2's last error propagates."""
        if self._placement_group(region, cluster) is None:
            return False
        name = G.placement_group_name(cluster)

        def in_use(exc: BaseException) -> bool:
            return isinstance(exc, InvalidRequestError) and exc.code == "InvalidPlacementGroup.InUse"

        def delete() -> object:
            return self.api.call(lambda: self.api.ec2(region).delete_placement_group(GroupName=name), missing=None)

        poll(delete, deadline=time.monotonic() + min(60.0, self.api.op_timeout), transient=in_use, tries=None,
             backoff=max(self.api.poll_interval / 2, 0.01), timed_out=lambda last: last)
        return True
