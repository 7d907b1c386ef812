"""The EC2 request parameters trainvm sends, as boto3 takes them (issue 37: no explicit ``Any`` in the AWS package).

Each is a TypedDict naming the members trainvm sets, spelled as in the botocore service model (ec2 2016-11-15:
``RunInstancesRequest``, ``CreateSecurityGroupRequest``, ``IpPermission``, ``CreatePlacementGroupRequest``): a
misspelled member is a mypy error, and what is sent is unchanged (boto3 takes the dicts as they are).
"""

from __future__ import annotations

from typing import Required, TypedDict


class Tag(TypedDict):
    Key: str
    Value: str


class TagSpecification(TypedDict):
    ResourceType: str
    Tags: list[Tag]


class Ebs(TypedDict, total=False):
    VolumeSize: Required[int]
    VolumeType: Required[str]
    DeleteOnTermination: Required[bool]
    Encrypted: Required[bool]
    Iops: int
    Throughput: int


class BlockDeviceMapping(TypedDict):
    DeviceName: str
    Ebs: Ebs


class Placement(TypedDict, total=False):
    AvailabilityZone: str
    AvailabilityZoneId: str  # request_preview's: the catalog's AZ ID (up sends this account's AZ name)
    GroupName: str


class MetadataOptions(TypedDict):
    HttpTokens: str
    HttpEndpoint: str
    HttpPutResponseHopLimit: int
    InstanceMetadataTags: str


class SpotOptions(TypedDict, total=False):
    SpotInstanceType: Required[str]
    InstanceInterruptionBehavior: Required[str]
    MaxPrice: str


class InstanceMarketOptions(TypedDict):
    MarketType: str
    SpotOptions: SpotOptions


class IamInstanceProfile(TypedDict):
    Name: str


class RunInstancesParams(TypedDict, total=False):
    """RunInstances as boto3 takes it: ``UserData`` raw bytes (boto3 base64-encodes it; request_preview shows it
    base64 as text, as it goes on the wire)."""

    ImageId: Required[str]
    InstanceType: Required[str]
    MinCount: Required[int]
    MaxCount: Required[int]
    Placement: Required[Placement]
    UserData: Required[bytes | str]
    BlockDeviceMappings: Required[list[BlockDeviceMapping]]
    SecurityGroupIds: Required[list[str]]
    InstanceInitiatedShutdownBehavior: Required[str]
    MetadataOptions: Required[MetadataOptions]
    TagSpecifications: Required[list[TagSpecification]]
    ClientToken: Required[str]
    KeyName: str
    IamInstanceProfile: IamInstanceProfile
    InstanceMarketOptions: InstanceMarketOptions


class SecurityGroupParams(TypedDict, total=False):
    GroupName: Required[str]
    Description: Required[str]
    TagSpecifications: Required[list[TagSpecification]]
    VpcId: str


class IpRange(TypedDict, total=False):
    CidrIp: str
    CidrIpv6: str
    Description: str


class UserIdGroupPair(TypedDict, total=False):
    GroupId: Required[str]
    Description: str


class IpPermission(TypedDict, total=False):
    """An ingress rule, as AuthorizeSecurityGroupIngress takes it and DescribeSecurityGroups answers it."""

    IpProtocol: str
    FromPort: int
    ToPort: int
    IpRanges: list[IpRange]
    Ipv6Ranges: list[IpRange]
    UserIdGroupPairs: list[UserIdGroupPair]


class PlacementGroupParams(TypedDict):
    GroupName: str
    Strategy: str
    TagSpecifications: list[TagSpecification]


class Filter(TypedDict):
    Name: str
    Values: list[str]
