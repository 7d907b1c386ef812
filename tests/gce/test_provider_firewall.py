"""ssh_from on GCE: GcpProvider's VPC firewall rules, through the real SDK against the loopback emulator, whose
`ingress_decision` evaluates the stored rules (with the default network's default-allow-ssh) the way VPC does."""

from __future__ import annotations

import json
import time

import pytest

from provisioner.providers.base import AuthError, ConflictError, QuotaError, RetryExhaustedError
from provisioner.provision.failover import ProvisionError, provision

P = "test-proj"
CIDR = "203.0.113.7/32"
SSH = [{"IPProtocol": "tcp", "ports": ["22"]}]
DEFAULTS = ["default-allow-icmp", "default-allow-internal", "default-allow-rdp", "default-allow-ssh"]


def fw_calls(gce) -> list[str]:
    return [r.method_id for r in gce.requests if r.method_id and ("firewalls" in r.method_id or "globalOperations" in r.method_id)]


def ours(gce) -> list[str]:
    return [n for n in gce.firewall_names(P) if n not in DEFAULTS]


@pytest.fixture
def ssh_spec(spec):
    return lambda **kw: spec(ssh_from=CIDR, **kw)


def test_ssh_from_creates_allow_and_deny_before_the_instance(gce, provider, ssh_spec, offer):
    s = ssh_spec()
    rec = provider.create(s, offer())
    tag, allow, deny = f"{s.name}-ssh", f"{s.name}-ssh-allow", f"{s.name}-ssh-deny"
    inserts = gce.calls("firewalls.insert")
    owner = f"VM {s.name} (profile bert-finetune, sha256 {s.profile_hash[:16]})"
    common = {"network": f"projects/{P}/global/networks/default", "direction": "INGRESS", "targetTags": [tag]}
    assert [r.body for r in inserts] == [  # the wire bodies, as the SDK sent them
        {"name": allow, "description": f"trainvm: SSH to {owner} only from {CIDR}", **common, "priority": 900,
         "sourceRanges": [CIDR], "allowed": SSH},
        {"name": deny, "description": f"trainvm: no SSH to {owner} from elsewhere", **common, "priority": 910,
         "sourceRanges": ["0.0.0.0/0"], "denied": SSH}]
    assert all(r.path == f"/compute/v1/projects/{P}/global/firewalls" and r.status == 200 for r in inserts)
    assert len({r.query["requestId"] for r in inserts}) == 2
    ids = [r.method_id for r in gce.requests]
    assert ids.index("compute.instances.insert") > max(i for i, m in enumerate(ids) if "globalOperations.wait" in m)
    assert gce.calls("instances.insert")[0].body["tags"] == {"items": [tag]}
    assert gce.instance(s.name)["tags"]["items"] == [tag]
    stored = gce.firewall(allow, P)
    assert (stored["sourceRanges"], stored["priority"], stored["targetTags"], stored["allowed"]) == ([CIDR], 900, [tag], SSH)
    stored = gce.firewall(deny, P)
    assert (stored["sourceRanges"], stored["priority"], stored["targetTags"], stored["denied"]) == (["0.0.0.0/0"], 910, [tag], SSH)
    # what the rules achieve on a default network: ssh_from is the only source that gets in
    assert gce.ingress_decision(s.name, "203.0.113.7") == ("allow", allow)
    assert gce.ingress_decision(s.name, "198.51.100.9") == ("deny", deny)
    assert gce.ingress_decision(s.name, "35.235.240.1") == ("deny", deny)  # IAP too: only ssh_from
    assert gce.ingress_decision(s.name, "198.51.100.9", port=3389) == ("allow", "default-allow-rdp")  # only SSH is ours
    (note,) = rec.notes
    assert f"allowed only from {CIDR}" in note and allow in note and deny in note and "gcloud" not in note


def test_without_ssh_from_no_firewall_calls_and_the_note_says_who_gets_in(gce, provider, spec, offer):
    s = spec()
    rec = provider.create(s, offer())
    assert provider.delete(s.name) is True
    assert fw_calls(gce) == [] and "tags" not in gce.calls("instances.insert")[0].body
    assert "default-allow-ssh" in rec.notes[0] and "--ssh-from CIDR" in rec.notes[0]
    provider.create(s, offer())
    assert gce.ingress_decision(s.name, "198.51.100.9") == ("allow", "default-allow-ssh")  # what the note warns about


