"""The EC2, IAM, SSM and Service Quotas clients as trainvm calls them (issue 37: no explicit ``Any`` in the AWS package).

boto3 builds its clients from the botocore service models at run time, so mypy sees them untyped; these Protocols are
the typed adapter, as aws/sdk.py's are for S3, STS and the spot prices: each names only the operations trainvm calls,
with the keyword names of the botocore service model (``botocore/data/<service>/<version>/service-2.json``: ec2
2016-11-15, iam 2010-05-08, ssm 2014-11-06, service-quotas 2019-06-24), the request parameters of aws/params.py where
trainvm builds them (``Unpack``: what is sent is the dict as it is), and what trainvm reads of each answer as a
TypedDict named after the model's shape. ``AwsApi`` (aws/api.py) is the one place an untyped client becomes one of
them (a ``cast`` where the client is made). A misspelled operation, keyword or answer field is a mypy error
(tests/aws/test_no_any.py).

An answer's members are all optional in the service models (output shapes list no ``required`` members, except IAM's);
those trainvm always gets and reads by key are ``Required`` here, as they were where trainvm read them before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Literal, Protocol, Required, TypedDict, Unpack, overload

from provisioner.providers.aws.params import (
    Filter,
    IpPermission,
    PlacementGroupParams,
    RunInstancesParams,
    SecurityGroupParams,
    Tag,
    TagSpecification,
)
from provisioner.providers.aws.sdk import DescribeZones, SpotPricePaginator


# ---------------------------------------------------------------------------------------------- EC2 answers
class InstanceState(TypedDict):  # ec2 InstanceState
    Name: str


class Placement(TypedDict, total=False):  # ec2 Placement (what an answer gives)
    AvailabilityZone: str


class StateReason(TypedDict, total=False):  # ec2 StateReason (of an Instance and of an Image)
    Code: str
    Message: str


class Ec2Instance(TypedDict, total=False):
    """The members of ec2 ``Instance`` (DescribeInstances, RunInstances) that trainvm reads."""

    InstanceId: Required[str]
    State: Required[InstanceState]
    Tags: list[Tag]
    Placement: Placement
    InstanceType: str
    LaunchTime: datetime | str  # a timestamp: botocore parses it into a datetime
    StateTransitionReason: str
    StateReason: StateReason
    PublicIpAddress: str
    PrivateIpAddress: str
    ImageId: str
    InstanceLifecycle: str  # "spot" for a spot instance; absent on demand
    AmiLaunchIndex: int


class Reservation(TypedDict, total=False):  # ec2 Reservation (also RunInstances' answer)
    Instances: list[Ec2Instance]


class DescribeInstancesResult(TypedDict, total=False):  # one page of it, too
    Reservations: list[Reservation]


class DescribeInstancesPaginator(Protocol):
    def paginate(self, *, Filters: list[Filter]) -> Iterable[DescribeInstancesResult]: ...


class ImageEbs(TypedDict, total=False):  # ec2 EbsBlockDevice
    SnapshotId: str
    VolumeSize: int


class ImageMapping(TypedDict, total=False):  # ec2 BlockDeviceMapping
    DeviceName: str
    Ebs: ImageEbs


class Ec2Image(TypedDict, total=False):
    """The members of ec2 ``Image`` (DescribeImages) that trainvm reads."""

    ImageId: str
    Name: str
    State: str
    StateReason: StateReason
    CreationDate: str
    RootDeviceName: str
    Tags: list[Tag]
    BlockDeviceMappings: list[ImageMapping]


class DescribeImagesResult(TypedDict, total=False):
    Images: list[Ec2Image]


class ImageIdResult(TypedDict):  # CreateImageResult, CopyImageResult
    ImageId: str


class Region(TypedDict):
    RegionName: str


class DescribeRegionsResult(TypedDict):
    Regions: list[Region]


class SecurityGroup(TypedDict, total=False):  # ec2 SecurityGroup
    GroupId: Required[str]
    IpPermissions: list[IpPermission]


class DescribeSecurityGroupsResult(TypedDict, total=False):
    SecurityGroups: list[SecurityGroup]


class CreateSecurityGroupResult(TypedDict):
    GroupId: str


class Vpc(TypedDict):
    VpcId: str


class DescribeVpcsResult(TypedDict):
    Vpcs: list[Vpc]


class KeyPairInfo(TypedDict, total=False):
    KeyName: str
    Tags: list[Tag]


class DescribeKeyPairsResult(TypedDict, total=False):
    KeyPairs: list[KeyPairInfo]


class Snapshot(TypedDict, total=False):
    SnapshotId: Required[str]
    Description: str


class DescribeSnapshotsResult(TypedDict, total=False):
    Snapshots: list[Snapshot]


class PlacementGroup(TypedDict, total=False):  # ec2 PlacementGroup
    GroupName: str
    Tags: list[Tag]


class DescribePlacementGroupsResult(TypedDict, total=False):
    PlacementGroups: list[PlacementGroup]


class VCpuInfo(TypedDict):
    DefaultVCpus: int


class InstanceTypeInfo(TypedDict):
    InstanceType: str
    VCpuInfo: VCpuInfo


class DescribeInstanceTypesResult(TypedDict):
    InstanceTypes: list[InstanceTypeInfo]


class ConsoleOutput(TypedDict, total=False):  # GetConsoleOutputResult: Output base64-decoded by botocore
    Output: str


class WaiterConfig(TypedDict):
    Delay: float
    MaxAttempts: int


class Waiter(Protocol):
    def wait(self, *, InstanceIds: list[str], WaiterConfig: WaiterConfig) -> None: ...


#: ec2's waiters-2.json ``InstanceRunning``, ``InstanceStopped``, ``InstanceTerminated``, as boto3 names them
WaiterName = Literal["instance_running", "instance_stopped", "instance_terminated"]


class Ec2(Protocol):
    """The EC2 operations trainvm calls (every AWS module; aws/sdk.py ``Ec2Prices`` is the catalog refresh's part)."""

    def describe_regions(self, *, AllRegions: bool) -> DescribeRegionsResult: ...
    def describe_availability_zones(self, *, AllAvailabilityZones: bool) -> DescribeZones: ...
    def describe_images(self, *, ImageIds: list[str] = ..., Owners: list[str] = ...,
                        Filters: list[Filter] = ...) -> DescribeImagesResult: ...
    def create_image(self, *, InstanceId: str, Name: str, Description: str, NoReboot: bool,
                     TagSpecifications: list[TagSpecification]) -> ImageIdResult: ...
    def copy_image(self, *, SourceImageId: str, SourceRegion: str, Name: str, Description: str,
                   ClientToken: str) -> ImageIdResult: ...
    def deregister_image(self, *, ImageId: str) -> object: ...
    def describe_snapshots(self, *, OwnerIds: list[str], Filters: list[Filter]) -> DescribeSnapshotsResult: ...
    def delete_snapshot(self, *, SnapshotId: str) -> object: ...
    def create_tags(self, *, Resources: list[str], Tags: list[Tag]) -> object: ...
    def describe_security_groups(self, *, Filters: list[Filter]) -> DescribeSecurityGroupsResult: ...
    def describe_vpcs(self, *, Filters: list[Filter]) -> DescribeVpcsResult: ...
    def create_security_group(self, **params: Unpack[SecurityGroupParams]) -> CreateSecurityGroupResult: ...
    def authorize_security_group_ingress(self, *, GroupId: str, IpPermissions: Sequence[IpPermission]) -> object: ...
    def revoke_security_group_ingress(self, *, GroupId: str, IpPermissions: Sequence[IpPermission]) -> object: ...
    def delete_security_group(self, *, GroupId: str) -> object: ...
    def import_key_pair(self, *, KeyName: str, PublicKeyMaterial: bytes,
                        TagSpecifications: list[TagSpecification]) -> object: ...
    def describe_key_pairs(self, *, KeyNames: list[str]) -> DescribeKeyPairsResult: ...
    def delete_key_pair(self, *, KeyName: str) -> object: ...
    def create_placement_group(self, **params: Unpack[PlacementGroupParams]) -> object: ...
    def describe_placement_groups(self, *, GroupNames: list[str]) -> DescribePlacementGroupsResult: ...
    def delete_placement_group(self, *, GroupName: str) -> object: ...
    def run_instances(self, **params: Unpack[RunInstancesParams]) -> Reservation: ...
    def describe_instances(self, *, InstanceIds: list[str]) -> DescribeInstancesResult: ...
    def describe_instance_types(self, *, InstanceTypes: list[str]) -> DescribeInstanceTypesResult: ...
    def get_console_output(self, *, InstanceId: str, Latest: bool) -> ConsoleOutput: ...
    def stop_instances(self, *, InstanceIds: list[str]) -> object: ...
    def start_instances(self, *, InstanceIds: list[str]) -> object: ...
    def terminate_instances(self, *, InstanceIds: list[str]) -> object: ...
    @overload
    def get_paginator(self, operation_name: Literal["describe_instances"]) -> DescribeInstancesPaginator: ...
    @overload
    def get_paginator(self, operation_name: Literal["describe_spot_price_history"]) -> SpotPricePaginator: ...
    def get_waiter(self, waiter_name: WaiterName) -> Waiter: ...


# ---------------------------------------------------------------------------------------------- IAM
class Role(TypedDict):  # iam Role
    RoleName: str


class InstanceProfile(TypedDict, total=False):  # iam InstanceProfile
    Roles: list[Role]
    Tags: list[Tag]  # iam Tag: Key and Value, as ec2's


class InstanceProfileResult(TypedDict):  # GetInstanceProfileResponse, CreateInstanceProfileResponse
    InstanceProfile: InstanceProfile


class Iam(Protocol):
    def create_role(self, *, RoleName: str, AssumeRolePolicyDocument: str, Description: str,
                    Tags: list[Tag]) -> object: ...
    def put_role_policy(self, *, RoleName: str, PolicyName: str, PolicyDocument: str) -> object: ...
    def get_role(self, *, RoleName: str) -> object: ...
    def delete_role_policy(self, *, RoleName: str, PolicyName: str) -> object: ...
    def delete_role(self, *, RoleName: str) -> object: ...
    def create_instance_profile(self, *, InstanceProfileName: str, Tags: list[Tag]) -> InstanceProfileResult: ...
    def get_instance_profile(self, *, InstanceProfileName: str) -> InstanceProfileResult: ...
    def add_role_to_instance_profile(self, *, InstanceProfileName: str, RoleName: str) -> object: ...
    def remove_role_from_instance_profile(self, *, InstanceProfileName: str, RoleName: str) -> object: ...
    def delete_instance_profile(self, *, InstanceProfileName: str) -> object: ...


# ---------------------------------------------------------------------------------------------- SSM, Service Quotas
class Parameter(TypedDict):  # ssm Parameter
    Value: str


class GetParameterResult(TypedDict):
    Parameter: Parameter


class Ssm(Protocol):
    def get_parameter(self, *, Name: str) -> GetParameterResult: ...


class ErrorReason(TypedDict, total=False):  # service-quotas ErrorReason
    ErrorCode: str
    ErrorMessage: str


class ServiceQuota(TypedDict, total=False):
    """The members of service-quotas ``ServiceQuota`` that trainvm reads (GetServiceQuota, GetAWSDefaultServiceQuota)."""

    Value: float | None
    ErrorReason: ErrorReason


class QuotaResult(TypedDict):  # GetServiceQuotaResponse, GetAWSDefaultServiceQuotaResponse
    Quota: ServiceQuota


class ServiceQuotas(Protocol):
    def get_service_quota(self, *, ServiceCode: str, QuotaCode: str) -> QuotaResult: ...
    def get_aws_default_service_quota(self, *, ServiceCode: str, QuotaCode: str) -> QuotaResult: ...
