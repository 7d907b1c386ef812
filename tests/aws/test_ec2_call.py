"""The helper's own EC2 call (templates/files/trainvm_helper.py ``ec2 stop|terminate``, what trainvm-lifecycle runs
on AWS for lifecycle.on_idle / on_max_run: AWS's images have no AWS CLI), signed by curl's own ``--aws-sigv4``
(no signer of ours), made by the helper's own code, against moto's server with its SigV4 signature and IAM
checks on (``moto_auth``): the role's temporary credentials come from moto's STS, a wrong secret key is refused.

What moto does not check: condition keys of the policy (``aws:ResourceTag/Name``, ``ec2:InstanceProfile``: the
role here may stop/terminate any instance; tests/aws/test_request.py checks the policy), and whether every x-amz-*
header is signed (it recomputes the signature over the headers the request names). The instance metadata
service is answered in-process (urlopen for 169.254.169.254 only; every other request goes out for real): token
expiry and the hop limit are not modelled. The test gives ``api_aws`` the emulator's URL (its fault proxy, which
keeps the Host header curl signed) as its EC2 endpoint (a parameter only tests pass: the VM's
``trainvm_helper.py ec2 stop|terminate`` always calls ec2.REGION.amazonaws.com)."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request

import pytest

from tests.aws.conftest import role_credentials
from tests.helpers import REPO, load_helper

IMDS = "http://169.254.169.254/latest/"
EC2_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["ec2:StopInstances", "ec2:TerminateInstances"], "Resource": "*"}]}


@pytest.fixture()
def helper():
    return load_helper("trainvm_helper_ec2")


@pytest.fixture()
def vm(aws, helper, moto_auth, monkeypatch):
    """A running moto instance, the helper's EC2 endpoint on the emulator (through its fault proxy) and an
    IMDSv2 that answers for that instance with a role's credentials; moto's auth on. Returns (instance id, the
    metadata, the emulator's URL as the EC2 endpoint)."""
    ec2 = aws.client("ec2", direct=True)
    [inst] = ec2.run_instances(ImageId=aws.amis[("us-east-1", "ubuntu-22.04")], InstanceType="g4dn.xlarge",
                               MinCount=1, MaxCount=1)["Instances"]
    keys = role_credentials(aws, "trainvm-vm", EC2_POLICY)
    meta = {"placement/region": "us-east-1", "instance-id": inst["InstanceId"],
            "iam/security-credentials/": "trainvm-vm", "iam/security-credentials/trainvm-vm": json.dumps(keys)}
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
    monkeypatch.setattr(helper.time, "sleep", lambda s: None)
    moto_auth.on()
    return inst["InstanceId"], meta, aws.url + "/"


def role_keys(meta):
    return json.loads(meta["iam/security-credentials/trainvm-vm"])


@pytest.mark.parametrize("verb, state", [("stop", "stopped"), ("terminate", "terminated")])
def test_the_helper_stops_or_terminates_its_instance(aws, helper, vm, capsys, verb, state, monkeypatch):
    instance, meta, ec2 = vm
    argv = []
    real_run = helper.subprocess.run
    monkeypatch.setattr(helper.subprocess, "run", lambda a, **kw: argv.append(a) or real_run(a, **kw))
    assert helper.api_aws(verb, ec2) == 0
    assert aws.instance_states("us-east-1", {instance}) == {instance: state}
    [req] = aws.faults.calls(verb.title() + "Instances")
    assert req.params == {"Action": verb.title() + "Instances", "InstanceId.1": instance, "Version": "2016-11-15"}
    assert f"EC2 {verb.title()}Instances: " in capsys.readouterr().out
    [curl] = argv  # the secret key and the session token never in curl's arguments
    keys = role_keys(meta)
    assert "--aws-sigv4" in curl and not any(keys["SecretAccessKey"] in a or keys["Token"] in a for a in curl)


def test_a_wrong_secret_key_is_refused_by_moto(aws, helper, vm, capsys):
    """The check the other tests rely on: moto verifies the signature (EC2's AuthFailure), nothing is stopped."""
    instance, meta, ec2 = vm
    meta["iam/security-credentials/trainvm-vm"] = json.dumps({**role_keys(meta), "SecretAccessKey": "x" * 40})
    assert helper.api_aws("stop", ec2) == 1
    assert "EC2 StopInstances failed: 401 AuthFailure" in capsys.readouterr().err
    assert aws.instance_states("us-east-1", {instance}) == {instance: "running"}


def test_an_ec2_error_is_a_failure_with_its_code_and_is_not_retried(aws, helper, vm, capsys):
    instance, meta, ec2 = vm
    aws.faults.fail("StopInstances", "UnauthorizedOperation", message="You are not authorized to perform this operation.")
    assert helper.api_aws("stop", ec2) == 1
    assert len(aws.faults.calls("StopInstances")) == 1 and aws.instance_states("us-east-1", {instance}) == {instance: "running"}
    assert "EC2 StopInstances failed: 403 UnauthorizedOperation You are not authorized" in capsys.readouterr().err
    aws.faults.clear()
    meta["instance-id"] = "i-0000000000000000f"  # moto's own error answer: an instance that is not there
    assert helper.api_aws("terminate", ec2) == 1
    assert "InvalidInstanceID.NotFound" in capsys.readouterr().err


def test_throttling_is_tried_again_a_bounded_number_of_times(aws, helper, vm, capsys):
    instance, _, ec2 = vm
    aws.faults.fail("StopInstances", "RequestLimitExceeded", times=1)
    assert helper.api_aws("stop", ec2) == 0 and len(aws.faults.calls("StopInstances")) == 2
    assert aws.instance_states("us-east-1", {instance}) == {instance: "stopped"}
    aws.faults.fail("TerminateInstances", "RequestLimitExceeded")  # always
    assert helper.api_aws("terminate", ec2) == 1 and len(aws.faults.calls("TerminateInstances")) == 3
    assert "503 RequestLimitExceeded" in capsys.readouterr().err
    assert aws.instance_states("us-east-1", {instance}) == {instance: "stopped"}


def test_no_instance_profile_fails_at_once(aws, helper, vm, capsys):
    """Without an instance profile IMDS has no security-credentials (404): nothing to sign with."""
    instance, meta, ec2 = vm
    meta.pop("iam/security-credentials/")
    assert helper.api_aws("stop", ec2) == 1 and aws.faults.calls("StopInstances") == []
    assert "EC2 StopInstances failed" in capsys.readouterr().err


def test_an_unreachable_ec2_is_tried_three_times(aws, helper, vm, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/"
    assert helper.api_aws("stop", dead) == 1
    assert "EC2 StopInstances failed: curl exited with 7" in capsys.readouterr().err


def test_the_secret_reader_gets_a_secret_with_the_instance_profile(aws, helper, vm, moto_auth):
    """``secret_aws`` (secret://aws/NAME) through curl's --aws-sigv4 to moto's Secrets Manager with auth on; a
    wrong secret key is refused. moto checks Secrets Manager actions against the resource "*" only (no
    resource-level scoping: the builder's ``...:secret:NAME-??????`` ARN is never matched, and IAM's ``?``
    wildcard makes its matcher fail), so the role here may read every secret; tests/aws/test_request.py checks
    the builder's statement."""
    _, meta, _ = vm
    moto_auth.off()
    aws.client("secretsmanager", direct=True).create_secret(Name="hf/token", SecretString="hf_abc")
    keys = role_credentials(aws, "trainvm-sm", {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": "*"}]})
    meta["iam/security-credentials/trainvm-vm"] = json.dumps(keys)
    moto_auth.on()
    assert helper.secret_aws("hf/token", aws.moto_url + "/") == "hf_abc"
    meta["iam/security-credentials/trainvm-vm"] = json.dumps({**keys, "SecretAccessKey": "x" * 40})
    with pytest.raises(RuntimeError, match=r"Secrets Manager answered 403 SignatureDoesNotMatch$"):
        helper.secret_aws("hf/token", aws.moto_url + "/")


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
def test_the_lifecycle_boto3_call_stops_or_terminates_its_instance(aws, vm, moto_auth, verb, state):
    moto_auth.off()  # the program runs with static test keys (boto3's IMDS credential lookup is not modelled)
    instance, _, _ = vm
    r = boto3_call(aws, "us-east-1", instance, verb)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"EC2 {verb.title()}Instances: ")
    assert aws.instance_states("us-east-1", {instance}) == {instance: state}


def test_the_lifecycle_boto3_call_fails_on_an_ec2_error(aws, vm, moto_auth):
    moto_auth.off()
    instance, _, _ = vm
    aws.faults.fail("TerminateInstances", "UnauthorizedOperation", message="You are not authorized to perform this operation.")
    r = boto3_call(aws, "us-east-1", instance, "terminate")
    assert r.returncode != 0 and "UnauthorizedOperation" in r.stderr
    assert aws.instance_states("us-east-1", {instance}) == {instance: "running"}
    aws.faults.clear()
    r = boto3_call(aws, "us-east-1", "i-0000000000000000f", "stop")
    assert r.returncode != 0 and "InvalidInstanceID" in r.stderr
