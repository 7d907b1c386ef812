"""Amazon EC2 provider (boto3, imported on first use).

Thin on purpose: the requests come from ``aws_request`` (pure), failures are classified by ``aws_errors``,
the client plumbing (AZ names, the AMI, the security group and the instance profile) is in ``aws_calls``.

- Credentials: boto3's default chain (environment, ``~/.aws``, SSO, instance role; the instance role only on EC2,
  ``host.probe_metadata``). ``TRAINVM_AWS_ENDPOINT``
  points every client at another endpoint (moto's server in the tests) with dummy credentials.
- Retries: ``AwsCalls.call`` (throttling codes such as ``RequestLimitExceeded``, 5xx, connection errors and
  timeouts), at most ``tries`` attempts per call within ``TRAINVM_API_TIMEOUT``, the budget GCE's calls have; what
  still fails is ``RetryExhaustedError``.
- Create, one path for 1..N nodes (providers/aws/group.py: a single VM is a group of one): adopt or refuse what
  has the name; map the offer's AZ ID to this account's AZ name; pin the AMI (SSM parameter -> id, recorded
  in the ``trainvm-image`` tag) and read its root device; build the RunInstances call (any request that cannot
  work fails here, before anything exists); then the security group, the instance profile when it needs
  one, the key pair, ``RunInstances`` (``MinCount = MaxCount = N``, an idempotent ``ClientToken``), and
  the ``instance_running`` waiter (bounded by ``TRAINVM_AWS_OP_TIMEOUT``, default 600 s). Failure: what this attempt
  made is terminated and awaited, then its groups, profile and key go; ``cleanup`` is "verified" only when AWS
  answered that the instances are terminated, else ``left_behind`` names what may remain.
- The instances of a name: those tagged ``Name`` = NAME (a single VM) or ``trainvm-group`` = NAME (a cluster's
  nodes, named ``NAME-K``), one ``DescribeInstances`` on the ``tag-value`` filter, rank order.
- list/find: ``DescribeInstances`` filtered on the ``trainvm-managed`` tag, in every region of ``regions()``; a
  ``find`` that finds nothing while a region could not be listed is an UNREACHABLE error, never "no such VM";
  a cluster's name finds its rank-0 node.
- down: terminate every instance of the name, await it (``wait=True``), then the placement group, security group,
  key pair and instance profile; no instance: leftovers only. stop/start: ``StopInstances`` / ``StartInstances``
  on every instance of the name (+ waiter).
- Payload: ``payload_store()`` is ``aws_store.S3PayloadStore`` (one private bucket per account and region); the
  instance profile reads exactly the VM's payload object; records carry the ``trainvm-payload`` tag.
- Report: ``GetConsoleOutput(Latest=True)`` (the newest 64 KB of the serial console), decoded by the one
  ``StackReport`` decoder (``last_console_report``).
"""

from __future__ import annotations

import builtins
import re
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from provisioner import settings
from provisioner.providers.aws import errors as errs
from provisioner.providers.aws import request as R
from provisioner.providers.aws.calls import AwsCalls
from provisioner.providers.aws.group import AwsGroup, each
from provisioner.providers.aws.group_request import GROUP_TAG, NODES_TAG, rank_of
from provisioner.providers.aws.store import S3PayloadStore
from provisioner.providers.base import (
    ConflictError,
    InstanceRecord,
    InvalidRequestError,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    costs_from_labels,
    price_from_labels,
)
from provisioner.providers.capabilities import ClusterReader, ImagePinner, PartialLister
from provisioner.providers.offer import Offer
from provisioner.providers.poll import poll
from provisioner.providers.stack_report import StackReport, last_console_report
from provisioner.providers.store import PAYLOAD_LABEL

if TYPE_CHECKING:
    from provisioner.providers.aws.group import AwsGroup
    from provisioner.providers.aws.store import S3PayloadStore

