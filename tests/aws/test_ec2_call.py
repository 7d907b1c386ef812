"""The helper's own EC2 call (templates/files/trainvm_helper.py ``ec2 stop|terminate``, what trainvm-lifecycle runs
on AWS for lifecycle.on_idle / on_max_run: AWS's images have no AWS CLI). Its SigV4 signature equals botocore's
for the same EC2 Query request, and the call, made by the helper's own code over HTTP, stops / terminates an
instance of moto's server.

What moto does not check: signatures (it accepts any Authorization header; the botocore comparison checks
ours) and IAM (the instance profile's policy is not evaluated: a call the policy refuses succeeds here;
tests/aws/test_request.py checks the policy). The instance metadata service is answered in-process (urlopen
for 169.254.169.254 only; every other request goes out for real): token expiry and the hop limit are not
modelled. The test gives ``api_aws`` the emulator's URL as its EC2 endpoint (a parameter only tests pass: the VM's
``trainvm_helper.py ec2 stop|terminate`` always calls ec2.REGION.amazonaws.com)."""

from __future__ import annotations

import datetime
import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.helpers import REPO, load_helper

IMDS = "http://169.254.169.254/latest/"
KEYS = {"AccessKeyId": "ASIAROLEEXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Token": "role-session"}
FORM = "application/x-www-form-urlencoded; charset=utf-8"


@pytest.fixture()
def helper():
    return load_helper("trainvm_helper_ec2")


def botocore_authorization(keys, region, url, body, now):
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    req = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": FORM})
    orig = botocore.auth.get_current_datetime
    botocore.auth.get_current_datetime = lambda: datetime.datetime(*now[:6])
    try:
        botocore.auth.SigV4Auth(Credentials(keys["AccessKeyId"], keys["SecretAccessKey"], keys.get("Token")), "ec2", region).add_auth(req)
    finally:
        botocore.auth.get_current_datetime = orig
    return req.headers["Authorization"]


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEBYaDstub-session-token"])
def test_ec2_query_signature_matches_botocore(helper, token):
    keys = {k: v for k, v in KEYS.items() if k != "Token"} | ({"Token": token} if token else {})
    now = time.gmtime(1764090000)
    body = b"Action=TerminateInstances&InstanceId.1=i-0123456789abcdef0&Version=2016-11-15"
    ours = helper.aws_sigv4(keys, "eu-west-1", "ec2", "ec2.eu-west-1.amazonaws.com", {"content-type": FORM}, body, now)
    assert ours["authorization"] == botocore_authorization(keys, "eu-west-1", "https://ec2.eu-west-1.amazonaws.com/", body, now)
    assert ours.get("x-amz-security-token") == token


@pytest.fixture()
def vm(aws, helper, monkeypatch):
    """A running moto instance, the helper's EC2 endpoint on the emulator (through its fault proxy) and an
    IMDSv2 that answers for that instance; returns (instance id, the EC2 requests the helper sent, the metadata,
    the emulator's URL as the EC2 endpoint)."""
    ec2 = aws.client("ec2", direct=True)
    [inst] = ec2.run_instances(ImageId=aws.amis[("us-east-1", "ubuntu-22.04")], InstanceType="g4dn.xlarge",
                               MinCount=1, MaxCount=1)["Instances"]
    meta = {"placement/region": "us-east-1", "instance-id": inst["InstanceId"],
            "iam/security-credentials/": "trainvm-vm", "iam/security-credentials/trainvm-vm": json.dumps(KEYS)}
    real, sent = urllib.request.urlopen, []

    def urlopen(req, timeout=None):
        if not req.full_url.startswith(IMDS):
            sent.append(req)
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
    monkeypatch.setattr(helper.time, "sleep", lambda s: None)
    return inst["InstanceId"], sent, meta, aws.url + "/"


@pytest.mark.parametrize("verb, state", [("stop", "stopped"), ("terminate", "terminated")])
def test_the_helper_stops_or_terminates_its_instance(aws, helper, vm, capsys, verb, state):
    instance, sent, _, ec2 = vm
    assert helper.api_aws(verb, ec2) == 0
    assert aws.instance_states("us-east-1", {instance}) == {instance: state}
    [req] = sent
    form = dict(urllib.parse.parse_qsl(req.data.decode()))
    assert form == {"Action": verb.title() + "Instances", "InstanceId.1": instance, "Version": "2016-11-15"}
    assert req.get_header("X-amz-security-token") == "role-session" and req.get_header("Authorization").startswith(
        f"AWS4-HMAC-SHA256 Credential={KEYS['AccessKeyId']}/")
    assert f"EC2 {verb.title()}Instances: " in capsys.readouterr().out


