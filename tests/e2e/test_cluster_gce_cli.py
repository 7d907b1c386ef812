"""Clusters on GCE end to end: the CLI (`up`, `status`, `verify`, `ssh --node`, `down`) through google-cloud-compute
against the GCE emulator with its group APIs (tests/emulators/gce_group.py: bulkInsert, resourcePolicies,
setMetadata). What the emulator does not model: placement itself (no racks: co-location is only the policy
attached), the fabric, and the VMs' own rendezvous (the node list is read from metadata; tests/render covers the
script under the stub harness)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.contract.harness import REPORT, b64_json
from tests.emulators.gce_group import GceGroupEmulator
from tests.helpers import assert_verify_names_drifting_node, capture_ssh, gce_cli_env

PROJECT = "e2e-proj"
DEFAULT_RULES = {"default-allow-icmp", "default-allow-internal", "default-allow-rdp", "default-allow-ssh"}


@pytest.fixture
def gce(monkeypatch, tmp_path):
    """A project whose CPU quota was raised for clusters (the emulator starts at 24 CPUs per region, as new
    projects often do: 4 x a2-highgpu-1g need 48)."""
    for emu in gce_cli_env(monkeypatch, tmp_path, GceGroupEmulator):
        for region in ("us-central1", "us-east1", "us-east4", "us-west1"):
            emu.set_quota("CPUS", 512, region=region)
        yield emu


def _profile(write_yaml, nodes: int):
    return write_yaml(f"name: ddp\nextends: base/torch-2.4-cu124\nhardware: {{gpu: A100, gpu_count: 1, nodes: {nodes}}}\n"
                      "placement: {clouds: [gcp], regions: [us-central1], compact: true}\nlifecycle: {max_run_hours: 10}\n")


def _nodes(gce: GceGroupEmulator) -> dict[str, dict[str, Any]]:
    with gce._lock:
        return {k[2]: json.loads(json.dumps(v)) for k, v in gce.instances.items() if k[0] == PROJECT}


def _left(gce: GceGroupEmulator) -> list[str]:
    with gce._lock:
        policies = [k[2] for k in gce.policies if k[0] == PROJECT]
    rules = [n for n in gce.firewall_names(PROJECT) if n not in DEFAULT_RULES]
    return sorted([*_nodes(gce), *policies, *rules])


@pytest.mark.parametrize("n", [2, 4])
def test_up_status_verify_ssh_down(cli, write_yaml, gce, monkeypatch, n) -> None:
    r = cli("up", str(_profile(write_yaml, n)), "--yes", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    name, zone = doc["name"], doc["zone"]
    names = [f"{name}-{i}" for i in range(n)]
    assert [m["name"] for m in doc["cluster"]["members"]] == names and doc["cluster"]["nodes"] == n
    assert any("ssh" in note.lower() for note in doc["notes"])  # who can reach SSH, as for one VM

    # one policy, one internal rule, one bulkInsert of exactly N (all or nothing), the node list on every node
    [policy] = [c.body for c in gce.calls("resourcePolicies.insert")]
    assert policy["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "availabilityDomainCount": 1}
    [bulk] = [c.body for c in gce.calls("instances.bulkInsert")]
    assert (bulk["count"], bulk["minCount"], sorted(bulk["perInstanceProperties"])) == (str(n), str(n), sorted(names))
    assert bulk["instanceProperties"]["resourcePolicies"][0].endswith(f"/resourcePolicies/{policy['name']}")
    [rule] = [c.body for c in gce.calls("firewalls.insert") if c.body["name"].endswith("-internal")]
    assert rule["sourceTags"] == rule["targetTags"] and {a["IPProtocol"] for a in rule["allowed"]} == {"tcp", "udp", "icmp"}
    nodes = _nodes(gce)
    assert sorted(nodes) == sorted(names)
    ips = ",".join(nodes[x]["networkInterfaces"][0]["networkIP"] for x in names)
    for rank, x in enumerate(names):
        assert nodes[x]["labels"]["trainvm-rank"] == str(rank)
        meta = {i["key"]: i["value"] for i in nodes[x]["metadata"]["items"]}
        assert meta["trainvm-cluster"] == ips and rule["targetTags"][0] in nodes[x]["tags"]["items"]
        assert nodes[x]["labels"]["trainvm-cluster"] == name and nodes[x]["labels"]["trainvm-nodes"] == str(n)

    listed = cli("status", "--json").json()["vms"]
    assert [v["name"] for v in listed] == [name] and [m["name"] for m in listed[0]["members"]] == names
    assert listed[0]["nodes_found"] == n and listed[0]["state"] == "RUNNING"

    for x in names:
        gce.set_guest_attributes(x, {"report": b64_json(REPORT)})
    same = cli("verify", name, "--json").json()
    assert not [f for f in same["fields"] if f["field"].startswith("nodes.")]
    gce.set_guest_attributes(names[-1], {"report": b64_json({**REPORT, "driver": "550.90.07"})})
    assert_verify_names_drifting_node(cli, name, names[-1])

    argv = capture_ssh(monkeypatch)
    assert cli("ssh", name, "--node", "1").code == 0
    assert argv == [["gcloud", "compute", "ssh", names[1], "--zone", zone, "--project", PROJECT]]
    assert cli("ssh", name, "--node", str(n)).code == 2

    down = cli("down", name, "--yes", "--json")
    assert down.code == 0 and down.json()["nodes"] == n and down.json()["deleted"] is True
    assert _left(gce) == []
    assert cli("status", "--json").json()["vms"] == []


def test_a_partial_stock_out_moves_the_whole_cluster_and_leaves_nothing_behind(cli, write_yaml, gce) -> None:
    first = json.loads(cli("plan", str(_profile(write_yaml, 4)), "--json").out)["chosen"]["zone"]
    with gce._lock:
        gce.capacity[first] = 3  # room for 3 of the 4 nodes: GCE creates 3, then deletes them (minCount = 4)
    r = cli("up", str(_profile(write_yaml, 4)), "--yes", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["attempts"][0]["zone"] == first and doc["attempts"][0]["error_code"] == "VM_MIN_COUNT_NOT_REACHED"
    assert doc["zone"] != first and doc["attempts"][-1]["outcome"] == "created"
    assert {v["zone"].rsplit("/", 1)[-1] for v in _nodes(gce).values()} == {doc["zone"]}
    with gce._lock:
        assert len([k for k in gce.policies if k[0] == PROJECT]) == 1  # the first zone's policy went with its nodes
    assert cli("down", doc["name"], "--yes").code == 0 and _left(gce) == []
