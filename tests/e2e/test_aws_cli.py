"""The real CLI and boto3 against moto's server (behind the fault proxy) on loopback: up -> list -> status ->
verify -> stop -> start -> up again -> down, and a capacity failover. Nothing fakes the provider; only the VM's
console output (what its startup script would print) is planted."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

T4 = REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"
REPORT = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())
REPORT["packages"].update({"datasets": "2.21.0", "accelerate": "0.34.2"})


@pytest.fixture
def profile(tmp_path) -> str:
    """The T4 example reading its corpus over https:// (curl). With s3:// the script carries the s3 copy tool
    and no longer fits AWS user data (test_s3_data_over_the_user_data_limit_creates_nothing)."""
    path = tmp_path / "t4-aws.yaml"
    path.write_text(f"extends: {T4}\nname: bert-finetune\ndata:\n  - {{source: 'https://example.com/glue.tar', "
                    "dest: /mnt/data/glue}\n")
    return str(path)


def test_aws_lifecycle(cli, aws, profile) -> None:
    up = cli("up", profile, "--yes", "--json", "--cloud", "aws", "--region", "us-east-1", "--ssh-from", "203.0.113.7/32")
    assert up.code == 0, up.err
    doc = up.json()
    name = doc["name"]
    assert doc["state"] == "RUNNING" and doc["zone"].startswith("us-east-1") and doc["image"].startswith("ami-")
    [inst] = aws.instances()
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags["Name"] == name and tags["trainvm-managed"] == "true" and inst["ImageId"] == doc["image"]
    # both timers stop through the guest shutdown: the instance profile allows only the GET of its own payload
    assert aws.instance_profiles() == [name]
    iam = aws.client("iam", direct=True)
    [policy_name] = iam.list_role_policies(RoleName=name)["PolicyNames"]
    doc_policy = iam.get_role_policy(RoleName=name, PolicyName=policy_name)["PolicyDocument"]
    [stmt] = doc_policy["Statement"]
    assert stmt["Action"] in ("s3:GetObject", ["s3:GetObject"]) and str(stmt["Resource"]).count("payloads/") == 1
    # user data is the bootstrap naming the staged payload, which is in the account's S3 bucket
    ec2 = aws.client("ec2", direct=True)
    boot = base64.b64decode(ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")
                            ["UserData"]["Value"]).decode()
    sha = re.search(r"^TV_SHA256='([0-9a-f]{64})'$", boot, re.M).group(1)
    assert boot.startswith("#!/bin/bash\n") and len(boot) <= 16_384 and tags["trainvm-payload"] == sha[:16]
    assert "X-Amz-Signature=" in boot  # ubuntu-22.04: its curl cannot sign the identity request (fetch-aws.sh)
    s3 = aws.client("s3", direct=True)
    bucket, key = "trainvm-123456789012-us-east-1", f"payloads/{sha}.tar.gz"
    assert hashlib.sha256(s3.get_object(Bucket=bucket, Key=key)["Body"].read()).hexdigest() == sha
    [sg] = aws.security_groups()
    assert sg["IpPermissions"][0]["IpRanges"][0]["CidrIp"] == "203.0.113.7/32"

    listed = cli("list", "--json").json()
    assert [v["name"] for v in listed["vms"]] == [name] and listed["vms"][0]["cloud"] == "aws"
    assert {s["cloud"] for s in listed["skipped"]} >= {"gcp", "azure"}  # no credentials there: skipped, not fatal
    status = cli("status", name, "--json")
    assert status.code == 0, status.err

    assert cli("verify", name, "--json").json()["status"] == "provisioning"
    line = "TRAINVM_REPORT=" + base64.b64encode(json.dumps(REPORT).encode()).decode()
    aws.faults.set_console(inst["InstanceId"], f"cloud-init...\nTRAINVM_STATUS=ready\n{line}\n")
    verified = cli("verify", name, "--json")
    assert verified.json()["status"] == "match", [f for f in verified.json()["fields"] if not f["ok"]]

    stopped = cli("stop", name, "--yes", "--json")
    assert stopped.code == 0, stopped.err
    assert stopped.json()["state"] == "STOPPED" and "EBS root volume keeps billing" in stopped.json()["keeps_billing"]
    assert aws.instances()[0]["State"]["Name"] == "stopped"
    started = cli("start", name, "--json")
    assert started.code == 0 and started.json()["state"] == "RUNNING"

    again = cli("up", profile, "--yes", "--json", "--cloud", "aws", "--region", "us-east-1", "--ssh-from", "203.0.113.7/32")
    assert again.json()["existing"] is True and len(aws.faults.calls("RunInstances")) == 1

    gone = cli("down", name, "--yes", "--json")
    assert gone.code == 0 and gone.json()["deleted"] is True and gone.json()["payload"]["state"] == "released"
    assert aws.instances() == [] and aws.security_groups() == [] and aws.instance_profiles() == []
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0  # the payload went; the bucket is kept
    assert cli("down", name, "--yes", "--json").json()["already_gone"] is True
    assert cli("status", name, "--json").code == 4


def test_aws_capacity_failover_printed_and_nothing_left(cli, aws, profile) -> None:
    aws.faults.fail("RunInstances", "InsufficientInstanceCapacity", times=2 * 4)  # two AZs, 4 tries each
    up = cli("up", profile, "--yes", "--cloud", "aws", "--region", "us-east-1")
    assert up.code == 0, up.err
    failed = [ln for ln in up.err.splitlines() if ": capacity [InsufficientInstanceCapacity]" in ln]
    assert len(failed) == 2, up.err
    # the failed attempts left nothing: one instance, its security group and its payload-reading instance profile
    assert len(aws.instances()) == 1 and len(aws.security_groups()) == 1 and len(aws.instance_profiles()) == 1
    print(up.err)  # the failover log (pytest -s shows it)


def test_aws_cost_so_far_counts_the_current_run_then_the_last_one(cli, aws, profile) -> None:
    """EC2 resets LaunchTime at each start ("the time that the instance was last launched"; the proxy does it
    for moto) and says when a stop was asked in StateTransitionReason: status counts the current run while the
    instance runs and the last run once it is stopped: exact figures, not bounds (unlike Azure's)."""
    from datetime import UTC, datetime

    def when(stamp: str) -> datetime:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    up = cli("up", profile, "--yes", "--json", "--cloud", "aws", "--region", "us-east-1", "--ssh-from", "203.0.113.7/32")
    assert up.code == 0, up.err
    name = up.json()["name"]
    [v] = cli("list", "--json").json()["vms"]
    assert v["state"] == "RUNNING" and v["last_start"] and v["billing_compute"] is True
    assert v["cost_so_far"] is not None and v["cost_so_far_is_minimum"] is False

    assert cli("stop", name, "--yes", "--json").code == 0
    [v] = cli("list", "--json").json()["vms"]
    assert v["state"] == "STOPPED" and v["billing_compute"] is False
    assert v["last_stop"] and when(v["last_stop"]) >= when(v["last_start"])
    assert v["uptime_hours"] is not None and v["cost_so_far"] is not None  # the last run, no longer growing

    before_start = datetime.now(UTC).replace(microsecond=0)
    assert cli("start", name, "--json").code == 0
    [v] = cli("list", "--json").json()["vms"]
    assert v["state"] == "RUNNING" and when(v["last_start"]) >= before_start  # the run since this start, not the first
    assert cli("down", name, "--yes").code == 0
