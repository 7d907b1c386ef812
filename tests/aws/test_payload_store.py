"""S3PayloadStore (providers/aws/store.py) through boto3 against moto's server, what moto stored read back through
the S3 API with another client. S3 goes to moto directly, not through the EC2 fault proxy (which speaks only
EC2's POST/GET). What moto does not model here: bucket-name uniqueness across the real partition (only across
moto's accounts), Block Public Access actually blocking anything, lifecycle expiry ever running, SSE-S3 actually
encrypting, the eventual consistency of a just-created bucket, and IAM (off in these tests: the caller may do
everything; tests/aws/test_fetch_aws.py turns moto's signature and policy checks on for the VM's read)."""

from __future__ import annotations

import hashlib
import json
import socket
from datetime import UTC, datetime, timedelta

import pytest

from provisioner.providers.aws import request as R
from provisioner.providers.aws.store import S3PayloadStore, bucket_name, payload_url
from provisioner.providers.base import ConflictError, InvalidRequestError, ProviderError, RetryExhaustedError
from provisioner.providers.store import EXPIRE_DAYS, REFRESH_DAYS, payload_key
from tests.aws.conftest import t4_offers, t4_spec
from tests.emulators.aws import ACCOUNT

DATA = b"\x1f\x8b payload bytes (a tar.gz in real life)"
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def calls(aws, monkeypatch):
    monkeypatch.setenv("TRAINVM_AWS_ENDPOINT", aws.moto_url)
    from provisioner.providers.aws.provider import AwsProvider

    return AwsProvider()


@pytest.fixture
def store(calls):
    return calls.payload_store()


def puts(store, region):
    """PutObject calls the store's own S3 client makes from now on (botocore's event, the real client)."""
    seen: list[str] = []
    store.api.client("s3", region).meta.events.register("before-parameter-build.s3.PutObject",
                                                          lambda params, **kw: seen.append(params["Key"]))
    return seen


def test_stage_twice_uploads_once_and_the_object_is_the_payload(aws, store):
    seen = puts(store, "us-west-2")
    first = store.stage("us-west-2", DATA, SHA)
    again = store.stage("us-west-2", DATA, SHA)
    assert (first.uploaded, again.uploaded) == (True, False) and seen == [payload_key(SHA)]
    bucket = f"trainvm-{ACCOUNT}-us-west-2"
    # the same object and URL; the presigned URL is signed at each stage (its X-Amz-Date moves with the clock)
    assert first == again.__class__(**{**again.__dict__, "uploaded": True, "signed_url": first.signed_url})
    assert (first.cloud, first.region, first.store, first.key, first.size) == ("aws", "us-west-2", bucket,
                                                                              f"payloads/{SHA}.tar.gz", len(DATA))
    assert first.url == f"{aws.moto_url}/{bucket}/payloads/{SHA}.tar.gz"
    assert f"arn:aws:s3:::{bucket}/payloads/{SHA}.tar.gz" in first.access
    s3 = aws.client("s3", "us-west-2", direct=True)
    assert s3.get_object(Bucket=bucket, Key=first.key)["Body"].read() == DATA
    assert store.stored("us-west-2") == [SHA]


@pytest.mark.parametrize("region, constraint", [("us-west-2", "us-west-2"), ("us-east-1", None)])
def test_the_bucket_is_private_tagged_encrypted_and_expires_payloads(aws, store, region, constraint):
    store.stage(region, DATA, SHA)
    s3, bucket = aws.client("s3", region, direct=True), bucket_name(ACCOUNT, region)
    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == constraint  # us-east-1: none sent
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == [{"Key": "trainvm-managed", "Value": "true"}]
    [rule] = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    [life] = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert life["Status"] == "Enabled" and life["Filter"] == {"Prefix": "payloads/"}
    assert life["Expiration"] == {"Days": EXPIRE_DAYS}


def test_a_second_process_reuses_the_bucket_and_converges_it(aws, calls):
    """A bucket this account already owns (BucketAlreadyOwnedByYou outside us-east-1) is used again, and its
    settings put back (an interrupted first run may have left them out)."""
    bucket = bucket_name(ACCOUNT, "us-west-2")
    s3 = aws.client("s3", "us-west-2", direct=True)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    ref = S3PayloadStore(calls.api).stage("us-west-2", DATA, SHA)
    assert ref.store == bucket and ref.uploaded
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == [{"Key": "trainvm-managed", "Value": "true"}]


def test_an_object_of_another_size_is_uploaded_again(aws, store):
    bucket = bucket_name(ACCOUNT, "us-west-2")
    store.stage("us-west-2", DATA, SHA)
    s3 = aws.client("s3", "us-west-2", direct=True)
    s3.put_object(Bucket=bucket, Key=payload_key(SHA), Body=DATA[:-3])  # a truncated copy under the payload's key
    seen = puts(store, "us-west-2")
    again = store.stage("us-west-2", DATA, SHA)
    assert again.uploaded and again.refreshed and seen == [payload_key(SHA)]
    assert s3.get_object(Bucket=bucket, Key=payload_key(SHA))["Body"].read() == DATA