MANAGED = "trainvm-managed"
LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
STATES = {"pending": "PROVISIONING", "running": "RUNNING", "stopping": "STOPPING", "stopped": "STOPPED",
          "shutting-down": "DELETING", "terminated": "TERMINATED"}
SSH_USER = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "admin"}


def _tags(inst: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags") or []}


class AwsProvider(AwsCalls, ImagePinner, ClusterReader, PartialLister):
    NAME = "aws"

    # ------------------------------------------------------------------ lookups
    def _instances(self, region: str, name: str | None = None, *, managed: bool = True) -> list[dict[str, Any]]:
        """The live instances (of ``name``: tagged ``Name`` or ``trainvm-group`` = name) in ``region``, rank order."""
        filters = [{"Name": "instance-state-name", "Values": LIVE_STATES}]
        if name is not None:  # any tag of that value; narrowed to Name / trainvm-group below
            filters.append({"Name": "tag-value", "Values": [name]})
        if managed:
            filters.append({"Name": f"tag:{MANAGED}", "Values": ["true"]})
        ec2 = self.ec2(region)
        pages = self.call(lambda: list(ec2.get_paginator("describe_instances").paginate(Filters=filters)))
        found = [dict(i, _region=region) for page in pages for r in page.get("Reservations") or []
                 for i in r.get("Instances") or []]
        if name is not None:
            found = [i for i in found if name in (_tags(i).get("Name"), _tags(i).get(GROUP_TAG))]
        return sorted(found, key=_order)

    def _get(self, region: str, instance_id: str) -> dict[str, Any] | None:
        got = self.call(lambda: self.ec2(region).describe_instances(InstanceIds=[instance_id]), missing=None)
        found = [i for r in (got or {}).get("Reservations") or [] for i in r.get("Instances") or []]
        return dict(found[0], _region=region) if found else None

    def _all(self, name: str) -> list[dict[str, Any]]:
        """Every live instance of ``name`` in every region: trainvm's first, rank order."""
        found = self.each_region(lambda region: self._instances(region, name, managed=False))
        return sorted(found, key=lambda i: (_tags(i).get(MANAGED) != "true", *_order(i)))

    def _find_any(self, name: str) -> dict[str, Any] | None:
        found = self._all(name)
        return found[0] if found else None

    def find(self, name: str) -> InstanceRecord | None:
        """The VM (or cluster) called ``name``; "none" only where every region answered: a region that could not
        be listed (throttled, no answer within ``TRAINVM_API_TIMEOUT``) is an UNREACHABLE error, so that `up`
        never creates a twin of a VM it could not see."""
        inst = self._find_any(name)
        if inst is None and self.unreachable:
            raise self._cannot_tell(name)
        if inst is None or _tags(inst).get(MANAGED) != "true":
            return None
        return self._record(inst)

    @property
    def group(self) -> AwsGroup:  # the create path, imported on first use
        return AwsGroup(self)

    def _nodes(self, cluster: str) -> builtins.list[dict[str, Any]]:
        """The cluster's nodes in the region that has them (the one with rank 0 when several do), rank order."""
        found = [i for i in self._all(cluster) if _tags(i).get(GROUP_TAG) == cluster and _tags(i).get(MANAGED) == "true"]
        return [i for i in found if i["_region"] == found[0]["_region"]]

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        return [self._record(i) for i in self._nodes(name)]

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        nodes = self._nodes(name)
        texts = each(self._console_text, nodes)
        return {self._record(i).name: last_console_report(t) for i, t in zip(nodes, texts, strict=True)}

    def list(self) -> list[InstanceRecord]:
        return sorted((self._record(i) for i in self.each_region(self._instances)), key=lambda r: (r.name, r.zone or ""))

    def list_partial(self) -> tuple[builtins.list[InstanceRecord], builtins.list[str]]:
        found = self.list()
        return found, list(self.unreachable)  # the regions each_region could not list

    # ------------------------------------------------------------------ create
    def pin_image(self, os_name: str) -> dict[str, str]:
        """What ``trainvm lock`` records: the AMI id the OS's SSM parameter points to now in
        ``TRAINVM_AWS_IMAGE_REGION`` (default us-east-1); AMI ids are per region."""
        region = settings.text("TRAINVM_AWS_IMAGE_REGION", "us-east-1")
        ami = self.resolve_ami(region, os_name)
        return {"ami": ami.image_id, "region": region, "root_device": ami.root_device_name}

    def ami_for(self, spec: LaunchSpec, region: str) -> R.Ami:
        """The baked AMI ``up`` chose (``spec.boot_image``: that region's copy), else NAME.lock's AMI in the region it
        was pinned in; elsewhere the SSM parameter's AMI now."""
        if spec.boot_image:
            image_id = spec.boot_image
            got = self.call(lambda: self.ec2(region).describe_images(ImageIds=[image_id]), missing=None)
            images = (got or {}).get("Images") or []
            if not images or not images[0].get("RootDeviceName"):
                raise InvalidRequestError(f"baked AMI {image_id} was not found in {region}", code="AMI")
            return R.Ami(image_id, images[0]["RootDeviceName"])
        pin = spec.locked_images.get(self.NAME, {})
        if pin.get("ami") and pin.get("region") == region and pin.get("root_device"):
            return R.Ami(pin["ami"], pin["root_device"], pin.get("ssm_parameter", ""))
        return self.resolve_ami(region, spec.os)

    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        if offer.cloud != self.NAME or not offer.zone:
            raise InvalidRequestError(f"not a zonal AWS offer: {offer.describe(spec.spot)}")
        return self.group.create(spec, offer)

    def _run(self, region: str, params: dict[str, Any]) -> dict[str, Any]:
        """RunInstances; a just-created instance profile may take seconds to be usable (IAM is eventually
        consistent): that one answer is retried (``poll``, within min(60 s, op_timeout)); past that, EC2's last
        error propagates (an InvalidRequestError, cleaned up by ``create``)."""
        def iam_lag(exc: BaseException) -> bool:
            text = str(exc).lower()
            return isinstance(exc, InvalidRequestError) and "iam" in text and "instance profile" in text

        ec2 = self.ec2(region)
        out: dict[str, Any] = poll(lambda: self.call(lambda: ec2.run_instances(**params)),
                                   deadline=time.monotonic() + min(60.0, self.op_timeout), transient=iam_lag,
                                   tries=None, backoff=max(self.poll_interval / 2, 0.01), timed_out=lambda last: last)
        return out

    # ------------------------------------------------------------------ the payload store
    def payload_store(self) -> S3PayloadStore:
        """The account's per-region S3 payload bucket (providers/aws/store.py) on this provider's clients."""
        return S3PayloadStore(self)

    # ------------------------------------------------------------------ delete, stop, start
    def _managed(self, name: str) -> dict[str, Any] | None:
        inst = self._find_any(name)
        if inst is not None and _tags(inst).get(MANAGED) != "true":
            raise ConflictError(f"{name} in {inst['_region']} is not managed by trainvm (no {MANAGED} tag); not touching it")
        return inst

    def delete(self, name: str, *, wait: bool = True) -> bool:
        """Terminate every trainvm instance called ``name`` (EC2 does not keep names unique: two `up` at once
        could make two), then the security group and instance profile (the group can go only once the instances
        are terminated: with ``wait=False`` it is left to a later ``down``). An instance that could not be
        terminated is an error naming how many of them remain."""
        found = self.each_region(lambda region: self._instances(region, name, managed=False))
        if not found and self.unreachable:
            raise self._cannot_tell(name, f"; try `trainvm down {name}` again")
        mine = [i for i in found if _tags(i).get(MANAGED) == "true"]
        if found and not mine:
            raise ConflictError(f"{name} in {found[0]['_region']} is not managed by trainvm (no {MANAGED} tag); "
                                "not touching it")
        if not mine:
            return self._leftovers(name)
        deleted, failed = False, []
        for inst in mine:  # one call each: one that cannot be terminated does not keep the others
            try:
                deleted = self._terminate(inst["_region"], inst["InstanceId"]) or deleted
            except ProviderError as exc:
                failed.append((inst, exc))
        if failed:
            ids = ", ".join(f"{i['InstanceId']} ({i['_region']})" for i, _ in failed)
            raise ProviderError(f"{len(failed)} of {len(mine)} instances named {name} could not be terminated and "
                                f"remain: {ids} ({failed[0][1]}); run `trainvm down {name}` again",
                                code=failed[0][1].code)
        for region in dict.fromkeys(i["_region"] for i in mine):
            if wait:  # the groups can go only once their instances are terminated
                self.wait(region, "instance_terminated", [i["InstanceId"] for i in mine if i["_region"] == region])
                self.group.delete_placement_group(region, name)
                self.delete_security_group(region, name)
            self.delete_key_pair(region, name)
        if wait:
            self.delete_instance_profile(name)
        return deleted

    def _terminate(self, region: str, instance_id: str) -> bool:
        got = self.call(lambda: self.ec2(region).terminate_instances(InstanceIds=[instance_id]), missing=None)
        return got is not None

    def _cannot_tell(self, name: str, then: str = "") -> RetryExhaustedError:
        return RetryExhaustedError(f"cannot tell whether {name} exists: AWS could not list "
                                   f"{', '.join(self.unreachable)} ({self.unreachable_why}){then}", code="UNREACHABLE")

    def _leftovers(self, name: str) -> bool:
        """No instance: delete a security group / instance profile an earlier ``down --no-wait`` left."""
        groups = self.each_region(lambda region: [region] if self.find_security_group(region, name) else [])
        for region in groups:
            self.group.delete_placement_group(region, name)
            self.delete_security_group(region, name)
            self.delete_key_pair(region, name)
        self.delete_instance_profile(name)
        return False

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._power(name, "stop", wait)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._power(name, "start", wait)

    def _power(self, name: str, action: str, wait: bool) -> InstanceRecord | None:
        """StopInstances (compute billing ends; EBS stays; instance store is lost) / StartInstances (the user
        data runs again only through the startup unit it installed, which re-verifies the stack)."""
        inst = self._managed(name)
        if inst is None:
            return None
        region, ec2 = inst["_region"], self.ec2(inst["_region"])
        ids = [i["InstanceId"] for i in self._instances(region, name)]  # every node at once (private IPs stay)
        if action == "stop":
            self.call(lambda: ec2.stop_instances(InstanceIds=ids))
        else:
            self.call(lambda: ec2.start_instances(InstanceIds=ids))
        if wait:
            self.wait(region, "instance_stopped" if action == "stop" else "instance_running", ids)
        return self._record(self._get(region, inst["InstanceId"]) or inst)

    # ------------------------------------------------------------------ report, console, ssh
    def live_status(self, record: InstanceRecord) -> str | None:
        return None  # no channel besides the console (CloudSpec.live_status)

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        """The newest console output (EC2 keeps the last 64 KB; ``Latest=True``) from character ``start``."""
        inst = self._find_any(name)
        if inst is None or _tags(inst).get(MANAGED) != "true":
            return None
        text = self._console_text(inst)
        return text[start:], len(text)

    def _console_text(self, inst: dict[str, Any]) -> str:
        region, iid = inst["_region"], inst["InstanceId"]
        got = self.call(lambda: self.ec2(region).get_console_output(InstanceId=iid, Latest=True), missing=None)
        return (got or {}).get("Output") or ""  # botocore base64-decodes GetConsoleOutput's Output itself

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, Any] | None]:
        """One VM's report and stored profile; for a cluster's name, its rank-0 node's."""
        inst = self._find_any(name)
        if inst is None or _tags(inst).get(MANAGED) != "true":
            return None, None
        return last_console_report(self._console_text(inst)), R.profile_from_tags(_tags(inst))

    def ssh_argv(self, record: InstanceRecord, command: builtins.list[str]) -> builtins.list[str]:
        user = record.ssh_user or "ubuntu"
        return ["ssh", "-o", "StrictHostKeyChecking=accept-new", f"{user}@{record.ip}", *command]

    def open_ssh_hint(self, record: InstanceRecord) -> str:
        return (f"re-run `trainvm up` with --ssh-from YOUR.IP/32 (or placement.ssh_from): the security group "
                f"{R.security_group_name(record.name)} of {record.name} in {record.region} then allows tcp/22 from there")

    def _notes(self, spec: LaunchSpec) -> builtins.list[str]:
        among = "; the nodes reach each other on every port" if spec.nodes > 1 else ""
        if spec.ssh_from:
            return [f"SSH (tcp/22) is allowed only from {spec.ssh_from} (security group {R.security_group_name(spec.name)}){among}"]
        return [f"no inbound traffic is allowed (security group {R.security_group_name(spec.name)}); "
                f"pass --ssh-from to open SSH{among}"]

    def _record(self, inst: dict[str, Any], *, notes: builtins.list[str] | None = None, existing: bool = False) -> InstanceRecord:
        tags = _tags(inst)
        zone = (inst.get("Placement") or {}).get("AvailabilityZone")
        profile = R.profile_from_tags(tags) or {}
        os_name = ((profile.get("stack") or {}).get("os")) if isinstance(profile, dict) else None
        user = SSH_USER.get(str(os_name), "ubuntu")
        launched = inst.get("LaunchTime")  # EC2: "the time that the instance was last launched" (each start resets it)
        return InstanceRecord(
            name=tags.get("Name", inst["InstanceId"]), cloud=self.NAME, region=inst["_region"], zone=zone,
            instance_type=inst.get("InstanceType", ""), state=STATES.get(inst["State"]["Name"], inst["State"]["Name"].upper()),
            profile=tags.get("trainvm-profile"), hash=tags.get("trainvm-hash"), price_hourly=price_from_labels(tags), **costs_from_labels(tags),
            created=launched.isoformat() if isinstance(launched, datetime) else (str(launched) if launched else None),
            last_start=launched.isoformat() if isinstance(launched, datetime) else (str(launched) if launched else None),
            last_stop=stop_time(inst.get("StateTransitionReason")),
            ip=inst.get("PublicIpAddress"), image=tags.get("trainvm-image") or inst.get("ImageId"),
            ssh_command=f"ssh {user}@{inst['PublicIpAddress']}" if inst.get("PublicIpAddress") else None, ssh_user=user,
            notes=tuple(notes or ()), adopted=existing, spot=inst.get("InstanceLifecycle") == "spot",
            owner=tags.get("trainvm-owner"), cloud_id=inst["InstanceId"], payload=tags.get(PAYLOAD_LABEL),
            **_cluster_fields(tags))


_STOPPED_AT = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


def stop_time(reason: str | None) -> str | None:
    """When a stop was asked, from EC2's ``StateTransitionReason`` ("User initiated (2026-11-20 10:00:00 GMT)");
    None where the reason carries no time (e.g. a shutdown from inside the guest)."""
    m = _STOPPED_AT.search(reason or "")
    return m.group(1).replace(" ", "T") + "+00:00" if m else None


def _order(inst: dict[str, Any]) -> tuple[int, int]:
    """A cluster's nodes by rank, then by launch index; a single VM is rank 0."""
    return (rank_of(_tags(inst)) or 0, int(inst.get("AmiLaunchIndex") or 0))


def _cluster_fields(tags: dict[str, str]) -> dict[str, Any]:
    """InstanceRecord.cluster/rank/nodes of a cluster's node (aws_group_request's tags); nothing for one VM."""
    if not tags.get(GROUP_TAG):
        return {}
    nodes = tags.get(NODES_TAG, "")
    return {"cluster": tags[GROUP_TAG], "rank": rank_of(tags), "nodes": int(nodes) if nodes.isdigit() else 1}


__all__ = ["AwsProvider", "errs"]
