"""The boto3 clients as trainvm calls them (issue 37: no explicit ``Any`` in the AWS package).

boto3 builds its clients from the botocore service models at run time, so mypy sees them untyped; these Protocols are
the typed adapter: each names only the operations trainvm calls, with the keyword names of the botocore service
model (s3 2006-03-01, sts 2011-06-15, ec2 2016-11-15), and what trainvm reads of each answer as a TypedDict. The one
place an untyped client becomes one of them is a ``cast`` where the client is made. A misspelled operation, keyword or
answer field is a mypy error (tests/aws/test_no_any.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Literal, Protocol, TypedDict


# ---------------------------------------------------------------------------------------------- S3 and STS
class CreateBucketConfiguration(TypedDict):
    LocationConstraint: str


class HeadObject(TypedDict, total=False):
    ContentLength: int
    LastModified: datetime  # botocore parses the timestamp


class S3Object(TypedDict):
    Key: str


class ListObjectsPage(TypedDict, total=False):
    Contents: list[S3Object]


class ListObjectsPaginator(Protocol):
    def paginate(self, *, Bucket: str, Prefix: str) -> Iterable[ListObjectsPage]: ...


class S3(Protocol):
    def create_bucket(self, *, Bucket: str, CreateBucketConfiguration: CreateBucketConfiguration = ...) -> object: ...
    def put_public_access_block(self, *, Bucket: str, PublicAccessBlockConfiguration: Mapping[str, bool]) -> object: ...
    def put_bucket_encryption(self, *, Bucket: str, ServerSideEncryptionConfiguration: Mapping[str, object]) -> object: ...
    def put_bucket_tagging(self, *, Bucket: str, Tagging: Mapping[str, object]) -> object: ...
    def put_bucket_lifecycle_configuration(self, *, Bucket: str, LifecycleConfiguration: Mapping[str, object]) -> object: ...
    def head_object(self, *, Bucket: str, Key: str) -> HeadObject: ...
    def put_object(self, *, Bucket: str, Key: str, Body: bytes, ContentType: str, Metadata: Mapping[str, str]) -> object: ...
    def delete_object(self, *, Bucket: str, Key: str) -> object: ...
    def generate_presigned_url(self, ClientMethod: str, Params: Mapping[str, str] | None = None,
                               ExpiresIn: int = 3600) -> str: ...
    def get_paginator(self, operation_name: Literal["list_objects_v2"]) -> ListObjectsPaginator: ...


class CallerIdentity(TypedDict):
    Account: str


class Sts(Protocol):
    def get_caller_identity(self) -> CallerIdentity: ...


# ---------------------------------------------------------------------------------------------- EC2 (prices)
class ZoneInfo(TypedDict, total=False):
    ZoneName: str
    ZoneId: str
    State: str


class DescribeZones(TypedDict):
    AvailabilityZones: list[ZoneInfo]


class SpotPrice(TypedDict, total=False):
    AvailabilityZone: str
    AvailabilityZoneId: str
    InstanceType: str
    SpotPrice: str
    Timestamp: datetime  # botocore parses the timestamp


class SpotPricePage(TypedDict, total=False):
    SpotPriceHistory: list[SpotPrice]


class SpotPricePaginator(Protocol):
    def paginate(self, *, InstanceTypes: list[str], ProductDescriptions: list[str],
                 StartTime: datetime) -> Iterable[SpotPricePage]: ...


class Ec2Prices(Protocol):
    """The EC2 operations of the catalog refresh's spot prices (aws/prices.py)."""

    def get_paginator(self, operation_name: Literal["describe_spot_price_history"]) -> SpotPricePaginator: ...
    def describe_availability_zones(self, *, AllAvailabilityZones: bool) -> DescribeZones: ...


# ---------------------------------------------------------------------------------------------- session and config
class BotoConfig(Protocol):
    """A ``botocore.config.Config``."""

    def merge(self, other_config: BotoConfig) -> BotoConfig: ...


class Credentials(Protocol):
    @property
    def access_key(self) -> str: ...


class Session(Protocol):
    """The ``boto3.session.Session`` trainvm builds its clients from (its clients are untyped: ``object``)."""

    def client(self, service_name: str, **kwargs: object) -> object: ...
    def get_credentials(self) -> Credentials | None: ...
