"""Clusters on AWS end to end: the CLI (`up`, `status`, `verify`, `ssh --node`, `down`) through boto3 against moto's
server behind the fault proxy (tests/emulators/aws.py; placement groups, ClientToken and per-AZ capacity are the
proxy's, tests/emulators/aws_placement.py, aws_tokens.py). Only the nodes' console output (what their startup
script would print) is planted. Not modelled: placement itself (no racks), EFA and the fabric, IMDS (the node
list is read back from the tags; tests/render covers the script under the stub harness)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.contract.harness import REPORT  # noqa: E402
from tests.helpers import assert_verify_names_drifting_node, capture_ssh  # noqa: E402


@pytest.fixture
def aws(env):
    pytest.importorskip("moto.server")
    from tests.emulators.aws import shared_moto

    emu = shared_moto()
    emu.reset()
    for k, v in emu.env().items():
        env.setenv(k, v)
    env.setenv("TRAINVM_AWS_OP_TIMEOUT", "5")
    env.delenv("TRAINVM_SSH_PUBLIC_KEY", raising=False)
    return emu


def _profile(write_yaml, nodes: int):
    return write_yaml(f"name: ddp\nextends: base/torch-2.4-cu124\nhardware: {{gpu: T4, gpu_count: 1, nodes: {nodes}}}\n"
                      "placement: {clouds: [aws], regions: [us-east-1], compact: true}\n")


def _tags(inst) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags") or []}


def _left(aws) -> list[str]:
    return sorted([i["InstanceId"] for i in aws.instances()] + [g["GroupName"] for g in aws.security_groups()]
                  + aws.placement_groups() + aws.instance_profiles())


def _report(report) -> str:
    return "TRAINVM_STATUS=ready\nTRAINVM_REPORT=" + base64.b64encode(json.dumps(report).encode()).decode() + "\n"


def test_up_status_verify_ssh_down(cli, write_yaml, aws, monkeypatch) -> None:
    n = 2
    r = cli("up", str(_profile(write_yaml, n)), "--yes", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    name = doc["name"]
    names = [f"{name}-{i}" for i in range(n)]
    assert [m["name"] for m in doc["cluster"]["members"]] == names and doc["cluster"]["nodes"] == n

    # one placement group, one RunInstances of exactly N into it, the node list on every node
    [pg] = aws.faults.calls("CreatePlacementGroup")
    assert pg.params["Strategy"] == "cluster" and pg.params["GroupName"] == name
    [run] = aws.faults.calls("RunInstances")
    assert (run.params["MinCount"], run.params["MaxCount"], run.params["Placement.GroupName"]) == (str(n), str(n), name)
    assert run.params["MetadataOptions.InstanceMetadataTags"] == "enabled"
    insts = sorted(aws.instances(), key=lambda i: int(_tags(i)["trainvm-rank"]))
    assert [_tags(i)["Name"] for i in insts] == names
    ips = ",".join(i["PrivateIpAddress"] for i in insts)
    assert all(_tags(i)["trainvm-cluster"] == ips and _tags(i)["trainvm-group"] == name for i in insts)

    listed = cli("status", "--json").json()["vms"]
    assert [v["name"] for v in listed] == [name] and [m["name"] for m in listed[0]["members"]] == names
    assert listed[0]["nodes_found"] == n and listed[0]["state"] == "RUNNING"

    for inst in insts:
        aws.faults.set_console(inst["InstanceId"], _report(REPORT))
    same = cli("verify", name, "--json").json()
    assert not [f for f in same["fields"] if f["field"].startswith("nodes.")]
    aws.faults.set_console(insts[-1]["InstanceId"], _report({**REPORT, "driver": "550.90.07"}))
    assert_verify_names_drifting_node(cli, name, names[-1])

    argv = capture_ssh(monkeypatch)
    assert cli("ssh", name, "--node", "1").code == 0
    assert argv and argv[0][-1] == f"ubuntu@{insts[1]['PublicIpAddress']}"
    assert cli("ssh", name, "--node", str(n)).code == 2

    down = cli("down", name, "--yes", "--json")
    assert down.code == 0 and down.json()["nodes"] == n and down.json()["deleted"] is True
    assert _left(aws) == []
    assert cli("status", "--json").json()["vms"] == []


def test_a_stock_out_moves_the_whole_cluster_and_leaves_nothing_behind(cli, write_yaml, aws) -> None:
    first = json.loads(cli("plan", str(_profile(write_yaml, 4)), "--json").out)["chosen"]["zone"]
    zones = aws.client("ec2", direct=True).describe_availability_zones()["AvailabilityZones"]
    aws.faults.set_capacity({z["ZoneId"]: z["ZoneName"] for z in zones}[first], 3)  # room for 3 of the 4 nodes
    r = cli("up", str(_profile(write_yaml, 4)), "--yes", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["attempts"][0]["zone"] == first and doc["attempts"][0]["error_code"] == "InsufficientInstanceCapacity"
    assert doc["attempts"][-1]["outcome"] == "created"
    insts = aws.instances()
    assert len(insts) == 4 and len({i["Placement"]["AvailabilityZone"] for i in insts}) == 1
    assert aws.placement_groups() == [doc["name"]]  # the first AZ's group went with its failed attempt
    assert cli("down", doc["name"], "--yes").code == 0 and _left(aws) == []
