"""AWS: the EC2/IAM requests trainvm sends, built from the launch spec. Pure: no boto3 import.

``run_instances_params`` is the ``RunInstances`` call as boto3 receives it (``UserData`` raw bytes: boto3
base64-encodes it for RunInstances only); ``request_preview`` is the same body as it goes on the wire
(``UserData`` base64), which ``trainvm render --cloud aws`` prints. Documented EC2 limits the builder keeps
(and tests/aws assert, since moto does not enforce them):

- ``ClientToken``: at most 64 ASCII characters (EC2 "Ensuring idempotency"): ``name[:23]-<40 hex>`` from
  name + profile hash + AZ + the request's stable parameters (``token_inputs``: not the user data's presigned
  payload URL, not the owner and price tags), so a re-sent request, or another `up` of the same profile, is the
  same request and any other VM (another AZ, a security group made again after ``down``, a new AMI) another one:
  EC2 refuses a known token with other parameters (``IdempotentParameterMismatch``).
- Boot volume: gp3 always (st1/sc1 cannot be boot volumes). ``standard`` and ``balanced`` are gp3 at its
  included baseline (3,000 IOPS, 125 MiB/s); ``ssd`` is gp3 with provisioned IOPS (500 per GiB, at most 16,000)
  and throughput (0.25 MiB/s per IOPS, at most 1,000 MiB/s). Size 1..16,384 GiB.
- The root device name comes from the AMI (``RootDeviceName``: /dev/sda1 for Canonical's Ubuntu AMIs,
  /dev/xvda for Debian's); a mapping on another device name would add a second volume instead.
- Instance-store NVMe (g4dn, g5, g6, p4d...) needs no mapping: Nitro exposes it as NVMe devices, which the
  startup script finds and mounts for data staging.
- Spot: ``InstanceMarketOptions`` one-time / terminate (the only interruption behaviour of a one-time request);
  ``MaxPrice`` from ``placement.max_price_per_hour``.
- ``InstanceInitiatedShutdownBehavior``: terminate only when every lifecycle action in use is delete, else stop
  (a shutdown from inside the guest stops or terminates; providers/lifecycle.guest_shutdown_action); IMDSv2 required (``HttpTokens: required``, hop limit 1).
- Tags on the instance and its volumes (50 per resource, keys <= 128, values <= 256 characters); the resolved
  profile rides on the instance as gzip+base64 in ``trainvm-profile.N`` chunks (EC2 has no free metadata).
  Instance tags are readable in IMDS (``MetadataOptions.InstanceMetadataTags=enabled``: a cluster node reads
  its node list), which limits every instance tag key to letters, digits and ``+ - = . , _ : @`` (EC2 "View
  tags ... using instance metadata"). On a single VM: 6 labels + Name + trainvm-image + the profile (3-4).
- A security group per VM (``<name>-sg``): SSH (tcp/22) only from ``ssh_from``; no inbound rule otherwise.
- An IAM role + instance profile per VM with a payload (``spec.payload``: ``s3:GetObject`` on exactly that object
  of the account's payload bucket, providers/aws/store.py) or that needs AWS APIs: ``s3://`` data (read-only on those
  buckets/prefixes), ``secret://aws/NAME`` secrets (GetSecretValue on those secrets), the lifecycle timers
  (StopInstances / TerminateInstances on the instance carrying this VM's Name tag; for a cluster's nodes, its
  ``trainvm-group`` tag).
- Clusters (hardware.nodes > 1): the placement group and the RunInstances for N nodes are built from this
  module's body by ``aws_group_request``.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from dataclasses import dataclass

from provisioner.providers.aws.params import (
    BlockDeviceMapping,
    Ebs,
    IpPermission,
    RunInstancesParams,
    SecurityGroupParams,
    SpotOptions,
    Tag,
)
from provisioner.providers.base import InvalidRequestError, LaunchSpec
from provisioner.providers.lifecycle import api_actions, guest_shutdown_action
from provisioner.providers.offer import Offer
from provisioner.providers.registry import AmiParameter, cloud
from provisioner.providers.registry_auth import ecr_statements

#: Canonical/Debian publish the current AMI ids as public SSM parameters (the registry's ``os_images``); resolved at
#: `up` time and recorded (the ``trainvm-image`` tag), like the GCE image and the Azure image version.
AMI_PARAMETERS: dict[str, str] = {o: ref.ssm_parameter for o, ref in cloud("aws").os_images.items()
                                  if isinstance(ref, AmiParameter)}
#: The root device of those AMIs (shown by ``render``; ``up`` reads it from the resolved AMI).
PREVIEW_ROOT_DEVICE = {"ubuntu-22.04": "/dev/sda1", "ubuntu-24.04": "/dev/sda1", "debian-12": "/dev/xvda"}
#: lifecycle.guest_shutdown_action -> InstanceInitiatedShutdownBehavior: what a shutdown from inside the VM does
#: (the idle watchdog and the max-run timer call the EC2 API when they can, and fall back to a shutdown).
SHUTDOWN_BEHAVIOR = {"stop": "stop", "delete": "terminate"}


def shutdown_behavior(spec: LaunchSpec) -> str:
    """terminate only when every lifecycle action in use is delete (providers/lifecycle.guest_shutdown_action)."""
    return SHUTDOWN_BEHAVIOR[guest_shutdown_action(spec.on_idle, spec.on_max_run, spec.idle_shutdown_minutes,
                                                   spec.max_run_hours)]

# EC2 limits (docs.aws.amazon.com: RunInstances, "Amazon EBS volume types", "Tag restrictions")
CLIENT_TOKEN_MAX = 64
GP3_MAX_IOPS, GP3_IOPS_PER_GIB, GP3_BASE_IOPS = 16_000, 500, 3_000
GP3_MAX_THROUGHPUT, GP3_THROUGHPUT_PER_IOPS, GP3_BASE_THROUGHPUT = 1_000, 0.25, 125
GP3_MAX_GIB = 16_384
MAX_TAGS, TAG_KEY_MAX, TAG_VALUE_MAX = 50, 128, 256
PROFILE_TAG = "trainvm-profile."
#: an instance tag key when tags are in IMDS (EC2 "View tags for your EC2 instances using instance metadata")
IMDS_TAG_KEY = re.compile(r"^(?!\.{1,2}$|_index$)[A-Za-z0-9+\-=.,_:@]{1,128}$")
SSH_PORT = 22
S3_RE = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?$")


@dataclass(frozen=True)
class Ami:
    """An AMI as ``up`` resolved it: the id, the root device name, and the SSM parameter it came from."""

    image_id: str
    root_device_name: str
    parameter: str = ""


def preview_ami(os_name: str) -> Ami:
    """The AMI as ``render`` shows it: EC2 resolves ``resolve:ssm:`` itself; ``up`` pins the id first."""
    return Ami(f"resolve:ssm:{AMI_PARAMETERS[os_name]}", PREVIEW_ROOT_DEVICE[os_name], AMI_PARAMETERS[os_name])


def client_token(spec: LaunchSpec, zone: str, salt: str = "") -> str:
    """``salt``: the request's parameters (``request_token``), or the instance an earlier request with the same
    token created and that is gone since."""
    digest = hashlib.sha256(f"{spec.name}\0{spec.profile_hash}\0{zone}\0{salt}".encode()).hexdigest()[:40]
    return f"{spec.name[:23]}-{digest}"


#: RunInstances parameters that are not part of its ClientToken: they differ between two `up`s of one profile that
#: must be one request. ``UserData``: the bootstrap carries a GET URL of the payload that each `up` presigns at its
#: own second (X-Amz-Date, signature; render/bootstrap.needs_signed_url), so the payload it names stands for it
#: (``token_inputs``). ``TagSpecifications``: ``trainvm-owner`` is the local user, the price labels are the local
#: catalog's; every other tag comes from the profile (its hash), the VM's name and the AMI, which are in the token.
UNSTABLE_PARAMETERS = ("ClientToken", "UserData", "TagSpecifications")


def token_inputs(spec: LaunchSpec, body: RunInstancesParams) -> dict[str, object]:
    """What the ClientToken of ``body`` is made of besides name, profile hash and AZ (``client_token``): the request
    without ``UNSTABLE_PARAMETERS``, and the payload the user data fetches. Each is the same for every `up` of one
    profile to one AZ, and changes when the VM asked for changes:

    - ImageId: the AMI the SSM parameter (or NAME.lock, or the baked image) resolves to: a new AMI, a new request;
    - InstanceType, Min/MaxCount, Placement (the AZ; a cluster's placement group is named after the VM),
      BlockDeviceMappings, InstanceInitiatedShutdownBehavior, InstanceMarketOptions, MetadataOptions: from the offer
      and the resolved profile alone;
    - SecurityGroupIds: the group ``ensure_security_group`` finds or makes for the name, the same id for both `up`s
      (a group made again after ``down`` is another id, so another request); IamInstanceProfile, KeyName: named
      after the VM;
    - the payload: its sha256 (of the rendered payload, which the profile determines) and the URL of the object it
      is staged as (the account's bucket in the region, the key from that sha256); the user data's only other
      inputs are the profile hash and the OS. Without a payload (``render``'s preview) the user data itself."""
    out: dict[str, object] = {k: v for k, v in body.items() if k not in UNSTABLE_PARAMETERS}
    ref, data = spec.payload, body.get("UserData") or b""
    out["UserData"] = ({"payload": ref.sha256, "url": ref.url} if ref is not None
                       else hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest())
    return out


def request_token(spec: LaunchSpec, zone: str, body: RunInstancesParams) -> str:
    """The ClientToken of the RunInstances ``body``: name, profile hash, AZ and ``token_inputs``. Two `up`s of one
    profile started together send the same token; EC2 launches once and refuses the other, whose user data differ
    (IdempotentParameterMismatch), and that `up` takes the instance the first launched (providers/aws/group.py)."""
    canon = json.dumps(token_inputs(spec, body), sort_keys=True)
    return client_token(spec, zone, salt=hashlib.sha256(canon.encode()).hexdigest())


def security_group_name(name: str) -> str:
    return f"{name}-sg"


def role_name(name: str) -> str:
    """IAM role and instance profile name (64 characters at most; a VM name has at most 63)."""
    return name[:64]


def root_volume(spec: LaunchSpec) -> Ebs:
    if not 1 <= spec.boot_disk_gib <= GP3_MAX_GIB:
        raise InvalidRequestError(f"boot_disk.size_gib {spec.boot_disk_gib}: gp3 volumes are 1..{GP3_MAX_GIB} GiB")
    ebs: Ebs = {"VolumeSize": spec.boot_disk_gib, "VolumeType": "gp3", "DeleteOnTermination": True,
                           "Encrypted": True}
    if spec.boot_disk_type == "ssd":
        iops = max(GP3_BASE_IOPS, min(GP3_MAX_IOPS, GP3_IOPS_PER_GIB * spec.boot_disk_gib))
        ebs["Iops"] = iops
        ebs["Throughput"] = max(GP3_BASE_THROUGHPUT, min(GP3_MAX_THROUGHPUT, int(iops * GP3_THROUGHPUT_PER_IOPS)))
    return ebs


def profile_tags(profile_json: str) -> list[Tag]:
    packed = base64.b64encode(gzip.compress(profile_json.encode(), mtime=0)).decode()
    chunks = [packed[i:i + TAG_VALUE_MAX] for i in range(0, len(packed), TAG_VALUE_MAX)]
    return [{"Key": f"{PROFILE_TAG}{i}", "Value": c} for i, c in enumerate(chunks)]


def profile_from_tags(tags: dict[str, str]) -> dict[str, object] | None:
    parts = sorted(((int(k[len(PROFILE_TAG):]), v) for k, v in tags.items()
                    if k.startswith(PROFILE_TAG) and k[len(PROFILE_TAG):].isdigit()))
    if not parts:
        return None
    try:
        profile: dict[str, object] = json.loads(gzip.decompress(base64.b64decode("".join(v for _, v in parts))))
    except (ValueError, OSError):
        return None
    return profile


def tags(spec: LaunchSpec, ami: Ami) -> list[Tag]:
    out: list[Tag] = [{"Key": k, "Value": v} for k, v in sorted(spec.labels.items())]
    out += [{"Key": "Name", "Value": spec.name}, {"Key": "trainvm-image", "Value": ami.image_id}]
    return out


def instance_tags(spec: LaunchSpec, ami: Ami) -> list[Tag]:
    """The instance's tags at launch (a cluster's nodes get more: aws_group_request.cluster_params counts them)."""
    base, profile = tags(spec, ami), profile_tags(spec.profile_json)
    out = base + profile
    if len(out) > MAX_TAGS:
        raise InvalidRequestError(
            f"the instance needs {len(out)} tags: {len(profile)} for the resolved profile (gzip+base64 in values of "
            f"{TAG_VALUE_MAX} characters), {len(base)} others; EC2 allows {MAX_TAGS} per instance", code="PROFILE_TOO_LARGE")
    for t in out:
        if not IMDS_TAG_KEY.match(t["Key"]) or len(t["Value"]) > TAG_VALUE_MAX:
            raise InvalidRequestError(f"instance tag {t['Key']!r}: with tags in the instance metadata a key holds only "
                                      f"letters, digits and + - = . , _ : @ (at most {TAG_KEY_MAX}), a value at most "
                                      f"{TAG_VALUE_MAX} characters")
    return out


def run_instances_params(spec: LaunchSpec, offer: Offer, ami: Ami, zone_name: str, *, security_group_id: str,
                         instance_profile: str | None, key_name: str | None = None) -> RunInstancesParams:
    """The RunInstances call as boto3 takes it (``UserData`` raw; boto3 base64-encodes it)."""
    root: BlockDeviceMapping = {"DeviceName": ami.root_device_name, "Ebs": root_volume(spec)}
    body: RunInstancesParams = {
        "ImageId": ami.image_id,
        "InstanceType": offer.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "Placement": {"AvailabilityZone": zone_name},
        "UserData": spec.user_data if isinstance(spec.user_data, bytes) else spec.user_data.encode(),
        "BlockDeviceMappings": [root],
        "SecurityGroupIds": [security_group_id],
        "InstanceInitiatedShutdownBehavior": shutdown_behavior(spec),
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1,
                            "InstanceMetadataTags": "enabled"},
        "TagSpecifications": [{"ResourceType": "instance", "Tags": instance_tags(spec, ami)},
                              {"ResourceType": "volume", "Tags": tags(spec, ami)}],
        "ClientToken": "",  # request_token, once the body is complete
    }
    if key_name:
        body["KeyName"] = key_name
    if instance_profile:
        body["IamInstanceProfile"] = {"Name": instance_profile}
    if spec.spot:
        market: SpotOptions = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
        if spec.max_price_per_hour:
            market["MaxPrice"] = f"{spec.max_price_per_hour:.4f}"
        body["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": market}
    body["ClientToken"] = request_token(spec, str(offer.zone), body)
    return body


def security_group_params(spec: LaunchSpec, vpc_id: str | None) -> SecurityGroupParams:
    body: SecurityGroupParams = {
        "GroupName": security_group_name(spec.name),
        "Description": (f"trainvm {spec.name}: SSH only from placement.ssh_from" if spec.ssh_from
                        else f"trainvm {spec.name}: no inbound traffic")
        + ("; all traffic between the nodes of the cluster" if spec.nodes > 1 else ""),
        "TagSpecifications": [{"ResourceType": "security-group",
                               "Tags": [Tag(Key=k, Value=v) for k, v in sorted(spec.labels.items())]
                               + [Tag(Key="Name", Value=spec.name)]}],
    }
    if vpc_id:
        body["VpcId"] = vpc_id
    return body


def ssh_ingress(ssh_from: str | None) -> list[IpPermission]:
    """The one inbound rule (tcp/22 from ``ssh_from``), or none."""
    if not ssh_from:
        return []
    rule: IpPermission = {"IpProtocol": "tcp", "FromPort": SSH_PORT, "ToPort": SSH_PORT}
    why = "trainvm placement.ssh_from"
    if ":" in ssh_from:
        rule["Ipv6Ranges"] = [{"CidrIpv6": ssh_from, "Description": why}]
    else:
        rule["IpRanges"] = [{"CidrIp": ssh_from, "Description": why}]
    return [rule]


def _s3_resources(sources: tuple[str, ...]) -> tuple[list[str], list[dict[str, object]]]:
    objects: list[str] = []
    listing: list[dict[str, object]] = []
    for src in sources:
        m = S3_RE.match(src)
        if not m:
            continue
        bucket, prefix = m.group(1), (m.group(2) or "")
        objects.append(f"arn:aws:s3:::{bucket}/{prefix}*")
        cond = {"StringLike": {"s3:prefix": [f"{prefix}*"]}} if prefix else {}
        listing.append({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}",
                        **({"Condition": cond} if cond else {})})
    return objects, listing


#: the ``secret://KIND/`` of Secrets Manager, the store an EC2 VM reads with its instance profile (registry secret_kinds)
SECRET_KIND = "aws"


def secret_names(spec: LaunchSpec) -> list[str]:
    """The resolved profile's ``secret://aws/`` references (``spec.secret_refs``: never a search of the profile's
    text): a name (read in the VM's region) or a secret's ARN (the profile's schema checked their spelling)."""
    return sorted({r.name for r in spec.secret_refs if r.kind == SECRET_KIND})


def secret_resources(names: list[str], region: str) -> list[str]:
    """What GetSecretValue is allowed on: a name's ARN in the VM's ``region`` (Secrets Manager appends "-" and 6
    random characters to a secret's ARN), an ARN as given (a complete ARN) or with those 6 (a partial one), in the
    secret's own region and account."""
    out: list[str] = []
    for name in names:
        out += [name, f"{name}-??????"] if name.startswith("arn:") else [f"arn:aws:secretsmanager:{region}:*:secret:{name}-??????"]
    return out


def payload_statements(spec: LaunchSpec) -> list[dict[str, object]]:
    """The bootstrap's read of its payload (templates/bootstrap/fetch-aws.sh): ``s3:GetObject`` on exactly that
    object, nothing else of the bucket (other VMs' payloads stay unreadable). Without ``s3:ListBucket`` S3 answers a
    GetObject of a missing key 403, not 404 (S3 GetObject reference, "Permissions"): a deleted payload reads as a
    refusal on the VM."""
    ref = spec.payload
    if ref is None or ref.cloud != "aws":
        return []
    return [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{ref.store}/{ref.key}"}]


#: lifecycle action (on_idle / on_max_run) -> the EC2 call trainvm-lifecycle makes for it
LIFECYCLE_CALLS = {"stop": "ec2:StopInstances", "delete": "ec2:TerminateInstances"}


def instance_profile_arn(name: str) -> str:
    """The ARN of the VM's own instance profile (any account): the instances launched with it are this VM (the
    nodes of this cluster), whatever their tags say."""
    return f"arn:aws:iam::*:instance-profile/{role_name(name)}"


def role_policy(spec: LaunchSpec, region: str) -> dict[str, object] | None:
    """The VM's least-privilege policy, or None when the VM reads no payload and calls no AWS API."""
    statements: list[dict[str, object]] = payload_statements(spec)
    objects, listing = _s3_resources(spec.data_sources)
    if objects:
        statements.append({"Effect": "Allow", "Action": "s3:GetObject", "Resource": objects})
        statements.extend(listing)
    secrets = secret_names(spec)
    if secrets:
        statements.append({"Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                           "Resource": secret_resources(secrets, region)})
    statements.extend(ecr_statements(spec.image, spec.registry_auth))  # the VM's own ECR pull of stack.container.image
    used = [a for a, on in ((spec.on_idle, spec.idle_shutdown_minutes), (spec.on_max_run, spec.max_run_hours)) if on]
    calls = api_actions(used, guest_shutdown_action(spec.on_idle, spec.on_max_run, spec.idle_shutdown_minutes,
                                                    spec.max_run_hours))
    if calls:  # trainvm-lifecycle's EC2 call (the helper's api_aws): only what a guest shutdown does not do, only this VM
        key = "trainvm-group" if spec.nodes > 1 else "Name"  # a cluster's nodes: aws_group_request.GROUP_TAG
        statements.append({"Effect": "Allow", "Action": sorted(LIFECYCLE_CALLS[a] for a in calls),
                           "Resource": f"arn:aws:ec2:{region}:*:instance/*",
                           "Condition": {"StringEquals": {f"aws:ResourceTag/{key}": spec.name},
                                         "ArnLike": {"ec2:InstanceProfile": instance_profile_arn(spec.name)}}})
    return {"Version": "2012-10-17", "Statement": statements} if statements else None


ASSUME_ROLE_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def request_preview(spec: LaunchSpec, offer: Offer) -> dict[str, object]:
    """What ``up`` sends, offline: the RunInstances wire body (``UserData`` base64) with the AMI as its SSM
    parameter and the AZ as its ID (``up`` pins the AMI and maps the AZ ID to this account's AZ name), plus
    the security group and the IAM policy created before it."""
    ami = preview_ami(spec.os)
    policy = role_policy(spec, offer.region)
    body = run_instances_params(spec, offer, ami, "<AZ name of " + str(offer.zone) + ">",
                                security_group_id=f"<id of {security_group_name(spec.name)}>",
                                instance_profile=role_name(spec.name) if policy else None, key_name=spec.name)
    body["Placement"] = {"AvailabilityZoneId": offer.zone} if offer.zone else {}
    raw = body["UserData"]
    body["UserData"] = base64.b64encode(raw if isinstance(raw, bytes) else raw.encode()).decode()
    out: dict[str, object] = {"RunInstances": body}
    if spec.nodes > 1:  # a cluster (providers/aws/group.py): placement group, MinCount = MaxCount = N
        from provisioner.providers.aws.group_request import preview  # lazy: cycle (group_request reads this module)

        out = preview(spec, body)
    return {**out,
            "CreateSecurityGroup": {**security_group_params(spec, None),
                                    "IpPermissions": ssh_ingress(spec.ssh_from)},
            "IamRolePolicy": policy}
