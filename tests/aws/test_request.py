"""The pure AWS request builder against the EC2/IAM limits as documented. moto accepts requests that EC2 refuses
(an st1 boot volume, a 78-character ClientToken, io2 without Iops in older versions), so these limits are
asserted here, on the builder's output, not left to the emulator."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from provisioner.providers.access import secret_region
from provisioner.providers.aws import request as R
from provisioner.providers.base import InvalidRequestError, SecretRef
from provisioner.providers.store import PayloadRef, payload_key
from tests.aws.conftest import t4_offers, t4_spec
from tests.helpers import REPO

UBUNTU = R.Ami("ami-0123456789abcdef0", "/dev/sda1")
DEBIAN = R.Ami("ami-0fedcba9876543210", "/dev/xvda")


@pytest.fixture(scope="module")
def offer():
    return t4_offers()[0]


@pytest.fixture(scope="module")
def spec(offer):
    return t4_spec(offer)


def raw(spec) -> bytes:
    return spec.user_data if isinstance(spec.user_data, bytes) else spec.user_data.encode()


def params(spec, offer, ami=UBUNTU, **kw):
    return R.run_instances_params(spec, offer, ami, "us-east-1b", security_group_id="sg-1", instance_profile=None, **kw)


def test_importing_the_builder_imports_no_sdk() -> None:
    code = ("import sys\nimport provisioner.providers.aws.request, provisioner.providers.aws.errors\n"
            "print(','.join(m for m in sys.modules if m.startswith(('boto3', 'botocore', 'moto'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip() == ""


@pytest.mark.parametrize("name", ["t", "trainvm-" + "x" * 55, "a" * 63])
def test_client_token_at_most_64_characters_and_stable(spec, offer, name) -> None:
    s = replace(spec, name=name)
    token = R.client_token(s, "use1-az1")
    assert len(token) <= R.CLIENT_TOKEN_MAX == 64 and token.isascii()
    assert token == R.client_token(s, "use1-az1")  # a re-sent request is the same request
    assert token != R.client_token(s, "use1-az2")  # another AZ is another request
    assert token != R.client_token(replace(s, profile_hash="f" * 64), "use1-az1")
    body = params(s, offer)
    assert len(body["ClientToken"]) <= 64 and body["ClientToken"] == params(s, offer)["ClientToken"]
    assert body["ClientToken"] == R.request_token(s, str(offer.zone), body)
    # any other parameter is another request (EC2 refuses a known token with others: IdempotentParameterMismatch),
    # e.g. the security group made again after `down`
    other = R.run_instances_params(s, offer, UBUNTU, "us-east-1b", security_group_id="sg-2", instance_profile=None)
    assert other["ClientToken"] != body["ClientToken"]


def test_client_token_does_not_depend_on_the_presigned_url_or_the_owner(spec, offer) -> None:
    """Issue 36 item 4: two `up`s of one profile send one token though each presigns its own payload URL (the user
    data differ) and another user's `up` tags another owner; the payload the user data fetch is part of it."""
    ref = PayloadRef(cloud="aws", region="us-east-1", store="trainvm-123456789012-us-east-1", key=payload_key("a" * 64),
                     url="https://trainvm-123456789012-us-east-1.s3.us-east-1.amazonaws.com/payloads/a.tar.gz",
                     sha256="a" * 64, size=10)
    one = replace(spec, payload=replace(ref, signed_url="https://x/?X-Amz-Date=20261122T120000Z&X-Amz-Signature=1"),
                  user_data="#!/bin/bash\nTV_SIGNED_URL='https://x/?X-Amz-Date=20261122T120000Z&X-Amz-Signature=1'\n")
    two = replace(one, payload=replace(ref, signed_url="https://x/?X-Amz-Date=20261122T120001Z&X-Amz-Signature=2"),
                  user_data="#!/bin/bash\nTV_SIGNED_URL='https://x/?X-Amz-Date=20261122T120001Z&X-Amz-Signature=2'\n",
                  labels={**spec.labels, "trainvm-owner": "someone-else"})
    a, b = params(one, offer), params(two, offer)
    assert a["UserData"] != b["UserData"] and a["TagSpecifications"] != b["TagSpecifications"]
    assert a["ClientToken"] == b["ClientToken"]  # before: two tokens, two instances
    other_payload = replace(one, payload=replace(one.payload, sha256="b" * 64, key=payload_key("b" * 64)))
    assert params(other_payload, offer)["ClientToken"] != a["ClientToken"]  # another payload: another VM


