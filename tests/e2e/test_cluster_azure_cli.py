"""Clusters on Azure end to end: the CLI (`up`, `status`, `verify`, `ssh --node`, `down`) through azure-mgmt-* against
the ARM emulator's scale sets and proximity placement groups (tests/emulators/arm_vmss.py). What the emulator does
not model: placement itself (the PPG and singlePlacementGroup are only recorded), the InfiniBand fabric, what IMDS
shows a node (the node list is read from the scale set's tags here; tests/render covers the script under the stub
harness), overprovisioning and instance-id gaps."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from tests.contract.harness import REPORT
from tests.emulators.arm import ArmEmulator
from tests.emulators.arm_quota import set_quota
from tests.helpers import assert_verify_names_drifting_node, capture_ssh

VMSS = "/providers/Microsoft.Compute/virtualMachineScaleSets/"


@pytest.fixture
def arm(env):
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        # a subscription whose regional vCPU quota was raised for clusters (the emulator starts at 100 cores)
        for location in ("eastus", "westus2", "southcentralus", "westeurope"):
            set_quota(emu, location, "cores", 2000)
        try:
            yield emu
        finally:
            emu.finish_operations(stuck=True)


def _profile(tmp_path, nodes: int):
    path = tmp_path / "ddp-azure.yaml"
    path.write_text(f"name: ddp\nextends: base/torch-2.4-cu124\nhardware: {{gpu: A100, gpu_count: 8, nodes: {nodes}}}\n"
                    "placement: {clouds: [azure], regions: [eastus, westus2], compact: true}\n"
                    "lifecycle: {max_run_hours: 10}\n")
    return path


def _report(doc) -> str:
    return base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()


@pytest.mark.parametrize("n", [2, 4])
def test_up_status_verify_ssh_down(cli, arm, tmp_path, monkeypatch, n) -> None:
    r = cli("up", str(_profile(tmp_path, n)), "--yes", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    name = doc["name"]
    names = [f"{name}-{i}" for i in range(n)]
    assert [m["name"] for m in doc["cluster"]["members"]] == names and doc["cluster"]["nodes"] == n
    # one PPG, then one scale set of exactly N, the node list in its tags
    [ppg] = arm.calls("PUT", "/proximityPlacementGroups/")
    [vmss] = arm.calls("PUT", VMSS)
    assert vmss.body["sku"]["capacity"] == n and vmss.body["properties"]["proximityPlacementGroup"]["id"].endswith(
        ppg.path.split("/providers/")[1])
    rg = f"trainvm-{name}"
    tags = arm.resource(f"/subscriptions/{arm.subscription_id}/resourceGroups/{rg}{VMSS}{name}")["tags"]
    assert len(tags["trainvm-cluster"].split(",")) == n

    listed = cli("status", "--json").json()["vms"]
    assert [v["name"] for v in listed] == [name] and [m["name"] for m in listed[0]["members"]] == names
    assert listed[0]["nodes_found"] == n and listed[0]["state"] == "RUNNING"

    for i in range(n):
        arm.set_run_command_output(rg, f"{name}_{i}", stdout=_report(REPORT))
    same = cli("verify", name, "--json").json()
    assert not [f for f in same["fields"] if f["field"].startswith("nodes.")], same
    arm.set_run_command_output(rg, f"{name}_{n - 1}", stdout=_report({**REPORT, "driver": "550.90.07"}))
    assert_verify_names_drifting_node(cli, name, names[-1])

    argv = capture_ssh(monkeypatch)
    assert cli("ssh", name, "--node", "1").code == 0
    node1 = next(m for m in doc["cluster"]["members"] if m["name"] == names[1])
    assert argv and f"trainvm@{node1['ip']}" in argv[0]
    assert cli("ssh", name, "--node", str(n)).code == 2

    down = cli("down", name, "--yes", "--json")
    assert down.code == 0 and down.json()["nodes"] == n and down.json()["deleted"] is True
    assert arm.vm_groups() == []
    assert cli("status", "--json").json()["vms"] == []


def test_a_partial_stock_out_moves_the_whole_cluster_and_leaves_nothing_behind(cli, arm, tmp_path) -> None:
    plan = json.loads(cli("plan", str(_profile(tmp_path, 4)), "--json").out)["chosen"]
    arm.inject("partial_capacity_lro", location=plan["region"], size=plan["instance_type"], times=None, created=3)
    r = cli("up", str(_profile(tmp_path, 4)), "--yes", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["attempts"][0]["region"] == plan["region"] and doc["attempts"][0]["error_code"] == "AllocationFailed"
    assert doc["region"] != plan["region"] and doc["attempts"][-1]["outcome"] == "created"
    assert arm.vm_groups() == [f"trainvm-{doc['name']}"]
    assert cli("down", doc["name"], "--yes").code == 0 and arm.vm_groups() == []
