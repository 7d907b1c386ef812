"""Every AWS API call of the VM (templates/files/trainvm_helper.py ``AWS_PROGRAM``: ``ec2 stop|terminate``, what
trainvm-lifecycle runs on AWS for a mixed lifecycle, and ``secret_aws``, the ``secret://aws/`` reader): the helper's
own boto3 program, as written in the helper, run by a real boto3 (this test environment's, standing in for the s3
tool's hash-locked venv) against moto's server with its SigV4 signature and IAM checks on (``moto_auth``). The
credentials reach boto3 only through botocore's own instance-metadata provider: a real IMDSv2 server on loopback
(``AWS_EC2_METADATA_SERVICE_ENDPOINT``, the SDK's own setting) serves a role's temporary credentials from moto's
STS; static keys in the environment are ignored (the program keeps only the ``iam-role`` provider).

What moto does not check: condition keys of the policy (``aws:ResourceTag/Name``, ``ec2:InstanceProfile``: the
role here may stop/terminate any instance; tests/aws/test_request.py checks the policy). The helper's own metadata
reads (region, instance id) are answered in-process (urlopen for 169.254.169.254 only) from the same table. The
endpoints are moto's (``AWS_ENDPOINT_URL_EC2``: its fault proxy; ``AWS_ENDPOINT_URL_SECRETS_MANAGER``), which the
VM never sets."""

from __future__ import annotations

import io
import json
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.aws.conftest import role_credentials
from tests.helpers import load_helper

IMDS = "http://169.254.169.254/latest/"
EC2_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["ec2:StopInstances", "ec2:TerminateInstances"], "Resource": "*"}]}


@pytest.fixture()
def helper():
    return load_helper("trainvm_helper_ec2")


@pytest.fixture()
def imds():
    """An IMDSv2 on loopback (token PUT, then GETs with the token; 404 for anything not in ``meta``), as botocore's
    instance-metadata provider reads it. Yields (the metadata table, the requests it answered)."""
    meta: dict[str, str] = {}
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, code, body=b""):
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self):  # noqa: N802
            seen.append("PUT " + self.path)
            ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            self.answer(200 if ok else 400, b"imds-token" if ok else b"")

        def do_GET(self):  # noqa: N802
            seen.append("GET " + self.path)
            if self.headers.get("X-aws-ec2-metadata-token") != "imds-token":
                return self.answer(401)  # IMDSv2 only
            path = self.path[len("/latest/meta-data/"):] if self.path.startswith("/latest/meta-data/") else None
            self.answer(200, meta[path].encode()) if path in meta else self.answer(404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.meta, server.seen = meta, seen  # type: ignore[attr-defined]
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture()
def vm(aws, helper, moto_auth, imds, monkeypatch):
    """A running moto instance, an IMDSv2 that answers for it with a role's credentials (for boto3 over HTTP, for
    the helper's region / instance-id reads in-process), boto3 pointed at moto; moto's auth on. Returns (instance
    id, the metadata)."""
    ec2 = aws.client("ec2", direct=True)
    [inst] = ec2.run_instances(ImageId=aws.amis[("us-east-1", "ubuntu-22.04")], InstanceType="g4dn.xlarge",
                               MinCount=1, MaxCount=1)["Instances"]
    keys = role_credentials(aws, "trainvm-vm", EC2_POLICY)
    meta = imds.meta
    meta.update({"placement/region": "us-east-1", "instance-id": inst["InstanceId"],
                 "iam/security-credentials/": "trainvm-vm", "iam/security-credentials/trainvm-vm": json.dumps(keys)})
    real = urllib.request.urlopen

    def urlopen(req, timeout=None):
        if not req.full_url.startswith(IMDS):
            return real(req, timeout=timeout)
        if req.full_url == IMDS + "api/token":
            assert req.get_method() == "PUT"
            return io.BytesIO(b"imds-token")
        assert req.get_header("X-aws-ec2-metadata-token") == "imds-token"  # IMDSv2 only
        path = req.full_url[len(IMDS + "meta-data/"):]
        if path not in meta:
            raise urllib.error.HTTPError(req.full_url, 404, "Not Found", {}, io.BytesIO(b""))
        return io.BytesIO(meta[path].encode())

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(helper, "AWS_SDK", sys.executable)  # the real boto3 (the VM: the s3 tool's venv)
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{imds.server_address[1]}/")
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", aws.url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", aws.moto_url)
    # static keys boto3 would take first in its default chain: the program must ignore them
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASTATICKEYNOTUSED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "static-secret-not-used")
    moto_auth.on()
    return inst["InstanceId"], meta


