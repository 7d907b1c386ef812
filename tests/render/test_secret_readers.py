"""The helper's secret readers (templates/files/trainvm_helper.py): no cloud CLI on the VM (images ship none
on AWS; the data phase must not depend on one anywhere), only the VM's identity through its metadata server
and the store's HTTPS API. The AWS reader (Secrets Manager through boto3 of the s3 tool's venv) is tested against
moto's server with its signature checks on: tests/aws/test_ec2_call.py."""

from __future__ import annotations

import base64
import io
import json
import urllib.request

import pytest

from tests.helpers import load_helper


@pytest.fixture()
def helper():
    return load_helper("trainvm_helper_secrets")


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