def test_rerun_reuses_the_rules(gce, provider, make_provider, ssh_spec, offer):
    s = ssh_spec()
    provider.create(s, offer())
    before = {n: gce.firewall(n, P) for n in ours(gce)}
    again = make_provider().create(s, offer())
    assert again.adopted is True and len(gce.calls("firewalls.insert")) == 2
    assert not gce.calls("firewalls.update") and {n: gce.firewall(n, P) for n in ours(gce)} == before


def test_rerun_after_up_was_killed_before_the_instance_insert(gce, provider, make_provider, ssh_spec, offer):
    s = ssh_spec()
    provider._fw.ensure(s, time.monotonic() + 5)  # `up` killed between the rules and the instance insert
    rec = make_provider().create(s, offer())
    assert rec.state == "RUNNING" and len(gce.calls("firewalls.insert")) == 2 and len(ours(gce)) == 2
    assert gce.ingress_decision(s.name, "198.51.100.9")[0] == "deny"


def test_rerun_with_another_ssh_from_updates_the_allow_rule(gce, provider, ssh_spec, spec, offer):
    s = ssh_spec()
    provider.create(s, offer())
    moved = spec(ssh_from="198.51.100.0/24")
    rec = provider.create(moved, offer())
    (upd,) = gce.calls("firewalls.update")
    assert upd.method == "PUT" and upd.path.endswith(f"/global/firewalls/{s.name}-ssh-allow")
    assert upd.body["sourceRanges"] == ["198.51.100.0/24"] and "only from 198.51.100.0/24" in rec.notes[0]
    assert gce.ingress_decision(s.name, "198.51.100.9")[0] == "allow"
    assert gce.ingress_decision(s.name, "203.0.113.7")[0] == "deny"


def test_rerun_with_ssh_from_on_a_vm_created_without_it(gce, provider, spec, ssh_spec, offer):
    provider.create(spec(), offer())
    rec = provider.create(ssh_spec(), offer())
    assert rec.adopted is True and fw_calls(gce) == [] and "not applied" in rec.notes[0]


def test_stockout_everywhere_leaves_no_rules_and_no_instances(gce, make_provider, ssh_spec, offer):
    gce.inject("stockout_op", times=None)
    zones = ["us-central1-a", "us-central1-b", "us-east1-c"]
    with pytest.raises(ProvisionError) as e:
        provision([offer(z) for z in zones], lambda o: ssh_spec(), {"gcp": make_provider()}.__getitem__)
    assert [a.outcome for a in e.value.attempts] == ["capacity"] * 3
    assert not gce.instances and ours(gce) == []
    assert len(gce.calls("firewalls.insert")) == 6 and len(gce.calls("firewalls.delete")) == 6
    assert gce.firewall_names(P) == DEFAULTS  # the project's own rules are never touched


def test_operation_timeout_deletes_vm_then_rules(gce, make_provider, ssh_spec, offer, slow_insert):
    gce.inject("op_never_done")
    with pytest.raises(RetryExhaustedError, match="did not finish within 30 s") as e:
        make_provider(op_timeout=30, clock=slow_insert).create(ssh_spec(), offer())
    assert e.value.code == "OPERATION_TIMEOUT" and e.value.cleanup == "verified"
    ids = [r.method_id for r in gce.requests]
    assert not gce.instances and ours(gce) == []
    assert ids.index("compute.instances.delete") < ids.index("compute.firewalls.delete")  # the deny rule goes last


@pytest.mark.parametrize("kind", ["permission_403", "auth_401"])
def test_firewall_insert_refused_is_auth_error_and_nothing_left(gce, provider, ssh_spec, offer, kind):
    gce.inject(kind, method="firewalls.insert", times=None)
    with pytest.raises(AuthError) as e:
        provider.create(ssh_spec(), offer())
    if kind == "permission_403":
        assert "Required 'compute.firewalls.create' permission for 'projects/test-proj/global/firewalls'" in str(e.value)
    assert not gce.calls("instances.insert") and not gce.instances and ours(gce) == []


