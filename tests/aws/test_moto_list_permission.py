"""The test environment's moto authorises S3 ListObjectsV2 as AWS does (issue 36 item 27).

AWS: "To use this action in an AWS Identity and Access Management (IAM) policy, you must have permission to perform
the s3:ListBucket action" (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html); there is no IAM
action ``s3:ListObjectsV2`` (the S3 actions list: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
The instance profile ``up`` writes grants ``s3:ListBucket`` for a data source (providers/aws/request.py
``_s3_resources``), and the data copier lists with ListObjectsV2 (boto3's ``list_objects_v2`` paginator). moto
5.2.6 checks that call against ``s3:ListObjectsV2`` (its IAM action became the botocore operation's name), which
denies it under the policy that works on AWS; 5.2.4 and 5.2.5 check ``s3:ListBucket``, and below 5.2.4 (with the
locked botocore) a listing whose prefix holds "/" already fails moto's SigV4 check. pyproject.toml allows
``>=5.2.4,<5.2.6`` and requirements-dev.lock pins 5.2.5: this test fails if a re-lock brings the wrong check back."""

from __future__ import annotations

import boto3
import pytest

from provisioner.providers.aws import request as R
from tests.aws.conftest import role_credentials

BUCKET = "listing-bkt"


def _client_for(aws, role: str, statements: list[dict]) -> object:
    creds = role_credentials(aws, role, {"Version": "2012-10-17", "Statement": statements})
    return boto3.client("s3", region_name="us-east-1", endpoint_url=aws.moto_url, aws_access_key_id=creds["AccessKeyId"],
                        aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["Token"])


@pytest.fixture
def bucket(aws):
    s3 = aws.client("s3", direct=True)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="corpus/a.txt", Body=b"hello")
    return s3


def test_list_objects_v2_is_allowed_by_the_list_bucket_statement_up_writes(aws, bucket, moto_auth):
    _, listing = R._s3_resources((f"s3://{BUCKET}",))  # the whole bucket: no s3:prefix condition (moto has none)
    assert [st["Action"] for st in listing] == ["s3:ListBucket"]
    s3 = _client_for(aws, "lister", listing)
    moto_auth.on()
    got = s3.list_objects_v2(Bucket=BUCKET, Prefix="corpus/")
    assert [o["Key"] for o in got["Contents"]] == ["corpus/a.txt"]


def test_the_check_is_on_a_role_without_list_bucket_is_denied(aws, bucket, moto_auth):
    from botocore.exceptions import ClientError

    s3 = _client_for(aws, "reader", [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/*"}])
    moto_auth.on()
    with pytest.raises(ClientError) as err:
        s3.list_objects_v2(Bucket=BUCKET)
    assert err.value.response["Error"]["Code"] == "AccessDenied"
    assert s3.get_object(Bucket=BUCKET, Key="corpus/a.txt")["Body"].read() == b"hello"