@pytest.mark.parametrize("disk_type", ["standard", "balanced", "ssd"])
@pytest.mark.parametrize("size", [1, 8, 30, 200, 4000, 16_384])
def test_boot_volume_is_gp3_within_its_documented_limits(spec, offer, disk_type, size) -> None:
    ebs = params(replace(spec, boot_disk_type=disk_type, boot_disk_gib=size), offer)["BlockDeviceMappings"][0]["Ebs"]
    assert ebs["VolumeType"] == "gp3"  # st1/sc1 cannot be boot volumes; io1/io2 require Iops
    assert ebs["VolumeSize"] == size and ebs["DeleteOnTermination"] is True
    iops, tput = ebs.get("Iops"), ebs.get("Throughput")
    if disk_type != "ssd":
        assert iops is None and tput is None  # the gp3 baseline (3,000 IOPS, 125 MiB/s) is included in the price
        return
    assert 3_000 <= iops <= 16_000 and iops <= max(3_000, 500 * size)  # gp3: 500 IOPS per GiB, 16,000 at most
    assert 125 <= tput <= 1_000 and tput <= iops * 0.25  # gp3: 0.25 MiB/s per IOPS, 1,000 MiB/s at most
    if size >= 32:
        assert iops == 16_000 and tput == 1_000


@pytest.mark.parametrize("size", [0, 16_385])
def test_boot_volume_size_outside_gp3_is_refused(spec, offer, size) -> None:
    with pytest.raises(InvalidRequestError, match="gp3"):
        params(replace(spec, boot_disk_gib=size), offer)


@pytest.mark.parametrize("ami", [UBUNTU, DEBIAN])
def test_root_device_name_comes_from_the_ami(spec, offer, ami) -> None:
    body = params(spec, offer, ami)
    assert body["ImageId"] == ami.image_id
    assert [m["DeviceName"] for m in body["BlockDeviceMappings"]] == [ami.root_device_name]


