"""Amazon EC2 provider (boto3, imported on first use).

Thin on purpose: the requests come from ``aws_request`` (pure), failures are classified by ``aws_errors``,
the client plumbing (AZ names, the AMI, the security group and the instance profile) is in ``aws_calls``.

- Credentials: boto3's default chain (environment, ``~/.aws``, SSO, instance role; the instance role only on EC2,
  ``host.probe_metadata``). ``TRAINVM_AWS_ENDPOINT``
  points every client at another endpoint (moto's server in the tests) with dummy credentials.
- Retries: ``AwsCalls.call`` (throttling codes such as ``RequestLimitExceeded``, 5xx, connection errors and
  timeouts), at most ``tries`` attempts per call within ``TRAINVM_API_TIMEOUT``, the budget GCE's calls have; what
  still fails is ``RetryExhaustedError``.
- Create: look for the VM in the offer's region (same hash: adopted once running; still pending at the
  deadline: AttemptInProgressError, left to the `up` creating it, and failover stops; another hash or not
  trainvm's: ConflictError); map the offer's AZ ID to this account's AZ name; pin the AMI (SSM parameter -> id, recorded
  in the ``trainvm-image`` tag) and read its root device; build the RunInstances call (any request that cannot
  work fails here, before anything exists); then the VM's security group, its instance profile when it needs
  one, ``RunInstances`` with a ``ClientToken`` from name + hash + AZ + the request's parameters (a re-sent
  request returns the same instance), and
  the ``instance_running`` waiter (bounded by ``TRAINVM_AWS_OP_TIMEOUT``, default 600 s).
- Failure: the instance this attempt made is terminated and the termination awaited, then the security group
  and the instance profile are deleted; ``cleanup`` is "verified" only when AWS answered that the instance is
  terminated, else ``left_behind`` names what may remain.
- list/find: ``DescribeInstances`` filtered on the ``trainvm-managed`` tag, in every region of ``regions()``; a
  ``find`` that finds nothing while a region could not be listed is an UNREACHABLE error, never "no such VM".
- down: terminate, await it (``wait=True``), then the security group and instance profile; no instance:
  leftovers only. stop/start: ``StopInstances`` / ``StartInstances`` (+ waiter).
- Payload: ``payload_store()`` is ``aws_store.S3PayloadStore`` (one private bucket per account and region); the
  instance profile reads exactly the VM's payload object; records carry the ``trainvm-payload`` tag.
- Report: ``GetConsoleOutput(Latest=True)`` (the newest 64 KB of the serial console), decoded by the one
  ``StackReport`` decoder (``last_console_report``).
- Clusters (``spec.nodes > 1``): ``aws_group.AwsGroup`` (cluster placement group + one RunInstances with
  MinCount = MaxCount = N). A name with no single VM is looked up as a cluster: ``find`` gives its rank-0 node,
  ``delete``/``stop``/``start`` act on every node.
"""

from __future__ import annotations

import builtins
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from provisioner.catalog.models import Offer
from provisioner.providers.aws import errors as errs
from provisioner.providers.aws import request as R
from provisioner.providers.aws.calls import AwsCalls
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
    costs_from_labels,
    price_from_labels,
    refuse_foreign,
)
from provisioner.providers.capabilities import ClusterReader, ImagePinner
from provisioner.providers.store import PAYLOAD_LABEL
from provisioner.verify.report import StackReport, last_console_report

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