def test_an_ec2_error_is_a_failure_with_its_code_and_is_not_retried(aws, helper, vm, capsys):
    instance, sent, meta, ec2 = vm
    aws.faults.fail("StopInstances", "UnauthorizedOperation", message="You are not authorized to perform this operation.")
    assert helper.api_aws("stop", ec2) == 1
    assert len(sent) == 1 and aws.instance_states("us-east-1", {instance}) == {instance: "running"}
    assert "EC2 StopInstances failed: 403 UnauthorizedOperation You are not authorized" in capsys.readouterr().err
    aws.faults.clear()
    meta["instance-id"] = "i-0000000000000000f"  # moto's own error answer: an instance that is not there
    assert helper.api_aws("terminate", ec2) == 1
    assert "InvalidInstanceID.NotFound" in capsys.readouterr().err


def test_throttling_is_tried_again_a_bounded_number_of_times(aws, helper, vm, capsys):
    instance, sent, _, ec2 = vm
    aws.faults.fail("StopInstances", "RequestLimitExceeded", times=1)
    assert helper.api_aws("stop", ec2) == 0 and len(sent) == 2
    assert aws.instance_states("us-east-1", {instance}) == {instance: "stopped"}
    sent.clear()
    aws.faults.fail("TerminateInstances", "RequestLimitExceeded")  # always
    assert helper.api_aws("terminate", ec2) == 1 and len(sent) == 3
    assert "503 RequestLimitExceeded" in capsys.readouterr().err
    assert aws.instance_states("us-east-1", {instance}) == {instance: "stopped"}


def test_no_instance_profile_fails_at_once(aws, helper, vm, capsys):
    """Without an instance profile IMDS has no security-credentials (404): nothing to sign with."""
    instance, sent, meta, ec2 = vm
    meta.pop("iam/security-credentials/")
    assert helper.api_aws("stop", ec2) == 1 and sent == []
    assert "EC2 StopInstances failed" in capsys.readouterr().err


LIFECYCLE = REPO / "templates/files/trainvm-lifecycle-aws.sh"


def boto3_call(aws, region, instance, verb):
    """trainvm-lifecycle's other path: the Python program it gives the s3 copy tool's venv (boto3 from the pinned
    lock), taken from the script as written, run with this venv's boto3 against moto's server (AWS_ENDPOINT_URL,
    which the VM never sets) with the region and instance id the script reads from IMDSv2. Not modelled here:
    boto3's credential lookup through IMDS (static test keys instead) and IAM (moto does not evaluate policies)."""
    import os
    import re
    import subprocess
    import sys

    [program] = re.findall(r'"\$sdk" -c \'(.*?)\' "\$\(get placement/region\)"', LIFECYCLE.read_text(), re.S)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {
        "AWS_ENDPOINT_URL": aws.url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_MAX_ATTEMPTS": "2"}
    return subprocess.run([sys.executable, "-c", program, region, instance, verb], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("verb, state", [("stop", "stopped"), ("terminate", "terminated")])
def test_the_lifecycle_boto3_call_stops_or_terminates_its_instance(aws, vm, verb, state):
    instance, _, _, _ = vm
    r = boto3_call(aws, "us-east-1", instance, verb)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"EC2 {verb.title()}Instances: ")
    assert aws.instance_states("us-east-1", {instance}) == {instance: state}


def test_the_lifecycle_boto3_call_fails_on_an_ec2_error(aws, vm):
    instance, _, _, _ = vm
    aws.faults.fail("TerminateInstances", "UnauthorizedOperation", message="You are not authorized to perform this operation.")
    r = boto3_call(aws, "us-east-1", instance, "terminate")
    assert r.returncode != 0 and "UnauthorizedOperation" in r.stderr
    assert aws.instance_states("us-east-1", {instance}) == {instance: "running"}
    aws.faults.clear()
    r = boto3_call(aws, "us-east-1", "i-0000000000000000f", "stop")
    assert r.returncode != 0 and "InvalidInstanceID" in r.stderr