def role_keys(meta):
    return json.loads(meta["iam/security-credentials/trainvm-vm"])


@pytest.mark.parametrize("verb, state", [("stop", "stopped"), ("terminate", "terminated")])
def test_the_helper_stops_or_terminates_its_instance(aws, helper, vm, imds, capsys, verb, state, monkeypatch):
    instance, meta = vm
    argv = []
    real_run = helper.subprocess.run
    monkeypatch.setattr(helper.subprocess, "run", lambda a, **kw: argv.append(a) or real_run(a, **kw))
    assert helper.api_aws(verb) == 0
    assert aws.instance_states("us-east-1", {instance}) == {instance: state}
    [req] = aws.faults.calls(verb.title() + "Instances")
    assert req.params == {"Action": verb.title() + "Instances", "InstanceId.1": instance, "Version": "2016-11-15"}
    assert f"EC2 {verb.title()}Instances: " in capsys.readouterr().out
    [call] = argv  # the SDK's python with the helper's program; no key in its arguments
    assert call[:3] == [sys.executable, "-c", helper.AWS_PROGRAM]
    keys = role_keys(meta)
    assert not any(keys["SecretAccessKey"] in a or keys["Token"] in a for a in call)
    assert "PUT /latest/api/token" in imds.seen and "GET /latest/meta-data/iam/security-credentials/trainvm-vm" in imds.seen


def test_a_wrong_secret_key_is_refused_by_moto(aws, helper, vm, capsys):
    """The check the other tests rely on: moto verifies the signature (EC2's AuthFailure), nothing is stopped."""
    instance, meta = vm
    meta["iam/security-credentials/trainvm-vm"] = json.dumps({**role_keys(meta), "SecretAccessKey": "x" * 40})
    assert helper.api_aws("stop") == 1
    assert "EC2 StopInstances failed: 401 AuthFailure" in capsys.readouterr().err
    assert aws.instance_states("us-east-1", {instance}) == {instance: "running"}


def test_an_ec2_error_is_a_failure_with_its_code_and_is_not_retried(aws, helper, vm, capsys):
    instance, meta = vm
    aws.faults.fail("StopInstances", "UnauthorizedOperation", message="You are not authorized to perform this operation.")
    assert helper.api_aws("stop") == 1
    assert len(aws.faults.calls("StopInstances")) == 1 and aws.instance_states("us-east-1", {instance}) == {instance: "running"}
    assert "EC2 StopInstances failed: 403 UnauthorizedOperation You are not authorized" in capsys.readouterr().err
    aws.faults.clear()
    meta["instance-id"] = "i-0000000000000000f"  # moto's own error answer: an instance that is not there
    assert helper.api_aws("terminate") == 1
    assert "InvalidInstanceID.NotFound" in capsys.readouterr().err


def test_throttling_is_tried_again_a_bounded_number_of_times(aws, helper, vm, capsys):
    """boto3's own retries (standard mode, 3 attempts): throttling once, then success; throttling always, 3 calls."""
    instance, _ = vm
    aws.faults.fail("StopInstances", "RequestLimitExceeded", times=1)
    assert helper.api_aws("stop") == 0 and len(aws.faults.calls("StopInstances")) == 2
    assert aws.instance_states("us-east-1", {instance}) == {instance: "stopped"}
    aws.faults.fail("TerminateInstances", "RequestLimitExceeded")  # always
    assert helper.api_aws("terminate") == 1 and len(aws.faults.calls("TerminateInstances")) == 3
    assert "503 RequestLimitExceeded" in capsys.readouterr().err
    assert aws.instance_states("us-east-1", {instance}) == {instance: "stopped"}


