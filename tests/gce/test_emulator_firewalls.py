"""The GCE emulator's global firewall rules and global operations, driven by the real SDK (and raw JSON where
the SDK cannot send a malformed body), plus `ingress_decision`, the VPC evaluation tests rely on."""
from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from google.api_core import exceptions as gexc  # noqa: E402
from google.cloud import compute_v1  # noqa: E402

from tests.emulators.gce import GceEmulator  # noqa: E402

P = "fw-proj"
DONE = compute_v1.Operation.Status.DONE
DEFAULTS = ["default-allow-icmp", "default-allow-internal", "default-allow-rdp", "default-allow-ssh"]
RULE = {"name": "vm-ssh-allow", "network": f"projects/{P}/global/networks/default", "direction": "INGRESS",
        "priority": 900, "sourceRanges": ["203.0.113.7/32"], "targetTags": ["vm-ssh"],
        "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}], "description": "trainvm: test"}


@pytest.fixture(scope="module")
def sdk(server):
    return server.sdk_clients()


def rule(**over) -> dict:
    body = copy.deepcopy(RULE)
    body.update(over)
    return {k: v for k, v in body.items() if v is not None}


def insert(sdk, body=None, request_id=None):
    req = compute_v1.InsertFirewallRequest(project=P, request_id=request_id or str(uuid.uuid4()),
                                           firewall_resource=compute_v1.Firewall.from_json(json.dumps(body or rule())))
    return sdk.firewalls.insert_unary(request=req)


def wait(sdk, op):
    return sdk.global_operations.wait(project=P, operation=op.name)


def post_raw(emu, body) -> tuple[int, dict]:
    req = urllib.request.Request(f"{emu.url}/compute/v1/projects/{P}/global/firewalls", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def test_insert_wait_get_list_delete(emu, sdk):
    op = insert(sdk)
    assert op.status != DONE and op.target_link.endswith(f"/projects/{P}/global/firewalls/vm-ssh-allow") and not op.zone
    assert op.self_link.endswith(f"/projects/{P}/global/operations/{op.name}")
    assert wait(sdk, op).status == DONE and not wait(sdk, op).error.errors
    got = sdk.firewalls.get(project=P, firewall="vm-ssh-allow")
    assert (got.priority, list(got.source_ranges), list(got.target_tags), got.direction) == (900, ["203.0.113.7/32"], ["vm-ssh"], "INGRESS")
    assert got.network == f"https://www.googleapis.com/compute/v1/projects/{P}/global/networks/default" and got.id
    assert [f.name for f in sdk.firewalls.list(project=P)] == DEFAULTS[:4] + ["vm-ssh-allow"]
    assert [f.name for f in sdk.firewalls.list(request=compute_v1.ListFirewallsRequest(
        project=P, filter='name = "default-allow-ssh"'))] == ["default-allow-ssh"]
    ssh = sdk.firewalls.get(project=P, firewall="default-allow-ssh")
    assert (ssh.priority, list(ssh.source_ranges), not ssh.target_tags) == (65534, ["0.0.0.0/0"], True)
    op = sdk.firewalls.delete_unary(project=P, firewall="vm-ssh-allow")
    assert emu.firewall("vm-ssh-allow", P) is not None  # gone once the operation is DONE
    assert sdk.global_operations.get(project=P, operation=op.name).status == DONE
    assert emu.firewall("vm-ssh-allow", P) is None and emu.firewall_names(P) == DEFAULTS
    with pytest.raises(gexc.NotFound):
        sdk.firewalls.get(project=P, firewall="vm-ssh-allow")
    with pytest.raises(gexc.NotFound):
        sdk.firewalls.delete_unary(project=P, firewall="vm-ssh-allow")
    with pytest.raises(gexc.NotFound):
        sdk.global_operations.wait(project=P, operation="operation-1-2-3-4")
    assert [r.method_id for r in emu.requests][:2] == ["compute.firewalls.insert", "compute.globalOperations.wait"]
    assert emu.calls("firewalls.insert")[0].body["sourceRanges"] == ["203.0.113.7/32"]


def test_duplicate_name_409_and_request_id_replay(emu, sdk):
    rid = str(uuid.uuid4())
    first = insert(sdk, request_id=rid)
    assert insert(sdk, request_id=rid).name == first.name  # the same request: the same operation
    with pytest.raises(gexc.Conflict) as e:
        insert(sdk)
    assert e.value.errors[0]["reason"] == "alreadyExists"


def test_update_replaces_the_rule(emu, sdk):
    wait(sdk, insert(sdk))
    created = emu.firewall("vm-ssh-allow", P)
    body = compute_v1.Firewall.from_json(json.dumps(rule(sourceRanges=["198.51.100.0/24"])))
    wait(sdk, sdk.firewalls.update_unary(project=P, firewall="vm-ssh-allow", firewall_resource=body))
    now = emu.firewall("vm-ssh-allow", P)
    assert now["sourceRanges"] == ["198.51.100.0/24"] and (now["id"], now["creationTimestamp"]) == (
        created["id"], created["creationTimestamp"])
    with pytest.raises(gexc.BadRequest, match="cannot be changed"):
        sdk.firewalls.update_unary(project=P, firewall="vm-ssh-allow", firewall_resource=compute_v1.Firewall.from_json(
            json.dumps(rule(name="other"))))
    with pytest.raises(gexc.NotFound):
        sdk.firewalls.update_unary(project=P, firewall="nope", firewall_resource=body)


@pytest.mark.parametrize("body, needle", [
    (rule(sourceRange=["1.2.3.4/32"]), 'Unknown name "sourceRange"'),
    (rule(allowed=[{"IPProtocol": "tcp", "port": ["22"]}]), 'Unknown name "port"'),
    (rule(direction="INBOUND"), "resource.direction"),
    (rule(sourceRanges=["203.0.113.7"]), None),  # a bare address is a /32: accepted
    (rule(sourceRanges=["203.0.113.300/32"]), "resource.sourceRanges[0]"),
    (rule(sourceRanges=["10.0.0.1/8"]), "no host bits"),
    (rule(sourceRanges=["0.0.0.0/0", "::/0"]), "either IPv4 or IPv6 ranges, but not both"),
    (rule(priority=65536), "Must be in [0, 65535]"),
    (rule(priority=-1), "Must be in [0, 65535]"),
    (rule(name="Bad_Name"), "resource.name"),
    (rule(name="x" * 64), "resource.name"),
    (rule(name=None), "Required field 'resource.name'"),
    (rule(denied=[{"IPProtocol": "tcp"}]), "Exactly one of allowed or denied"),
    (rule(allowed=None), "Exactly one of allowed or denied"),
    (rule(allowed=[{"IPProtocol": "icmp", "ports": ["22"]}]), "only be specified for tcp, udp and sctp"),
    (rule(allowed=[{"IPProtocol": "tcp", "ports": ["70000"]}]), "ports[0]"),
    (rule(allowed=[{"ports": ["22"]}]), "IPProtocol' not specified"),
    (rule(allowed=[{"IPProtocol": "carrier-pigeon"}]), "IPProtocol"),
    (rule(targetTags=["Not A Tag"]), "resource.targetTags[0]"),
    (rule(network="global/networks/other"), "network was not found"),
    (rule(network="projects/someone-else/global/networks/default"), "network was not found"),
    (rule(id="123"), "output only"),
    (rule(direction="EGRESS", sourceTags=["a"]), "EGRESS"),
])
def test_firewall_body_validation(emu, body, needle):
    status, out = post_raw(emu, body)
    if needle is None:
        assert status == 200, out
        return
    assert status == 400 and needle in " ".join(e["message"] for e in out["error"]["errors"]), out
    assert emu.firewall(body.get("name") or "x", P) is None or body.get("name") in DEFAULTS


def test_no_source_means_everywhere(emu, sdk):
    wait(sdk, insert(sdk, rule(sourceRanges=None)))
    assert emu.firewall("vm-ssh-allow", P)["sourceRanges"] == ["0.0.0.0/0"]


def test_faults_on_firewall_methods(emu, sdk):
    emu.inject("stockout_op")  # defaults to instances.insert: firewall inserts are not affected
    emu.inject("unavailable_503")
    assert wait(sdk, insert(sdk)).status == DONE and len(emu.faults) == 2
    emu.reset()
    emu.inject("permission_403", method="firewalls.insert")
    with pytest.raises(gexc.Forbidden) as e:
        insert(sdk)
    assert "Required 'compute.firewalls.create' permission for 'projects/fw-proj/global/firewalls'" in e.value.message
    emu.inject("quota_403", method="firewalls.insert", metric="FIREWALLS")
    with pytest.raises(gexc.Forbidden, match="Quota 'FIREWALLS' exceeded.  Limit: 0.0 globally."):
        insert(sdk)
    emu.inject("quota_op_global", method="firewalls.insert", metric="FIREWALLS")
    done = wait(sdk, insert(sdk))
    assert done.status == DONE and done.error.errors[0].code == "QUOTA_EXCEEDED" and done.http_error_status_code == 403
    assert emu.firewall("vm-ssh-allow", P) is None  # a failed insert creates nothing
    emu.inject("unavailable_503", method="globalOperations.wait")
    op = insert(sdk)
    with pytest.raises(gexc.ServiceUnavailable):
        wait(sdk, op)
    assert wait(sdk, op).status == DONE
    emu.inject("unavailable_503", method="firewalls.get", zone="us-central1-a")  # a zone never matches a global call
    assert sdk.firewalls.get(project=P, firewall="vm-ssh-allow").name == "vm-ssh-allow"
    with pytest.raises(ValueError, match="operation faults"):
        emu.inject("stockout_op", method="firewalls.delete")


def test_ingress_decision_follows_vpc_rules(emu, sdk):
    zone = "us-central1-a"
    inst = compute_v1.Instance.from_json(json.dumps({
        "name": "vm", "machineType": f"zones/{zone}/machineTypes/e2-standard-4", "tags": {"items": ["vm-ssh"]},
        "disks": [{"boot": True, "initializeParams": {"sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}],
        "networkInterfaces": [{"network": "global/networks/default"}]}))
    sdk.instances.insert(project=P, zone=zone, instance_resource=inst)
    assert emu.ingress_decision("vm", "198.51.100.1") == ("allow", "default-allow-ssh")
    assert emu.ingress_decision("vm", "198.51.100.1", port=8080) == ("deny", None)  # implied deny ingress
    assert emu.ingress_decision("vm", "10.128.0.5", port=8080) == ("allow", "default-allow-internal")
    wait(sdk, insert(sdk, rule(name="vm-ssh-deny", priority=900, sourceRanges=["0.0.0.0/0"], allowed=None,
                               denied=[{"IPProtocol": "tcp", "ports": ["22"]}])))
    wait(sdk, insert(sdk))  # allow from 203.0.113.7 at the same priority: DENY wins a tie
    assert emu.ingress_decision("vm", "203.0.113.7") == ("deny", "vm-ssh-deny")
    wait(sdk, sdk.firewalls.update_unary(project=P, firewall="vm-ssh-allow", firewall_resource=compute_v1.Firewall.from_json(
        json.dumps(rule(priority=899)))))
    assert emu.ingress_decision("vm", "203.0.113.7") == ("allow", "vm-ssh-allow")
    assert emu.ingress_decision("vm", "198.51.100.1") == ("deny", "vm-ssh-deny")
    wait(sdk, insert(sdk, rule(name="other-tag", priority=1, sourceRanges=["0.0.0.0/0"], targetTags=["web"])))
    assert emu.ingress_decision("vm", "198.51.100.1") == ("deny", "vm-ssh-deny")  # targets other instances only


def test_without_default_rules():
    with GceEmulator(default_firewalls=False) as emu:
        assert emu.firewall_names(P) == [] and list(emu.sdk_clients().firewalls.list(project=P)) == []
