"""The AWS payload store (providers/store.py): one private S3 bucket per account and region.

- The bucket is ``trainvm-<account id>-<region>`` (the account from STS GetCallerIdentity). S3 bucket names are
  3-63 characters of lowercase letters, digits, ``.`` and ``-`` and unique within the partition
  (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html); 8 + 12 + 1 + at most 14 (the longest
  region name) stays well under 63.
- CreateBucket (``LocationConstraint`` everywhere except us-east-1, which refuses one). ``BucketAlreadyOwnedByYou``
  (or us-east-1's plain 200 for a bucket you own) is the same bucket again; ``BucketAlreadyExists`` is a bucket of
  that name in another account: a ``ConflictError`` saying so. Then, each time the
  store is first used in a process (idempotent calls, so an interrupted earlier run is converged): Block Public
  Access with all four settings on (new buckets have it on since April 2023: AWS What's New 2022-12, "Amazon S3
  will automatically enable S3 Block Public Access and disable access control lists for all new buckets"), the
  ``trainvm-managed=true`` tag, SSE-S3 default encryption, and a lifecycle rule deleting ``payloads/`` objects
  ``EXPIRE_DAYS`` after their last upload.
- ``stage``: HeadObject first; PutObject (one request: S3 never shows a half-written object) only when the object
  is missing, of another size, or older than ``REFRESH_DAYS``. The VM reads it with its instance profile
  (``aws_request.role_policy``: ``s3:GetObject`` on exactly ``arn:aws:s3:::<bucket>/<key>``), its request
  signed by curl's ``--aws-sigv4`` (templates/bootstrap/fetch-aws.sh).
- ``PayloadRef.url``: the virtual-hosted URL ``https://<bucket>.s3.<region>.amazonaws.com/<key>``; with
  ``TRAINVM_AWS_ENDPOINT`` (moto's server in tests) the path-style ``<endpoint>/<bucket>/<key>``.
- Failures go through ``AwsApi.call`` (botocore's adaptive retries, then ``aws_errors.classify``).

boto3 is imported only through ``AwsApi`` (on first use), never by importing this module.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from provisioner.providers.aws.sdk import S3, CreateBucketConfiguration
from provisioner.providers.base import ConflictError, InvalidRequestError
from provisioner.providers.store import EXPIRE_DAYS, PAYLOAD_PREFIX, REFRESH_DAYS, PayloadRef, payload_key

if TYPE_CHECKING:
    from provisioner.providers.aws.api import AwsApi

MANAGED_TAG = {"Key": "trainvm-managed", "Value": "true"}
LIFECYCLE_RULE_ID = "trainvm-payload-expiry"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
KEY_RE = re.compile(r"^" + re.escape(PAYLOAD_PREFIX) + r"([0-9a-f]{64})\.tar\.gz$")


def bucket_name(account: str, region: str) -> str:
    return f"trainvm-{account}-{region}"


def payload_url(bucket: str, region: str, key: str, endpoint: str = "") -> str:
    """The URL the VM GETs: virtual-hosted on AWS; path-style on an emulator's single host."""
    if endpoint:
        return f"{endpoint.rstrip('/')}/{bucket}/{key}"
    return f"https://{bucket}.s3.{region}.amazonaws.com/{key}"


def object_arn(bucket: str, key: str) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


#: how long the presigned GET of a payload lives: the VM fetches it in its first minutes and keeps a verified
#: copy, so a restart never needs it again (a URL signed with temporary credentials dies with them, sooner)
PRESIGN_SECONDS = 6 * 3600


