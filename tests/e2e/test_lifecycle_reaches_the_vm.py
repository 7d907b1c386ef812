"""Every lifecycle field of the profile, read back from the VM that `trainvm up` created on each cloud.

The issue's "mutation 2": making `up` drop `max_run_hours` passed 572 tests, and on GCE it removes the run-time
cap entirely. Here `up` runs through the CLI and the real SDKs against each cloud's emulator; the test then reads
what the VM carries -- the create request as the emulator stored it, and the payload the VM's bootstrap would fetch,
read from the store emulator the VM reads it from -- and finds every field: idle_shutdown_minutes, on_idle,
max_run_hours, on_max_run. Dropping or changing any of them anywhere between the profile and the create call fails
here.

Not modelled: the VM acting on them (the watchdog and timers run in tests/render's stub harness and the real-OS
lane), GCE actually stopping at maxRunDuration, EC2's shutdown behaviour, Azure's role assignment taking effect.
"""

from __future__ import annotations

import io
import re
import tarfile
import urllib.request
from typing import Any

import pytest

from tests.helpers import REPO, gce_cli_env

T4 = REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"
IDLE_MINUTES, MAX_RUN_HOURS = 45, 3


def _profile(tmp_path, on_idle: str, on_max_run: str) -> str:
    path = tmp_path / "lifecycle.yaml"
    path.write_text(f"extends: {T4}\nname: lifecycle\n"
                    "data:\n  - {source: 'https://example.com/glue.tar', dest: /mnt/data/glue}\n"
                    f"lifecycle:\n  idle_shutdown_minutes: {IDLE_MINUTES}\n  max_run_hours: {MAX_RUN_HOURS}\n"
                    f"  on_idle: {on_idle}\n  on_max_run: {on_max_run}\n")
    return str(path)


def _config(payload: bytes) -> dict[str, str]:
    """The TV_* settings of the payload's startup.sh (what the VM's watchdog and timers are set up from)."""
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as tar:
        member = tar.extractfile("startup.sh")
        assert member is not None
        script = member.read().decode()
    return {k: v.strip("'\"") for k, v in re.findall(r"^(TV_[A-Z_]+)=(\S*)$", script, re.M)}


def _watchdog(cfg: dict[str, str]) -> None:
    assert cfg["TV_IDLE_MINUTES"] == str(IDLE_MINUTES)


# ---------------------------------------------------------------------------------------------- GCE


@pytest.fixture
def gce(monkeypatch, tmp_path):
    yield from gce_cli_env(monkeypatch, tmp_path)


@pytest.mark.parametrize(("on_idle", "on_max_run"), [("delete", "stop"), ("stop", "delete")])
def test_gce_vm_carries_every_lifecycle_field(cli, gce, tmp_path, on_idle, on_max_run) -> None:
    up = cli("up", _profile(tmp_path, on_idle, on_max_run), "--yes", "--json", "--cloud", "gcp")
    assert up.code == 0, up.err
    doc = up.json()
    inst = gce.instance(doc["name"])
    sched = inst["scheduling"]
    # max_run_hours and on_max_run: GCE enforces them itself (maxRunDuration + instanceTerminationAction)
    assert int(sched["maxRunDuration"]["seconds"]) == MAX_RUN_HOURS * 3600
    assert sched["instanceTerminationAction"] == on_max_run.upper()
    with urllib.request.urlopen(doc["summary"]["payload"]["url"]) as r:  # the emulator checks no token
        cfg = _config(r.read())
    _watchdog(cfg)
    assert cfg["TV_ON_IDLE"] == on_idle


# ---------------------------------------------------------------------------------------------- AWS
# (the aws fixture: tests/e2e/conftest.py, moto's server behind the fault proxy)


def _aws_instance(emu: Any, name: str) -> tuple[str, dict[str, Any]]:
    for region in emu.regions:
        for res in emu.client("ec2", region, direct=True).describe_instances()["Reservations"]:
            for inst in res["Instances"]:
                tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                if tags.get("Name") == name and inst["State"]["Name"] != "terminated":
                    return region, inst
    raise AssertionError(f"no instance named {name}")