class AwsProvider(AwsCalls, ImagePinner, ClusterReader):
    NAME = "aws"

    # ------------------------------------------------------------------ lookups
    def _instances(self, region: str, name: str | None = None, *, managed: bool = True) -> list[dict[str, Any]]:
        filters = [{"Name": "instance-state-name", "Values": LIVE_STATES}]
        if name is not None:
            filters.append({"Name": "tag:Name", "Values": [name]})
        if managed:
            filters.append({"Name": f"tag:{MANAGED}", "Values": ["true"]})
        ec2 = self.ec2(region)
        pages = self.call(lambda: list(ec2.get_paginator("describe_instances").paginate(Filters=filters)))
        return [dict(i, _region=region) for page in pages for r in page.get("Reservations") or []
                for i in r.get("Instances") or []]

    def _get(self, region: str, instance_id: str) -> dict[str, Any] | None:
        got = self.call(lambda: self.ec2(region).describe_instances(InstanceIds=[instance_id]), missing=None)
        found = [i for r in (got or {}).get("Reservations") or [] for i in r.get("Instances") or []]
        return dict(found[0], _region=region) if found else None

    def _find_any(self, name: str) -> dict[str, Any] | None:
        found = self.each_region(lambda region: self._instances(region, name, managed=False))
        found.sort(key=lambda i: _tags(i).get(MANAGED) != "true")
        return found[0] if found else None

    def find(self, name: str) -> InstanceRecord | None:
        """The VM (or cluster) called ``name``; "none" only where every region answered: a region that could not
        be listed (throttled, no answer within ``TRAINVM_API_TIMEOUT``) is an UNREACHABLE error, so that `up`
        never creates a twin of a VM it could not see."""
        inst = self._find_any(name)
        if inst is None and self.unreachable:
            raise self._cannot_tell(name)
        if inst is None:
            nodes = self.group.nodes(name)
            return self._record(nodes[0]) if nodes else None
        if _tags(inst).get(MANAGED) != "true":
            return None
        return self._record(inst)

    @property
    def group(self) -> AwsGroup:  # imported when a name may be a cluster's
        from provisioner.providers.aws.group import AwsGroup

        return AwsGroup(self)

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        return self.group.cluster_nodes(name)

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        return self.group.read_cluster_reports(name)

    def list(self) -> list[InstanceRecord]:
        return sorted((self._record(i) for i in self.each_region(self._instances)), key=lambda r: (r.name, r.zone or ""))

    # ------------------------------------------------------------------ create
    def pin_image(self, os_name: str) -> dict[str, str]:
        """What ``trainvm lock`` records: the AMI id the OS's SSM parameter points to now in
        ``TRAINVM_AWS_IMAGE_REGION`` (default us-east-1); AMI ids are per region."""
        from provisioner import settings

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
        if spec.nodes > 1:
            return self.group.create(spec, offer)
        region = offer.region
        existing = self._instances(region, spec.name, managed=False)
        if existing:
            return self._adopt(existing[0], spec)
        if self.group.nodes_in(region, spec.name, managed=False):
            raise ConflictError(f"a cluster named {spec.name} exists in {region}; run `trainvm down {spec.name}` or "
                                "pass --name")
        zone = self.zone_name(region, offer.zone)
        ami = self.ami_for(spec, region)
        R.run_instances_params(spec, offer, ami, zone, security_group_id="sg-check", instance_profile=None)  # checks first
        made: dict[str, Any] = {}
        try:
            gid, made["sg"] = self.ensure_security_group(region, spec)
            profile = self.ensure_instance_profile(spec, region)
            made["profile"] = profile is not None
            made["key"] = key = self.ensure_key_pair(region, spec)
            params = R.run_instances_params(spec, offer, ami, zone, security_group_id=gid, instance_profile=profile,
                                            key_name=key)
            inst = self._run(region, params)["Instances"][0]
            for _ in range(2):  # EC2 answers a known ClientToken with that request's instance, even terminated
                if inst["State"]["Name"] not in ("shutting-down", "terminated"):
                    break
                params["ClientToken"] = R.client_token(spec, str(offer.zone), salt=inst["InstanceId"])
                inst = self._run(region, params)["Instances"][0]
            made["id"] = inst["InstanceId"]
            return self._record(self._until_running(region, inst["InstanceId"], spec.name), notes=self._notes(spec))
        except ProviderError as exc:
            self._cleanup(region, spec, made, exc)
            raise

    def _run(self, region: str, params: dict[str, Any]) -> dict[str, Any]:
        """RunInstances; a just-created instance profile may take seconds to be usable (IAM is eventually
        consistent): that one answer is retried (``poll``, within min(60 s, op_timeout)); past that, EC2's last
        error propagates (an InvalidRequestError, cleaned up by ``create``)."""
        import time

        from provisioner.providers.poll import poll

        def iam_lag(exc: BaseException) -> bool:
            text = str(exc).lower()
            return isinstance(exc, InvalidRequestError) and "iam" in text and "instance profile" in text

        ec2 = self.ec2(region)
        out: dict[str, Any] = poll(lambda: self.call(lambda: ec2.run_instances(**params)),
                                   deadline=time.monotonic() + min(60.0, self.op_timeout), transient=iam_lag,
                                   tries=None, backoff=max(self.poll_interval / 2, 0.01), timed_out=lambda last: last)
        return out

    def _until_running(self, region: str, instance_id: str, name: str) -> dict[str, Any]:
        try:
            self.wait(region, "instance_running", instance_id)
        except RetryExhaustedError as exc:
            inst = self._get(region, instance_id)
            state = (inst or {}).get("State", {}).get("Name")
            if inst is None or state in ("shutting-down", "terminated"):
                reason = (inst or {}).get("StateReason") or {}
                code = str(reason.get("Code") or "")
                if "InsufficientInstanceCapacity" in code or "Spot" in code:  # e.g. Server.InsufficientInstanceCapacity
                    raise CapacityError(f"{name} was terminated on its way up: {reason.get('Message') or code}",
                                        code=code.split(".")[-1]) from exc
                raise VanishedError(f"{name} ({instance_id}) was terminated while `up` waited for it "
                                    f"({reason.get('Message') or 'no reason given'})", code="DELETED_DURING_CREATE") from exc
            if exc.code == "WaiterError" and state in ("pending", None):
                raise RetryExhaustedError(f"{name} ({instance_id}) was still {state} after {self.op_timeout:g} s "
                                          "(TRAINVM_AWS_OP_TIMEOUT)", code="OPERATION_TIMEOUT") from exc
            if state in ("stopping", "stopped"):
                raise VanishedError(f"{name} ({instance_id}) is {state}: it was stopped while `up` waited for it",
                                    code="DELETED_DURING_CREATE") from exc
            raise
        inst = self._get(region, instance_id)
        if inst is None:
            raise VanishedError(f"{name} ({instance_id}) is gone", code="DELETED_DURING_CREATE")
        return inst

    def _adopt(self, inst: dict[str, Any], spec: LaunchSpec) -> InstanceRecord:
        tags, where = _tags(inst), inst["_region"]
        refuse_foreign(tags, spec, "an instance", f"in {where}")
        if inst["State"]["Name"] == "pending":  # an interrupted or a concurrent `up` is creating it
            try:
                inst = self._until_running(where, inst["InstanceId"], spec.name)
            except RetryExhaustedError as exc:
                if exc.code != "OPERATION_TIMEOUT":
                    raise
                raise AttemptInProgressError(  # another `up` owns the name: never terminated, never duplicated
                    f"{spec.name} ({inst['InstanceId']}) in {where} is still pending after {self.op_timeout:g} s: another "
                    "`trainvm up` (or an interrupted one) is creating it", name=spec.name, where=where) from exc
        return self._record(inst, notes=self._notes(spec), existing=True)

    def _cleanup(self, region: str, spec: LaunchSpec, made: dict[str, Any], failed: ProviderError) -> None:
        """Terminate what the attempt made (an instance carrying this profile's hash), await it, then delete
        the security group and instance profile; ``failed`` is marked verified or ``leaves`` what may remain."""
        notes = []
        try:
            mine = [i for i in self._instances(region, spec.name)
                    if _tags(i).get("trainvm-hash") == spec.labels.get("trainvm-hash")]
            if made.get("id") and not any(i["InstanceId"] == made["id"] for i in mine):
                got = self._get(region, made["id"])
                mine += [got] if got and got["State"]["Name"] != "terminated" else []
            for inst in mine:
                self._terminate(region, inst["InstanceId"], wait=True)
            left = [i for i in mine if (self._get(region, i["InstanceId"]) or {}).get("State", {}).get("Name")
                    not in (None, "terminated")]
            if left:
                failed.leaves(*(f"{spec.name} ({i['InstanceId']}, {region})" for i in left))
                notes.append(f"{spec.name} in {region} still exists after its termination; run `trainvm down {spec.name}`")
            else:
                if made.get("sg"):
                    self.delete_security_group(region, spec.name)
                if made.get("profile"):
                    self.delete_instance_profile(spec.name)
                if made.get("key"):
                    self.delete_key_pair(region, spec.name)
                failed.verified()
        except ProviderError as exc:
            failed.leaves(f"{spec.name} ({region})")
            notes.append(f"cleaning up {spec.name} in {region} failed ({exc}); run `trainvm down {spec.name}`")
        if notes:
            failed.args = ("; ".join([str(failed), *notes]),)

    def _terminate(self, region: str, instance_id: str, *, wait: bool) -> bool:
        got = self.call(lambda: self.ec2(region).terminate_instances(InstanceIds=[instance_id]), missing=None)
        if got is None:
            return False
        if wait:
            self.wait(region, "instance_terminated", instance_id)
        return True

    # ------------------------------------------------------------------ the payload store
    def payload_store(self) -> S3PayloadStore:
        """The account's per-region S3 payload bucket (providers/aws/store.py) on this provider's clients."""
        from provisioner.providers.aws.store import S3PayloadStore

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
            nodes = self.group.nodes(name)
            return self.group.delete(nodes, name, wait=wait) if nodes else self._leftovers(name)
        deleted, failed = False, []
        for inst in mine:
            try:
                deleted = self._terminate(inst["_region"], inst["InstanceId"], wait=wait) or deleted
            except ProviderError as exc:
                failed.append((inst, exc))
        if failed:
            ids = ", ".join(f"{i['InstanceId']} ({i['_region']})" for i, _ in failed)
            raise ProviderError(f"{len(failed)} of {len(mine)} instances named {name} could not be terminated and "
                                f"remain: {ids} ({failed[0][1]}); run `trainvm down {name}` again",
                                code=failed[0][1].code)
        for region in dict.fromkeys(i["_region"] for i in mine):
            if wait:
                self.delete_security_group(region, name)
            self.delete_key_pair(region, name)
        if wait:
            self.delete_instance_profile(name)
        return deleted

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
            nodes = self.group.nodes(name)
            return self.group.power(nodes, action, wait) if nodes else None
        region, iid, ec2 = inst["_region"], inst["InstanceId"], self.ec2(inst["_region"])
        if action == "stop":
            self.call(lambda: ec2.stop_instances(InstanceIds=[iid]))
        else:
            self.call(lambda: ec2.start_instances(InstanceIds=[iid]))
        if wait:
            self.wait(region, "instance_stopped" if action == "stop" else "instance_running", iid)
        return self._record(self._get(region, iid) or inst)

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
        if inst is None:
            inst = next(iter(self.group.nodes(name)), None)
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


def _cluster_fields(tags: dict[str, str]) -> dict[str, Any]:
    """InstanceRecord.cluster/rank/nodes of a cluster's node (aws_group_request's tags); nothing for one VM."""
    from provisioner.providers.aws.group_request import GROUP_TAG, NODES_TAG, rank_of

    if not tags.get(GROUP_TAG):
        return {}
    nodes = tags.get(NODES_TAG, "")
    return {"cluster": tags[GROUP_TAG], "rank": rank_of(tags), "nodes": int(nodes) if nodes.isdigit() else 1}


__all__ = ["AwsProvider", "errs"]
