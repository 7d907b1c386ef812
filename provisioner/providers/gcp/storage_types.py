"""Typed views of what ``GcsPayloadStore`` calls and reads of google-cloud-storage (issue 37: no explicit ``Any`` in the
GCE provider package). That SDK ships no ``py.typed``, so mypy sees its clients as ``Any``: these protocols name the
methods and fields the store uses, with the SDK's names and keyword arguments (google-cloud-storage 3.x: ``Client``,
``Bucket``, ``Blob``; ``google.api_core.iam.Policy``), so a misspelled one is a mypy error. The SDK's objects are
handed over as they are (no copy, no import of the SDK here)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol, TypedDict

#: the ``retry=`` argument: ``GcsPayloadStore.retry()``'s ``google.api_core.retry.Retry``, passed through to the SDK (only
#: gcp/store.py names api_core's retry: tests/unit/test_poll.py)
Retry = object


class RuleAction(TypedDict, total=False):
    type: str


class RuleCondition(TypedDict, total=False):
    age: int
    matchesPrefix: list[str]


class LifecycleRule(TypedDict, total=False):
    """One rule of a bucket's lifecycle, as the JSON API stores it (``Bucket.lifecycle_rules`` yields dicts)."""

    action: RuleAction
    condition: RuleCondition


class Binding(TypedDict, total=False):
    """One binding of an IAM policy (``Policy.bindings``, policy version 3)."""

    role: str
    members: set[str]
    condition: dict[str, str]


class Policy(Protocol):
    bindings: list[Binding]


class IamConfiguration(Protocol):
    uniform_bucket_level_access_enabled: bool
    public_access_prevention: str  # "enforced" or "inherited"


class Blob(Protocol):
    name: str
    size: int | None
    md5_hash: str | None  # base64 of the MD5 digest
    time_created: datetime | None

    def upload_from_string(self, data: bytes, *, content_type: str, retry: Retry, timeout: float) -> None: ...

    def delete(self, *, retry: Retry, timeout: float) -> None: ...


class Bucket(Protocol):
    name: str
    labels: dict[str, str]
    lifecycle_rules: Iterable[LifecycleRule]
    iam_configuration: IamConfiguration

    def blob(self, blob_name: str) -> Blob: ...

    def get_blob(self, blob_name: str, *, retry: Retry, timeout: float) -> Blob | None: ...

    def patch(self, *, retry: Retry, timeout: float) -> None: ...

    def get_iam_policy(self, *, requested_policy_version: int, retry: Retry, timeout: float) -> Policy: ...

    def set_iam_policy(self, policy: Policy, *, retry: Retry, timeout: float) -> Policy: ...


class Client(Protocol):
    """``google.cloud.storage.Client``."""

    def bucket(self, bucket_name: str) -> Bucket: ...

    def lookup_bucket(self, bucket_name: str, *, retry: Retry, timeout: float) -> Bucket | None: ...

    def get_bucket(self, bucket_or_name: str, *, retry: Retry, timeout: float) -> Bucket: ...

    def create_bucket(self, bucket_or_name: Bucket, *, project: str, location: str, retry: Retry,
                      timeout: float) -> Bucket: ...

    def list_blobs(self, bucket_or_name: str, *, prefix: str, retry: Retry, timeout: float) -> Iterable[Blob]: ...