def test_imdsv2_tags_placement_and_security_group(spec, offer) -> None:
    body = params(spec, offer, key_name=spec.name)
    assert body["MetadataOptions"]["HttpTokens"] == "required" and body["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    assert body["Placement"] == {"AvailabilityZone": "us-east-1b"} and body["SecurityGroupIds"] == ["sg-1"]
    assert body["MinCount"] == body["MaxCount"] == 1 and body["KeyName"] == spec.name
    specs = {t["ResourceType"]: t["Tags"] for t in body["TagSpecifications"]}
    assert set(specs) == {"instance", "volume"}
    for tags in specs.values():
        assert len(tags) <= 50 and len({t["Key"] for t in tags}) == len(tags)
        assert all(len(t["Key"]) <= 128 and len(t["Value"]) <= 256 and not t["Key"].lower().startswith("aws:") for t in tags)
        kv = {t["Key"]: t["Value"] for t in tags}
        assert kv["trainvm-managed"] == "true" and kv["Name"] == spec.name and kv["trainvm-image"] == UBUNTU.image_id
    assert R.profile_from_tags({t["Key"]: t["Value"] for t in specs["instance"]}) == json.loads(spec.profile_json)
    assert body["UserData"] == raw(spec) and len(body["UserData"]) <= 16_384
    assert "IamInstanceProfile" not in body


def test_a_profile_too_large_for_the_tags_is_refused(spec, offer) -> None:
    import hashlib

    big = json.dumps({"pad": "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(600))})  # 38 KB, incompressible
    with pytest.raises(InvalidRequestError, match="allows 50 per instance"):
        params(replace(spec, profile_json=big), offer)


@pytest.mark.parametrize("idle, hours, on_idle, on_max_run, behavior", [
    (60, None, "stop", "delete", "stop"), (60, None, "delete", "stop", "terminate"),   # only idle in use
    (None, 24, "delete", "stop", "stop"), (None, 24, "stop", "delete", "terminate"),   # only max-run in use
    (60, 24, "delete", "delete", "terminate"), (60, 24, "stop", "stop", "stop"),
    (60, 24, "delete", "stop", "stop"), (60, 24, "stop", "delete", "stop"),            # mixed: never terminate
    (None, None, "delete", "delete", "stop"),
])
def test_shutdown_behavior_terminates_only_when_every_action_in_use_deletes(spec, offer, idle, hours, on_idle, on_max_run,
                                                                              behavior) -> None:
    """A guest shutdown is the fallback of both the idle watchdog and the max-run timer (when the helper's
    StopInstances/TerminateInstances call fails): it must end compute billing for either action and never
    delete what one of them meant to stop."""
    s = replace(spec, on_idle=on_idle, on_max_run=on_max_run, idle_shutdown_minutes=idle, max_run_hours=hours)
    assert params(s, offer)["InstanceInitiatedShutdownBehavior"] == behavior


def test_spot_is_one_time_and_terminates(spec, offer) -> None:
    assert "InstanceMarketOptions" not in params(spec, offer)
    market = params(replace(spec, spot=True, max_price_per_hour=0.5), offer)["InstanceMarketOptions"]
    assert market == {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time",
                                                            "InstanceInterruptionBehavior": "terminate", "MaxPrice": "0.5000"}}


def test_ssh_only_from_ssh_from() -> None:
    assert R.ssh_ingress(None) == []
    assert R.ssh_ingress("203.0.113.7/32") == [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                                                "IpRanges": [{"CidrIp": "203.0.113.7/32", "Description": "trainvm placement.ssh_from"}]}]
    assert R.ssh_ingress("2001:db8::/64")[0]["Ipv6Ranges"][0]["CidrIpv6"] == "2001:db8::/64"


def test_instance_profile_policy_is_least_privilege(spec) -> None:
    none = replace(spec, data_sources=("gs://b/x/",), idle_shutdown_minutes=None, max_run_hours=None, profile_json="{}")
    assert R.role_policy(none, "us-east-1") is None  # nothing to call: no instance profile at all
    s = replace(none, data_sources=("s3://corpus-bucket/glue/", "https://example.com/x", "s3://other"),
                secret_refs=(SecretRef("aws", "hf/token"),), max_run_hours=4.0,
                on_max_run="delete", idle_shutdown_minutes=30, on_idle="stop")
    st = R.role_policy(s, "eu-west-1")["Statement"]
    actions = sorted(a for x in st for a in ([x["Action"]] if isinstance(x["Action"], str) else x["Action"]))
    assert actions == ["ec2:TerminateInstances", "s3:GetObject", "s3:ListBucket", "s3:ListBucket",  # the stop is a guest shutdown
                       "secretsmanager:GetSecretValue"]
    get = next(x for x in st if x["Action"] == "s3:GetObject")
    assert get["Resource"] == ["arn:aws:s3:::corpus-bucket/glue/*", "arn:aws:s3:::other/*"]
    assert all("*" != x["Resource"] for x in st)  # never every resource
    secret = next(x for x in st if x["Action"] == "secretsmanager:GetSecretValue")
    assert secret["Resource"] == ["arn:aws:secretsmanager:eu-west-1:*:secret:hf/token-??????"]
    ec2 = next(x for x in st if "ec2:TerminateInstances" in x["Action"])
    assert ec2["Condition"] == {"StringEquals": {"aws:ResourceTag/Name": spec.name},
                                "ArnLike": {"ec2:InstanceProfile": f"arn:aws:iam::*:instance-profile/{spec.name}"}}


@pytest.mark.parametrize("idle, on_idle, hours, on_max_run, calls", [
    (30, "stop", None, "delete", None),  # only idle in use: the guest shutdown is set to stop, which is the action
    (30, "delete", None, "stop", None),  # ... set to terminate
    (None, "stop", 4.0, "delete", None),
    (30, "delete", 4.0, "delete", None),
    (30, "stop", 4.0, "stop", None),
    (30, "delete", 4.0, "stop", ["ec2:TerminateInstances"]),  # mixed: the shutdown stops, the delete calls EC2
    (30, "stop", 4.0, "delete", ["ec2:TerminateInstances"]),
    (None, "delete", None, "delete", None),
])
def test_the_lifecycle_statement_allows_only_the_calls_the_vm_makes(spec, idle, on_idle, hours, on_max_run, calls) -> None:
    """trainvm-lifecycle calls EC2 (the helper's `ec2 terminate`) only for an action that the guest shutdown, set at
    create to the one action in use or else to stop, does not do: the delete of a mixed setting. The policy allows
    that call only, and it is valid IAM (moto's policy validator, the one IAM PutRolePolicy runs in the emulator;
    it does not evaluate conditions)."""
    from moto.iam.policy_validation import IAMPolicyDocumentValidator

    s = replace(spec, data_sources=(), profile_json="{}", idle_shutdown_minutes=idle, on_idle=on_idle,
                max_run_hours=hours, on_max_run=on_max_run)
    policy = R.role_policy(s, "us-east-1")
    assert (policy and [st["Action"] for st in policy["Statement"]]) == (calls and [calls])
    if policy:
        IAMPolicyDocumentValidator(json.dumps(policy)).validate()
        [st] = policy["Statement"]
        assert st["Resource"] == "arn:aws:ec2:us-east-1:*:instance/*" and set(st["Condition"]) == {"StringEquals", "ArnLike"}


def test_moto_policy_validator_refuses_a_broken_policy() -> None:
    """The check above can fail: a condition operator IAM does not know is refused."""
    from moto.iam.policy_validation import IAMPolicyDocumentValidator

    bad = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:StopInstances", "Resource": "*",
                                                   "Condition": {"ArnMatches": {"ec2:InstanceProfile": "x"}}}]}
    with pytest.raises(Exception, match="Syntax errors"):
        IAMPolicyDocumentValidator(json.dumps(bad)).validate()