def _ec2_calls(emu: Any, region: str, inst: dict[str, Any]) -> set[str]:
    """The EC2 actions the VM's own instance profile lets it call (what trainvm-lifecycle needs beyond a guest
    shutdown)."""
    iam = emu.client("iam", region, direct=True)
    profile = iam.get_instance_profile(InstanceProfileName=inst["IamInstanceProfile"]["Arn"].rsplit("/", 1)[-1])
    calls: set[str] = set()
    for role in profile["InstanceProfile"]["Roles"]:
        for policy in iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]:
            doc = iam.get_role_policy(RoleName=role["RoleName"], PolicyName=policy)["PolicyDocument"]
            for st in doc["Statement"]:
                actions = [st["Action"]] if isinstance(st["Action"], str) else st["Action"]
                calls |= {a for a in actions if a.startswith("ec2:")}
    return calls


@pytest.mark.parametrize(("on_idle", "on_max_run", "behaviour", "calls"),
                         [("delete", "delete", "terminate", set()), ("stop", "stop", "stop", set()),
                          ("delete", "stop", "stop", {"ec2:TerminateInstances"}),
                          ("stop", "delete", "stop", {"ec2:TerminateInstances"})])
def test_aws_vm_carries_every_lifecycle_field(cli, aws, tmp_path, on_idle, on_max_run, behaviour, calls) -> None:
    up = cli("up", _profile(tmp_path, on_idle, on_max_run), "--yes", "--json", "--cloud", "aws")
    assert up.code == 0, up.err
    doc = up.json()
    region, inst = _aws_instance(aws, doc["name"])
    ec2 = aws.client("ec2", region, direct=True)
    attr = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="instanceInitiatedShutdownBehavior")
    assert attr["InstanceInitiatedShutdownBehavior"]["Value"] == behaviour
    # the action a guest shutdown cannot do is an EC2 call the VM's own role may make
    assert _ec2_calls(aws, region, inst) == calls
    ref = doc["summary"]["payload"]
    bucket, key = ref["url"].split("/", 3)[3].split("/", 1)
    body = aws.client("s3", region, direct=True).get_object(Bucket=bucket, Key=key)["Body"].read()
    cfg = _config(body)
    _watchdog(cfg)
    # EC2 has no run-time cap of its own: the VM's timer enforces max_run_hours with on_max_run
    assert (cfg["TV_ON_IDLE"], cfg["TV_ON_MAX_RUN"], cfg["TV_MAX_RUN_SECONDS"]) == (
        on_idle, on_max_run, str(MAX_RUN_HOURS * 3600))


# ---------------------------------------------------------------------------------------------- Azure


@pytest.mark.parametrize(("on_idle", "on_max_run", "role"), [("stop", "delete", "Contributor"),
                                                          ("delete", "stop", "Contributor"),
                                                          ("stop", "stop", "Virtual Machine Contributor")])
def test_azure_vm_carries_every_lifecycle_field(cli, env, tmp_path, on_idle, on_max_run, role) -> None:
    from tests.emulators import azurite_server
    from tests.emulators.arm import ArmEmulator
    from tests.emulators.arm_roles import BUILT_IN_ROLES

    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        try:
            up = cli("up", _profile(tmp_path, on_idle, on_max_run), "--yes", "--json", "--cloud", "azure")
            assert up.code == 0, up.err
            doc = up.json()
            ref = doc["summary"]["payload"]
            account, container, key = re.fullmatch(r"https://[^/]+/([^/]+)/([^/]+)/(.+)", ref["url"]).groups()
            azurite = azurite_server.shared()
            blob = azurite.service(account, emu.ca_path).get_blob_client(container, key)
            cfg = _config(blob.download_blob().readall())
            _watchdog(cfg)
            # Azure has no run-time cap of its own: the VM's timer enforces it, deallocating or deleting itself
            # with its managed identity (the role assignment below lets it)
            assert (cfg["TV_ON_IDLE"], cfg["TV_ON_MAX_RUN"], cfg["TV_MAX_RUN_SECONDS"]) == (
                on_idle, on_max_run, str(MAX_RUN_HOURS * 3600))
            # ... and its identity may do what they ask on its own group (delete needs more than deallocate)
            group = f"/resourcegroups/trainvm-{doc['name']}".lower()
            granted = {BUILT_IN_ROLES[r["roleDefinitionId"].rsplit("/", 1)[-1].lower()]
                       for r in emu.state.role_assignments.values() if r["scope"].lower().endswith(group)}
            assert granted == {role}
        finally:
            emu.finish_operations(stuck=True)