@pytest.mark.parametrize("age_days, uploaded", [(REFRESH_DAYS - 1, False), (REFRESH_DAYS + 1, True)])
def test_an_object_older_than_the_refresh_age_is_uploaded_again(calls, age_days, uploaded):
    """The store's clock moved ``age_days`` past the upload (moto's LastModified is the real time of the PUT)."""
    S3PayloadStore(calls.api).stage("us-west-2", DATA, SHA)
    later = S3PayloadStore(calls.api, now=lambda: datetime.now(UTC) + timedelta(days=age_days))
    seen = puts(later, "us-west-2")
    ref = later.stage("us-west-2", DATA, SHA)
    assert ref.uploaded is uploaded and ref.refreshed is uploaded  # the object was there: a refresh (issue 36 item 3)
    assert seen == ([payload_key(SHA)] if uploaded else [])


def test_release_deletes_the_object_and_keeps_the_bucket(aws, store):
    other = b"another payload"
    other_sha = hashlib.sha256(other).hexdigest()
    assert store.stored("us-west-2") == [] and store.release("us-west-2", SHA) is False  # no bucket yet
    store.stage("us-west-2", DATA, SHA)
    store.stage("us-west-2", other, other_sha)
    assert store.stored("us-west-2") == sorted([SHA, other_sha])
    assert store.release("us-west-2", SHA) is True
    assert store.stored("us-west-2") == [other_sha] and store.release("us-west-2", SHA) is False
    s3 = aws.client("s3", "us-west-2", direct=True)
    assert s3.head_bucket(Bucket=bucket_name(ACCOUNT, "us-west-2"))["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_stored_ignores_what_is_not_a_payload(aws, store):
    store.stage("us-west-2", DATA, SHA)
    aws.client("s3", "us-west-2", direct=True).put_object(Bucket=bucket_name(ACCOUNT, "us-west-2"),
                                                          Key="payloads/notes.txt", Body=b"x")
    assert store.stored("us-west-2") == [SHA]


def test_a_payload_whose_hash_is_not_its_sha256_is_refused(store):
    with pytest.raises(InvalidRequestError, match="does not match"):
        store.stage("us-west-2", DATA + b"!", SHA)


def test_a_bucket_name_owned_by_another_account_is_a_clear_error(aws, store):
    """moto keeps bucket names unique across its accounts; the other account is chosen with moto's
    ``x-moto-account-id`` header."""
    import boto3

    other = boto3.client("s3", region_name="us-west-2", endpoint_url=aws.moto_url, aws_access_key_id="testing",
                         aws_secret_access_key="testing")
    other.meta.events.register("before-sign.s3", lambda request, **kw: request.headers.__setitem__(
        "x-moto-account-id", "210987654321"))
    other.create_bucket(Bucket=bucket_name(ACCOUNT, "us-west-2"),
                        CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    with pytest.raises(ConflictError, match="taken by another AWS account") as err:
        store.stage("us-west-2", DATA, SHA)
    assert err.value.code == "BucketAlreadyExists"


def test_an_unreachable_endpoint_is_a_provider_error_after_a_bounded_number_of_tries(aws, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    from provisioner.providers.aws.api import AwsApi

    api = AwsApi(endpoint=dead, tries=2)
    sent: list[str] = []
    api.client("sts", "us-east-1").meta.events.register("before-send", lambda request, **kw: sent.append(request.url))
    with pytest.raises(ProviderError) as err:
        S3PayloadStore(api).stage("us-west-2", DATA, SHA)
    assert isinstance(err.value, RetryExhaustedError) and len(sent) == 2


def test_the_url_is_virtual_hosted_on_aws_and_path_style_on_an_emulator():
    assert payload_url("trainvm-1-eu-west-1", "eu-west-1", "payloads/a.tar.gz") == \
        "https://trainvm-1-eu-west-1.s3.eu-west-1.amazonaws.com/payloads/a.tar.gz"
    assert payload_url("b-1", "eu-west-1", "payloads/a.tar.gz", "http://127.0.0.1:5000/") == \
        "http://127.0.0.1:5000/b-1/payloads/a.tar.gz"


def test_every_vm_with_a_payload_gets_an_instance_profile_reading_exactly_its_object(aws, calls):
    """``create`` with ``spec.payload``: an instance profile even without lifecycle or s3:// data, whose one
    statement is s3:GetObject on the payload's object ARN (read back from moto's IAM)."""
    offer = t4_offers()[0]
    ref = calls.payload_store().stage("us-east-1", DATA, SHA)
    spec = t4_spec(offer, idle_shutdown_minutes=None, max_run_hours=None, payload=ref)
    calls.create(spec, offer)
    assert aws.instance_profiles() == [spec.name]
    doc = aws.client("iam", direct=True).get_role_policy(RoleName=spec.name, PolicyName="trainvm")["PolicyDocument"]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    assert doc == R.role_policy(spec, "us-east-1") == {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{ref.store}/{ref.key}"}]}
    [inst] = aws.instances()
    assert inst["IamInstanceProfile"]["Arn"].endswith(f":instance-profile/{spec.name}")