def test_no_instance_profile_fails_at_once(aws, helper, vm, capsys):
    """Without an instance profile IMDS has no security-credentials (404): no credentials, no call (the static keys
    in the environment are not used)."""
    _, meta = vm
    meta.pop("iam/security-credentials/")
    assert helper.api_aws("stop") == 1 and aws.faults.calls("StopInstances") == []
    assert "EC2 StopInstances failed: no instance profile credentials" in capsys.readouterr().err


def test_an_unreachable_ec2_is_a_failure(aws, helper, vm, capsys, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", f"http://127.0.0.1:{s.getsockname()[1]}/")
    assert helper.api_aws("stop") == 1
    assert "EC2 StopInstances failed: EndpointConnectionError" in capsys.readouterr().err


def test_a_missing_sdk_venv_is_a_clear_failure(aws, helper, vm, capsys, monkeypatch):
    monkeypatch.setattr(helper, "AWS_SDK", "/nonexistent/opt/trainvm/datatools/s3/bin/python")
    assert helper.api_aws("terminate") == 1 and aws.faults.calls("TerminateInstances") == []
    assert "is not installed on this VM" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="GetSecretValue failed: the AWS SDK .* is not installed"):
        helper.secret_aws("hf/token")


def test_the_secret_reader_gets_a_secret_with_the_instance_profile(aws, helper, vm, moto_auth):
    """``secret_aws`` (secret://aws/NAME) through the helper's boto3 program to moto's Secrets Manager with auth on;
    a wrong secret key is refused, a missing secret is its error code. moto checks Secrets Manager actions against
    the resource "*" only (no resource-level scoping: the builder's ``...:secret:NAME-??????`` ARN is never matched,
    and IAM's ``?`` wildcard makes its matcher fail), so the role here may read every secret;
    tests/aws/test_request.py checks the builder's statement."""
    _, meta = vm
    moto_auth.off()
    aws.client("secretsmanager", direct=True).create_secret(Name="hf/token", SecretString="hf_abc")
    keys = role_credentials(aws, "trainvm-sm", {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": "*"}]})
    meta["iam/security-credentials/trainvm-vm"] = json.dumps(keys)
    moto_auth.on()
    assert helper.secret_aws("hf/token") == "hf_abc"
    with pytest.raises(RuntimeError, match=r"^Secrets Manager answered 40\d ResourceNotFoundException$"):
        helper.secret_aws("hf/missing")
    meta["iam/security-credentials/trainvm-vm"] = json.dumps({**keys, "SecretAccessKey": "x" * 40})
    with pytest.raises(RuntimeError, match=r"^Secrets Manager answered 403 (SignatureDoesNotMatch|InvalidSignatureException)$"):
        helper.secret_aws("hf/token")



def test_a_secret_named_by_its_arn_is_read_in_its_own_region(aws, helper, vm, moto_auth):
    """secret://aws/ARN: the helper asks the ARN's region (us-west-2), not the VM's (the metadata's us-east-1),
    where a secret of that name does not exist."""
    _, meta = vm
    moto_auth.off()
    arn = aws.client("secretsmanager", "us-west-2", direct=True).create_secret(Name="hf/token", SecretString="west")["ARN"]
    keys = role_credentials(aws, "trainvm-sm2", {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": "*"}]})
    meta["iam/security-credentials/trainvm-vm"] = json.dumps(keys)
    assert meta["placement/region"] != "us-west-2"
    assert helper.secret_aws(arn) == "west"
    with pytest.raises(RuntimeError, match="ResourceNotFoundException"):
        helper.secret_aws("hf/token")  # by name: the VM's region, where it does not exist