def test_firewall_quota_on_the_second_rule_removes_the_first(gce, provider, ssh_spec, offer):
    s = ssh_spec()
    gce.inject("quota_op", method="firewalls.insert", metric="FIREWALLS")  # the allow rule's operation fails
    with pytest.raises(QuotaError) as e:
        provider.create(s, offer())
    assert e.value.code == "QUOTA_EXCEEDED:FIREWALLS" and e.value.scope == "cloud"  # firewall quota is project-wide
    assert [r.body["name"] for r in gce.calls("firewalls.insert")] == [f"{s.name}-ssh-allow", f"{s.name}-ssh-deny"]
    assert [r.path.rsplit("/", 1)[1] for r in gce.calls("firewalls.delete")] == [f"{s.name}-ssh-deny"]
    assert not gce.calls("instances.insert") and ours(gce) == []


def test_a_foreign_rule_with_our_name_is_a_conflict(gce, provider, ssh_spec, offer):
    from google.cloud import compute_v1

    s = ssh_spec()
    foreign = {"name": f"{s.name}-ssh-deny", "network": "global/networks/default", "sourceRanges": ["10.0.0.0/8"],
               "allowed": [{"IPProtocol": "tcp", "ports": ["443"]}]}
    clients = gce.sdk_clients()
    clients.firewalls.insert(project=P, firewall_resource=compute_v1.Firewall.from_json(json.dumps(foreign)))
    with pytest.raises(ConflictError, match="not created by trainvm"):
        provider.create(s, offer())
    assert ours(gce) == [f"{s.name}-ssh-deny"] and gce.firewall(f"{s.name}-ssh-deny", P)["sourceRanges"] == ["10.0.0.0/8"]
    assert not gce.calls("instances.insert") and not gce.calls("firewalls.update")
    assert provider.delete(s.name) is False and ours(gce) == [f"{s.name}-ssh-deny"]  # `down` leaves it alone too


def test_down_deletes_the_rules_after_the_vm_and_twice_is_fine(gce, provider, ssh_spec, offer):
    s = ssh_spec()
    provider.create(s, offer())
    gce.requests.clear()
    assert provider.delete(s.name) is True and gce.instance(s.name) is None and ours(gce) == []
    ids = [r.method_id for r in gce.requests]
    assert ids.index("compute.zoneOperations.wait") < ids.index("compute.firewalls.delete")
    assert ids.count("compute.firewalls.delete") == 2 and ids.count("compute.globalOperations.wait") == 2
    gce.requests.clear()
    assert provider.delete(s.name) is False and not gce.calls("firewalls.delete")
    assert gce.firewall_names(P) == DEFAULTS


def test_down_removes_rules_left_by_a_vm_that_is_gone(gce, provider, ssh_spec, offer):
    s = ssh_spec()
    provider.create(s, offer())
    gce.instances.clear()  # e.g. a Spot VM deleted by GCE
    assert provider.find(s.name) is None and provider.list() == []
    assert provider.delete(s.name) is True and ours(gce) == []


def test_down_no_wait_sends_the_rule_deletes(gce, provider, ssh_spec, offer):
    s = ssh_spec()
    provider.create(s, offer())
    gce.requests.clear()
    assert provider.delete(s.name, wait=False) is True
    assert len(gce.calls("firewalls.delete")) == 2 and not gce.calls("globalOperations.wait")


def test_long_vm_name(gce, provider, ssh_spec, offer):
    s = ssh_spec(name="trainvm-" + "a" * 50 + "-1234")  # 63 characters: rule names are cut and hashed
    provider.create(s, offer())
    names = ours(gce)
    assert len(names) == 2 and all(len(n) <= 63 for n in names)
    tag = gce.instance(s.name)["tags"]["items"][0]
    assert len(tag) <= 63 and all(gce.firewall(n, P)["targetTags"] == [tag] for n in names)
    assert gce.ingress_decision(s.name, "203.0.113.7")[0] == "allow" and provider.delete(s.name) and ours(gce) == []
