"""The helper's secret readers (templates/files/trainvm_helper.py): no cloud CLI on the VM (images ship none
on AWS; the data phase must not depend on one anywhere), only the VM's identity through its metadata server
and the store's HTTPS API. Secrets Manager requests are signed with SigV4 in the standard library; the
signature is checked against botocore's signer (the reference implementation) for the same request."""

from __future__ import annotations

import base64
import io
import json
import time
import urllib.request

import pytest

from tests.helpers import load_helper


@pytest.fixture()
def helper():
    return load_helper("trainvm_helper_secrets")


def botocore_authorization(keys, region, host, target, body, now):
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    req = AWSRequest(method="POST", url=f"https://{host}/", data=body,
                     headers={"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target})
    import botocore.auth

    orig = botocore.auth.get_current_datetime
    botocore.auth.get_current_datetime = lambda: __import__("datetime").datetime(*now[:6])
    try:
        SigV4Auth(Credentials(keys["AccessKeyId"], keys["SecretAccessKey"], keys.get("Token")), "secretsmanager", region).add_auth(req)
    finally:
        botocore.auth.get_current_datetime = orig
    return req.headers["Authorization"]


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEBYaDstub-session-token"])
def test_sigv4_matches_botocore(helper, token):
    keys = {"AccessKeyId": "ASIAEXAMPLE1234", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
    if token:
        keys["Token"] = token
    now = time.gmtime(1764090000)
    body = json.dumps({"SecretId": "data/reader"}).encode()
    host = "secretsmanager.eu-west-1.amazonaws.com"
    head = {"content-type": "application/x-amz-json-1.1", "x-amz-target": "secretsmanager.GetSecretValue"}
    ours = helper.aws_sigv4(keys, "eu-west-1", "secretsmanager", host, head, body, now)
    assert ours["authorization"] == botocore_authorization(keys, "eu-west-1", host, "secretsmanager.GetSecretValue", body, now)
    assert ours.get("x-amz-security-token") == token


class FakeNetwork:
    """urlopen for one VM: its metadata server and one secret store; records (method, url, headers, body)."""

    def __init__(self, answers):
        self.answers, self.seen = answers, []

    def __call__(self, req, timeout=None):
        self.seen.append((req.get_method(), req.full_url, {k.lower(): v for k, v in req.header_items()}, req.data))
        for prefix, answer in self.answers.items():
            if req.full_url.startswith(prefix):
                text = answer(req) if callable(answer) else answer
                return io.BytesIO((text if isinstance(text, str) else json.dumps(text)).encode())
        raise AssertionError(f"unexpected request {req.full_url}")


def test_aws_reader_uses_imdsv2_and_a_signed_get_secret_value(helper, monkeypatch):
    keys = {"AccessKeyId": "ASIAROLE", "SecretAccessKey": "role-secret", "Token": "role-session"}

    def secrets_manager(req):
        headers = {k.lower(): v for k, v in req.header_items()}
        now = time.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
        assert headers["authorization"] == botocore_authorization(keys, "eu-west-1", "secretsmanager.eu-west-1.amazonaws.com",
                                                                  headers["x-amz-target"], req.data, now)
        assert json.loads(req.data) == {"SecretId": "data/reader"}
        return {"SecretString": '{"aws_access_key_id": "AKIAX", "aws_secret_access_key": "k"}'}

    net = FakeNetwork({
        "http://169.254.169.254/latest/api/token": "imds-token",
        "http://169.254.169.254/latest/meta-data/placement/region": "eu-west-1",
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/trainvm-role": keys,
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/": "trainvm-role\n",
        "https://secretsmanager.eu-west-1.amazonaws.com/": secrets_manager,
    })
    monkeypatch.setattr(urllib.request, "urlopen", net)
    assert json.loads(helper.resolve_secret("secret://aws/data/reader", lines=True))["aws_access_key_id"] == "AKIAX"
    token_put = net.seen[0]
    assert token_put[0] == "PUT" and token_put[2]["x-aws-ec2-metadata-token-ttl-seconds"] == "300"
    assert all(h.get("x-aws-ec2-metadata-token") == "imds-token" for _, url, h, _ in net.seen[1:4])  # IMDSv2 only
    assert net.seen[-1][0] == "POST" and net.seen[-1][2]["x-amz-security-token"] == "role-session"


def test_gcp_reader_uses_the_metadata_token_and_secret_manager(helper, monkeypatch):
    key = {"type": "service_account", "client_email": "reader@p.iam.gserviceaccount.com",
           "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"}
    text = json.dumps(key, indent=2)
    net = FakeNetwork({
        "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token": {"access_token": "ya29.vm"},
        "http://metadata.google.internal/computeMetadata/v1/project/project-id": "proj-1",
        "https://secretmanager.googleapis.com/v1/projects/proj-1/secrets/reader-key/versions/latest:access":
            {"payload": {"data": base64.b64encode(text.encode()).decode()}},
    })
    monkeypatch.setattr(urllib.request, "urlopen", net)
    assert helper.resolve_secret("secret://gcp/reader-key", lines=True) == text  # a multi-line key file, as stored
    assert all(h["metadata-flavor"] == "Google" for _, url, h, _ in net.seen[:2])
    assert net.seen[2][2]["authorization"] == "Bearer ya29.vm"
    with pytest.raises(RuntimeError, match="newlines or control characters"):  # stack.env values stay one line
        helper.resolve_secret("secret://gcp/reader-key")


def test_a_missing_secret_is_an_error_naming_the_reference(helper, monkeypatch):
    import urllib.error

    def refuse(req, timeout=None):
        raise urllib.error.HTTPError(req.full_url, 404, "Not Found", {}, io.BytesIO(b""))

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    with pytest.raises(Exception, match="404"):
        helper.resolve_secret("secret://azure-keyvault/vault1/reader")