class S3PayloadStore:
    """``PayloadStore`` on S3 through the API client's (``AwsApi``) clients (its endpoint, credentials and retries)."""

    def __init__(self, api: AwsApi, *, now: Callable[[], datetime] | None = None) -> None:
        self.api = api
        self._now = now or (lambda: datetime.now(UTC))
        self._account: str | None = None
        self._ready: set[str] = set()  # regions whose bucket this process created or converged

    # ------------------------------------------------------------------ names
    def account(self) -> str:
        if self._account is None:
            sts = self.api.sts()
            self._account = str(self.api.call(lambda: sts.get_caller_identity())["Account"])
        return self._account

    def bucket(self, region: str) -> str:
        return bucket_name(self.account(), region)

    def url(self, region: str, key: str) -> str:
        return payload_url(self.bucket(region), region, key, self.api.endpoint)

    def _s3(self, region: str) -> S3:
        return self.api.s3(region)

    # ------------------------------------------------------------------ the bucket
    def ensure_bucket(self, region: str) -> str:
        """The region's bucket, created when missing, its settings converged once per process."""
        bucket = self.bucket(region)
        if region in self._ready:
            return bucket
        s3 = self._s3(region)
        # us-east-1 refuses a LocationConstraint (InvalidLocationConstraint)
        where = CreateBucketConfiguration(LocationConstraint=region)
        try:
            self.api.call(lambda: s3.create_bucket(Bucket=bucket) if region == "us-east-1"
                          else s3.create_bucket(Bucket=bucket, CreateBucketConfiguration=where))
        except Exception as exc:  # noqa: BLE001 - ProviderError with the S3 code
            code = getattr(exc, "code", None)
            if code == "BucketAlreadyExists":
                raise self._foreign(bucket) from exc
            if code != "BucketAlreadyOwnedByYou":
                raise
        self.api.call(lambda: s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration={
            "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True}))
        self.api.call(lambda: s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}))
        self.api.call(lambda: s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [MANAGED_TAG]}))
        self.api.call(lambda: s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={
            "Rules": [{"ID": LIFECYCLE_RULE_ID, "Status": "Enabled", "Filter": {"Prefix": PAYLOAD_PREFIX},
                       "Expiration": {"Days": EXPIRE_DAYS}}]}))
        self._ready.add(region)
        return bucket

    def _foreign(self, bucket: str) -> ConflictError:
        return ConflictError(f"the S3 bucket name {bucket} is taken by another AWS account; trainvm keeps its "
                             "payloads in a bucket of that name (trainvm-<account id>-<region>) and cannot use this one",
                             code="BucketAlreadyExists")

    # ------------------------------------------------------------------ the contract
    def stage(self, region: str, data: bytes, sha256: str) -> PayloadRef:
        if not SHA256_RE.match(sha256) or hashlib.sha256(data).hexdigest() != sha256:
            raise InvalidRequestError(f"payload sha256 {sha256[:16]}... does not match the payload's bytes",
                                      code="PAYLOAD_HASH")
        bucket, key = self.ensure_bucket(region), payload_key(sha256)
        s3 = self._s3(region)
        head = self.api.call(lambda: s3.head_object(Bucket=bucket, Key=key), missing=None)
        fresh = head is not None and head.get("ContentLength") == len(data) and isinstance(
            head.get("LastModified"), datetime) and self._now() - head["LastModified"] < timedelta(days=REFRESH_DAYS)
        if not fresh:
            self.api.call(lambda: s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/gzip",
                                                  Metadata={"sha256": sha256}))
        # for a VM whose curl cannot sign the session-token header (Ubuntu 22.04: fetch-aws.sh), a GET presigned by
        # boto3 with the caller's credentials, for PRESIGN_SECONDS at most (less when those credentials are temporary)
        signed = self.api.call(lambda: s3.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=PRESIGN_SECONDS))
        return PayloadRef(cloud="aws", region=region, store=bucket, key=key, url=self.url(region, key), sha256=sha256,
                          size=len(data), access=f"s3:GetObject on {object_arn(bucket, key)} (the VM's instance profile)",
                          uploaded=not fresh, refreshed=head is not None and not fresh, signed_url=signed)

    def release(self, region: str, sha256: str) -> bool:
        bucket, key = self.bucket(region), payload_key(sha256)
        s3 = self._s3(region)
        if self.api.call(lambda: s3.head_object(Bucket=bucket, Key=key), missing=None) is None:
            return False
        self.api.call(lambda: s3.delete_object(Bucket=bucket, Key=key), missing=None)
        return True

    def stored(self, region: str) -> list[str]:
        bucket, s3 = self.bucket(region), self._s3(region)
        pages = self.api.call(lambda: list(s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=PAYLOAD_PREFIX)), missing=None)
        keys = [o["Key"] for page in pages or [] for o in page.get("Contents") or []]
        return sorted(m.group(1) for m in map(KEY_RE.match, keys) if m)


__all__ = ["S3PayloadStore", "bucket_name", "object_arn", "payload_url"]
