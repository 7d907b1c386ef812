"""The per-VM AWS resources around an instance, on the API client (``AwsApi``): the AMI from its SSM parameter (and
the AMI a launch boots), the VM's security group, its SSH key pair and its IAM instance profile. Each ``ensure_*``
converges (an existing trainvm resource is reused, a foreign one is refused), each ``delete_*`` tolerates "already
gone". The requests themselves come from the pure builder (``aws_request``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from provisioner import settings
from provisioner.providers.aws import request as R
from provisioner.providers.aws.clients import SecurityGroup
from provisioner.providers.aws.params import IpPermission, Tag, TagSpecification
from provisioner.providers.base import InvalidRequestError, LaunchSpec, ProviderError
from provisioner.providers.ssh_key import read_public_key

if TYPE_CHECKING:
    from provisioner.providers.aws.api import AwsApi


class AwsResources:
    """The AMI, security group, key pair and instance profile of a VM, through ``api`` (its retries and clients)."""

    def __init__(self, api: AwsApi) -> None:
        self.api = api
        self._amis: dict[tuple[str, str], R.Ami] = {}

    # ------------------------------------------------------------------ the AMI
    def ami_for(self, spec: LaunchSpec, region: str) -> R.Ami:
        """The baked AMI ``up`` chose (``spec.boot_image``: that region's copy), else NAME.lock's AMI in the region it
        was pinned in; elsewhere the SSM parameter's AMI now."""
        api = self.api
        if spec.boot_image:
            image_id = spec.boot_image
            got = api.call(lambda: api.ec2(region).describe_images(ImageIds=[image_id]), missing=None)
            images = (got or {}).get("Images") or []
            if not images or not images[0].get("RootDeviceName"):
                raise InvalidRequestError(f"baked AMI {image_id} was not found in {region}", code="AMI")
            return R.Ami(image_id, images[0]["RootDeviceName"])
        pin = spec.locked_images.get("aws", {})
        if pin.get("ami") and pin.get("region") == region and pin.get("root_device"):
            return R.Ami(pin["ami"], pin["root_device"], pin.get("ssm_parameter", ""))
        return self.resolve_ami(region, spec.os)

    def resolve_ami(self, region: str, os_name: str) -> R.Ami:
        """The AMI id the OS's public SSM parameter points to now, and its root device name (cached)."""
        if (region, os_name) not in self._amis:
            param = R.AMI_PARAMETERS[os_name]
            got = self.api.call(lambda: self.api.ssm(region).get_parameter(Name=param), missing=None)
            if got is None:
                raise InvalidRequestError(f"the SSM parameter {param} ({os_name}) does not exist in {region}", code="AMI")
            image_id = got["Parameter"]["Value"]
            images = self.api.call(lambda: self.api.ec2(region).describe_images(ImageIds=[image_id]), missing=None)
            image = (images or {}).get("Images") or []
            if not image or not image[0].get("RootDeviceName"):
                raise InvalidRequestError(f"AMI {image_id} ({param}) was not found in {region}", code="AMI")
            self._amis[(region, os_name)] = R.Ami(image_id, image[0]["RootDeviceName"], param)
        return self._amis[(region, os_name)]

    # ------------------------------------------------------------------ security group
    def find_security_group(self, region: str, name: str) -> SecurityGroup | None:
        got = self.api.call(lambda: self.api.ec2(region).describe_security_groups(
            Filters=[{"Name": "group-name", "Values": [R.security_group_name(name)]},
                     {"Name": "tag:trainvm-managed", "Values": ["true"]}]))
        groups = got.get("SecurityGroups") or []
        return groups[0] if groups else None

    def ensure_security_group(self, region: str, spec: LaunchSpec) -> tuple[str, bool]:
        """(the VM's security group id, whether this call created it). Its one ingress rule is converged."""
        ec2, created = self.api.ec2(region), False
        group = self.find_security_group(region, spec.name)
        if group is None:
            vpcs = self.api.call(lambda: ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}]))["Vpcs"]
            if not vpcs:
                raise InvalidRequestError(f"{region} has no default VPC; trainvm launches into the default VPC",
                                          code="NoDefaultVpc")
            params = R.security_group_params(spec, vpcs[0]["VpcId"])
            made = self.api.call(lambda: ec2.create_security_group(**params), exists=None)
            if made is None:
                group = self.find_security_group(region, spec.name)
                if group is None:
                    raise ProviderError(f"security group {params['GroupName']} exists in {region} and is not trainvm's",
                                        code="InvalidGroup.Duplicate")
            else:
                created, group = True, SecurityGroup(GroupId=made["GroupId"], IpPermissions=[])
        gid = group["GroupId"]
        want = R.ssh_ingress(spec.ssh_from)
        have = group.get("IpPermissions") or []
        if _rules(have) != _rules(want):
            if have:
                self.api.call(lambda: ec2.revoke_security_group_ingress(GroupId=gid, IpPermissions=have), missing=None)
            if want:
                self.api.call(lambda: ec2.authorize_security_group_ingress(GroupId=gid, IpPermissions=want), exists=None)
        return gid, created

    def delete_security_group(self, region: str, name: str) -> bool:
        group = self.find_security_group(region, name)
        if group is None:
            return False
        self.api.call(lambda: self.api.ec2(region).delete_security_group(GroupId=group["GroupId"]), missing=None)
        return True

    # ------------------------------------------------------------------ SSH key pair
    def ensure_key_pair(self, region: str, spec: LaunchSpec) -> str | None:
        """The user's SSH public key imported as the key pair ``<name>`` (None when there is no key: the VM then
        has no SSH login). $TRAINVM_SSH_PUBLIC_KEY (a path), else ~/.ssh/id_ed25519.pub or id_rsa.pub."""
        key = ssh_public_key()
        if key is None:
            return None
        ec2 = self.api.ec2(region)
        tags: list[TagSpecification] = [{"ResourceType": "key-pair", "Tags": [{"Key": k, "Value": v}
                                                                            for k, v in sorted(spec.labels.items())]}]
        self.api.call(lambda: ec2.import_key_pair(KeyName=spec.name, PublicKeyMaterial=key.encode(), TagSpecifications=tags),
                  exists=None)
        return spec.name

    def delete_key_pair(self, region: str, name: str) -> None:
        got = self.api.call(lambda: self.api.ec2(region).describe_key_pairs(KeyNames=[name]), missing=None)
        for pair in (got or {}).get("KeyPairs") or []:
            tags = {t["Key"]: t["Value"] for t in pair.get("Tags") or []}
            if tags.get("trainvm-managed", "true") == "true":
                self.api.call(lambda: self.api.ec2(region).delete_key_pair(KeyName=name), missing=None)

    # ------------------------------------------------------------------ IAM instance profile
    def ensure_instance_profile(self, spec: LaunchSpec, region: str) -> str | None:
        """The VM's instance profile (role + inline least-privilege policy), or None when it needs no AWS API and
        has no payload to read (``aws_request.role_policy``: every VM with ``spec.payload`` gets one)."""
        policy = R.role_policy(spec, region)
        if policy is None:
            return None
        iam, name = self.api.iam(), R.role_name(spec.name)
        tags: list[Tag] = [{"Key": k, "Value": v} for k, v in sorted(spec.labels.items())]
        self.api.call(lambda: iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(R.ASSUME_ROLE_POLICY),
                                          Description=f"trainvm {spec.name}", Tags=tags), exists=None)
        self.api.call(lambda: iam.put_role_policy(RoleName=name, PolicyName="trainvm", PolicyDocument=json.dumps(policy)))
        made = self.api.call(lambda: iam.create_instance_profile(InstanceProfileName=name, Tags=tags), exists=None)
        roles = [] if made is not None else (self.api.call(
            lambda: iam.get_instance_profile(InstanceProfileName=name))["InstanceProfile"].get("Roles") or [])
        if not any(r.get("RoleName") == name for r in roles):
            try:
                self.api.call(lambda: iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name),
                              exists=None)
            except ProviderError:
                # another `up` of this name attached it between the read and the add: a profile holds one role, so
                # IAM answers LimitExceeded ("Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1";
                # https://docs.aws.amazon.com/IAM/latest/APIReference/API_AddRoleToInstanceProfile.html). Ours
                # when the profile now holds our role; anything else is the error it was
                now = self.api.call(lambda: iam.get_instance_profile(InstanceProfileName=name))
                if not any(r.get("RoleName") == name for r in now["InstanceProfile"].get("Roles") or []):
                    raise
        return name

    def delete_instance_profile(self, name: str) -> bool:
        """Remove the VM's instance profile and role (each step tolerates 'already gone')."""
        iam, role = self.api.iam(), R.role_name(name)
        got = self.api.call(lambda: iam.get_instance_profile(InstanceProfileName=role), missing=None)
        if got is not None:
            tags = {t["Key"]: t["Value"] for t in got["InstanceProfile"].get("Tags") or []}
            if tags and tags.get("trainvm-managed") != "true":
                return False
            for attached in got["InstanceProfile"].get("Roles") or []:
                self.api.call(partial(iam.remove_role_from_instance_profile, InstanceProfileName=role,
                                      RoleName=attached["RoleName"]), missing=None)
            self.api.call(lambda: iam.delete_instance_profile(InstanceProfileName=role), missing=None)
        found_role = self.api.call(lambda: iam.get_role(RoleName=role), missing=None)
        if found_role is not None:
            self.api.call(lambda: iam.delete_role_policy(RoleName=role, PolicyName="trainvm"), missing=None)
            self.api.call(lambda: iam.delete_role(RoleName=role), missing=None)
        return got is not None or found_role is not None


def ssh_public_key() -> str | None:
    return read_public_key(settings.text("TRAINVM_SSH_PUBLIC_KEY") or None)


def _rules(perms: Sequence[IpPermission]) -> set[tuple[str | int | None, ...]]:
    out: set[tuple[str | int | None, ...]] = set()
    for p in perms:
        for r in p.get("IpRanges") or []:
            out.add((p.get("IpProtocol"), p.get("FromPort"), p.get("ToPort"), r.get("CidrIp")))
        for r in p.get("Ipv6Ranges") or []:
            out.add((p.get("IpProtocol"), p.get("FromPort"), p.get("ToPort"), r.get("CidrIpv6")))
    return out
