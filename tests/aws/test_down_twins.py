"""`down NAME` when several AWS instances carry that name (EC2 keeps no name unique; two `up` at once used to make
two through the emulator's non-atomic ClientToken bookkeeping): every one is terminated and reported, and when one
cannot be terminated `down` says how many remain and exits 3, never "deleted".

The CLI and boto3 against moto behind the fault proxy; the twin is launched directly with the first instance's
tags (as a second `up` would have made it)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import (
    env,  # noqa: F401 - the CLI tests' environment (no GCE/Azure credentials)
    ssh_key,
)
from tests.e2e.test_aws_cli import profile  # noqa: F401 - the T4 example reading https:// data


@pytest.fixture(autouse=True)
def key(env, tmp_path):  # noqa: F811
    env.setenv("TRAINVM_SSH_PUBLIC_KEY", str(ssh_key(tmp_path)))  # moto checks the key's encoding


def _up_and_twin(cli, aws, profile) -> tuple[str, list[str]]:  # noqa: F811
    up = cli("up", profile, "--yes", "--json", "--cloud", "aws", "--region", "us-east-1")
    assert up.code == 0, up.err
    [first] = aws.instances()
    ec2 = aws.client("ec2", direct=True)
    zone = first["Placement"]["AvailabilityZone"]
    twin = ec2.run_instances(ImageId=first["ImageId"], InstanceType=first["InstanceType"], MinCount=1, MaxCount=1,
                             Placement={"AvailabilityZone": zone},
                             TagSpecifications=[{"ResourceType": "instance", "Tags": first["Tags"]}])["Instances"][0]
    return up.json()["name"], [first["InstanceId"], twin["InstanceId"]]


def test_down_terminates_every_instance_of_the_name_and_reports_each(cli, aws, env, profile) -> None:  # noqa: F811
    name, ids = _up_and_twin(cli, aws, profile)
    r = cli("down", name, "--yes", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["deleted"] is True and doc["remaining"] == 0
    assert sorted(i["id"] for i in doc["instances"]) == sorted(ids) and all(i["deleted"] for i in doc["instances"])
    assert aws.instances() == [] and aws.security_groups() == []
    again = cli("down", name, "--yes")
    assert again.code == 0 and "already gone" in again.out


def test_down_says_how_many_remain_when_one_cannot_be_terminated(cli, aws, env, profile) -> None:  # noqa: F811
    name, ids = _up_and_twin(cli, aws, profile)
    aws.faults.fail("TerminateInstances", "UnauthorizedOperation", when={"InstanceId.1": ids[1]},
                    message="You are not authorized to perform this operation.")
    r = cli("down", name, "--yes")
    assert r.code == 3, r.out + r.err
    assert f"1 of 2 instances named {name} could not be terminated and remain: {ids[1]}" in r.err
    assert [i["InstanceId"] for i in aws.instances()] == [ids[1]]