def test_preview_is_the_wire_body(spec, offer) -> None:
    doc = R.request_preview(replace(spec, ssh_from="198.51.100.0/24"), offer)
    body = doc["RunInstances"]
    assert base64.b64decode(body["UserData"]) == raw(spec)
    assert body["ImageId"] == f"resolve:ssm:{R.AMI_PARAMETERS[spec.os]}"
    assert body["Placement"] == {"AvailabilityZoneId": offer.zone}
    assert body["BlockDeviceMappings"][0]["DeviceName"] == R.PREVIEW_ROOT_DEVICE[spec.os]
    assert doc["CreateSecurityGroup"]["IpPermissions"][0]["IpRanges"][0]["CidrIp"] == "198.51.100.0/24"
    assert "IamInstanceProfile" not in body  # the example's timers both stop: a guest shutdown, no AWS API call
    json.dumps(doc)  # render writes it as JSON


def test_aws_is_provisionable_and_a_default_cloud() -> None:
    """The registry gives AWS a provider and plans it for a profile without placement.clouds (whose hash does
    not change: tests/profile/test_hash_stability.py); a profile naming gcp+azure leaves it out."""
    import datetime

    from provisioner.catalog.storage import load_catalog
    from provisioner.hooks import aws as aws_hooks
    from provisioner.hooks.providers import real_factories
    from provisioner.planner.core import plan
    from provisioner.planner.request import PlanRequest
    from provisioner.providers.registry import default_clouds, provisionable

    assert provisionable("aws") and real_factories()["aws"] is aws_hooks.provider  # the registry's AWS provider hook
    assert "aws" in default_clouds()
    day = datetime.date(2026, 11, 22)
    without = plan(PlanRequest(gpu_names={"A10G"}, clouds=("gcp", "azure")), load_catalog(), day)
    assert without.chosen is None and set(without.rejected["aws"]) == {"cloud"}
    unnamed = plan(PlanRequest(gpu_names={"A10G"}), load_catalog(), day)
    assert unnamed.chosen is not None and unnamed.chosen.cloud == "aws" and unnamed.chosen.instance_type.startswith("g5.")


def test_plan_says_what_a_mixed_lifecycle_does_on_aws() -> None:
    """`plan`/`up` lines (lifecycle.summary_lines): a mixed stop/delete on AWS is a guest shutdown for the stop and
    the VM's own EC2 call for the delete, with the stop fallback; a uniform setting needs no such line."""
    from types import SimpleNamespace

    from provisioner.providers.lifecycle import summary_lines

    mixed = SimpleNamespace(idle_shutdown_minutes=60, on_idle="delete", max_run_hours=24, on_max_run="stop")
    [line] = [ln for ln in summary_lines(mixed, "aws") if ln.startswith("mixed stop/delete on aws")]
    assert "the `delete` the VM's own API call" in line and "should that call fail" in line and "CLI" not in line
    uniform = SimpleNamespace(idle_shutdown_minutes=60, on_idle="delete", max_run_hours=24, on_max_run="delete")
    assert not [ln for ln in summary_lines(uniform, "aws") if ln.startswith("mixed")]
    assert not [ln for ln in summary_lines(mixed, "azure") if ln.startswith("mixed")]  # Azure calls ARM for both


def test_a_secret_named_by_its_arn_is_allowed_in_its_own_region_and_account(spec) -> None:
    arn = "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf/token"
    s = replace(spec, data_sources=(), idle_shutdown_minutes=None, max_run_hours=None,
                secret_refs=(SecretRef.parse(f"secret://aws/{arn}"), SecretRef.parse("secret://aws/b")))
    [secret] = [x for x in R.role_policy(s, "eu-west-1")["Statement"] if x["Action"] == "secretsmanager:GetSecretValue"]
    assert secret["Resource"] == [arn, f"{arn}-??????", "arn:aws:secretsmanager:eu-west-1:*:secret:b-??????"]
    assert secret_region(arn) == "us-west-2" and secret_region("hf/token") is None
