"""Amazon EC2 provider (boto3, imported on first use).

One object composing its parts, each held as an attribute and handed what it needs (no behaviour inherited):
``api`` (``aws_api.AwsApi``: sessions and clients per region, the retried ``call``, regions, AZ names, waiters),
``instances`` (``aws_instances``: the lookups of a name and the typed adapter over DescribeInstances, the records),
``resources`` (``aws_resources``: AMI, security group, key pair, instance profile), ``group`` (``aws_group``: the one
create path), ``power`` (``aws_power``: stop/start); the requests come from ``aws_request`` (pure), failures are
classified by ``aws_errors``, the payload store is ``aws_store``, the quota reader and the baker are made on it.

- Credentials: boto3's default chain (environment, ``~/.aws``, SSO, instance role; the instance role only on EC2,
  ``host.probe_metadata``). ``TRAINVM_AWS_ENDPOINT``
  points every client at another endpoint (moto's server in the tests) with dummy credentials.
- Retries: ``AwsApi.call`` (throttling codes such as ``RequestLimitExceeded``, 5xx, connection errors and
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
- list/find: ``DescribeInstances`` filtered on the ``trainvm-managed`` tag, in every region of ``api.regions()`` (the
  maker's ``candidate_regions``, the catalog's, that the account has enabled; or ``TRAINVM_AWS_REGIONS``); a
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
from collections.abc import Callable, Iterable

from provisioner import settings
from provisioner.providers.aws import errors as errs
from provisioner.providers.aws import request as R
from provisioner.providers.aws.api import AwsApi
from provisioner.providers.aws.group import AwsGroup, each
from provisioner.providers.aws.instances import MANAGED, AwsInstances, is_managed, tags_of
from provisioner.providers.aws.power import AwsPower
from provisioner.providers.aws.resources import AwsResources
from provisioner.providers.aws.store import S3PayloadStore
from provisioner.providers.base import (
    ConflictError,
    InstanceRecord,
    InvalidRequestError,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
)
from provisioner.providers.capabilities import ClusterReader, ImagePinner, PartialLister
from provisioner.providers.offer import Offer
from provisioner.providers.stack_report import StackReport


class AwsProvider(ImagePinner, ClusterReader, PartialLister):
    """The ``Provider`` of EC2; ``ImagePinner``, ``ClusterReader``, ``PartialLister`` are the typed interfaces it
    implements (providers/capabilities.py: protocols, no behaviour), not mixins."""

    NAME = "aws"

    def __init__(self, *, endpoint: str | None = None, regions: builtins.list[str] | None = None,
                 candidate_regions: Callable[[], Iterable[str]] | None = None, tries: int = 4,
                 op_timeout: float | None = None, poll_interval: float | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.api = AwsApi(endpoint=endpoint, regions=regions, candidate_regions=candidate_regions, tries=tries,
                          op_timeout=op_timeout, poll_interval=poll_interval, warn=warn)
        self.instances = AwsInstances(self.api)
        self.resources = AwsResources(self.api)
        self.group = AwsGroup(self.api, self.instances, self.resources)
        self.power = AwsPower(self.api, self.instances)

    # ------------------------------------------------------------------ lookups
    def find(self, name: str) -> InstanceRecord | None:
        """The VM (or cluster) called ``name``; "none" only where every region answered: a region that could not
        be listed (throttled, no answer within ``TRAINVM_API_TIMEOUT``) is an UNREACHABLE error, so that `up`
        never creates a twin of a VM it could not see."""
        inst = self.instances.first(name)
        if inst is None and self.api.unreachable:
            raise self._cannot_tell(name)
        if inst is None or not is_managed(inst):
            return None
        return self.instances.record(inst)

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        return [self.instances.record(i) for i in self.instances.nodes(name)]

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        nodes = self.instances.nodes(name)
        reports = each(self.instances.report, nodes)
        return {self.instances.record(i).name: r for i, r in zip(nodes, reports, strict=True)}

    def list(self) -> builtins.list[InstanceRecord]:
        found = self.api.each_region(self.instances.live)
        return sorted((self.instances.record(i) for i in found), key=lambda r: (r.name, r.zone or ""))

    def list_partial(self) -> tuple[builtins.list[InstanceRecord], builtins.list[str]]:
        found = self.list()
        return found, builtins.list(self.api.unreachable)  # the regions each_region could not list

    # ------------------------------------------------------------------ create
    def pin_image(self, os_name: str) -> dict[str, str]:
        """What ``trainvm lock`` records: the AMI id the OS's SSM parameter points to now in
        ``TRAINVM_AWS_IMAGE_REGION`` (default us-east-1); AMI ids are per region."""
        region = settings.text("TRAINVM_AWS_IMAGE_REGION", "us-east-1")
        ami = self.resources.resolve_ami(region, os_name)
        return {"ami": ami.image_id, "region": region, "root_device": ami.root_device_name}

    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        if offer.cloud != self.NAME or not offer.zone:
            raise InvalidRequestError(f"not a zonal AWS offer: {offer.describe(spec.spot)}")
        return self.group.create(spec, offer)

    # ------------------------------------------------------------------ the payload store
    def payload_store(self) -> S3PayloadStore:
        """The account's per-region S3 payload bucket (providers/aws/store.py) on this provider's API client."""
        return S3PayloadStore(self.api)

    # ------------------------------------------------------------------ delete, stop, start
    def delete(self, name: str, *, wait: bool = True) -> bool:
        """Terminate every trainvm instance called ``name`` (EC2 does not keep names unique: two `up` at once
        could make two), then the security group and instance profile (the group can go only once the instances
        are terminated: with ``wait=False`` it is left to a later ``down``). An instance that could not be
        terminated is an error naming how many of them remain."""
        found = self.api.each_region(lambda region: self.instances.live(region, name, managed=False))
        if not found and self.api.unreachable:
            raise self._cannot_tell(name, f"; try `trainvm down {name}` again")
        mine = [i for i in found if is_managed(i)]
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
                self.api.wait(region, "instance_terminated", [i["InstanceId"] for i in mine if i["_region"] == region])
                self.group.delete_placement_group(region, name)
                self.resources.delete_security_group(region, name)
            self.resources.delete_key_pair(region, name)
        if wait:
            self.resources.delete_instance_profile(name)
        return deleted

    def _terminate(self, region: str, instance_id: str) -> bool:
        got = self.api.call(lambda: self.api.ec2(region).terminate_instances(InstanceIds=[instance_id]), missing=None)
        return got is not None

    def _cannot_tell(self, name: str, then: str = "") -> RetryExhaustedError:
        return RetryExhaustedError(f"cannot tell whether {name} exists: AWS could not list "
                                   f"{', '.join(self.api.unreachable)} ({self.api.unreachable_why}){then}",
                                   code="UNREACHABLE")

    def _leftovers(self, name: str) -> bool:
        """No instance: delete a security group / instance profile an earlier ``down --no-wait`` left."""
        groups = self.api.each_region(lambda region: [region] if self.resources.find_security_group(region, name) else [])
        for region in groups:
            self.group.delete_placement_group(region, name)
            self.resources.delete_security_group(region, name)
            self.resources.delete_key_pair(region, name)
        self.resources.delete_instance_profile(name)
        return False

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self.power.stop(name, wait=wait)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self.power.start(name, wait=wait)

    # ------------------------------------------------------------------ report, console, ssh
    def live_status(self, record: InstanceRecord) -> str | None:
        return None  # no channel besides the console (CloudSpec.live_status)

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        """The newest console output (EC2 keeps the last 64 KB; ``Latest=True``) from character ``start``."""
        inst = self.instances.first(name)
        if inst is None or not is_managed(inst):
            return None
        text = self.instances.console_text(inst)
        return text[start:], len(text)

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, object] | None]:
        """One VM's report and stored profile; for a cluster's name, its rank-0 node's."""
        inst = self.instances.first(name)
        if inst is None or not is_managed(inst):
            return None, None
        return self.instances.report(inst), R.profile_from_tags(tags_of(inst))

    def ssh_argv(self, record: InstanceRecord, command: builtins.list[str]) -> builtins.list[str]:
        user = record.ssh_user or "ubuntu"
        return ["ssh", "-o", "StrictHostKeyChecking=accept-new", f"{user}@{record.ip}", *command]

    def open_ssh_hint(self, record: InstanceRecord) -> str:
        return (f"re-run `trainvm up` with --ssh-from YOUR.IP/32 (or placement.ssh_from): the security group "
                f"{R.security_group_name(record.name)} of {record.name} in {record.region} then allows tcp/22 from there")


__all__ = ["AwsProvider", "errs"]
