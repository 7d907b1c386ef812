"""AzureProvider through the real azure-mgmt SDKs against the ARM emulator: the create request,
idempotency (re-runs of a killed `up`), find/list/delete and read_report."""

from __future__ import annotations

import base64
import gzip
import json
import os
import threading
import time

import pytest

from provisioner.errors import CloudError, InputError
from provisioner.providers.azure.provider import AzureProvider
from provisioner.providers.azure.request import names, own_identity_id
from provisioner.providers.base import ConflictError, InvalidRequestError
from provisioner.verify.report import decode_report
from tests.azure.conftest import SSH_KEY, USER_DATA, named

SUB = "00000000-0000-0000-0000-000000000000"
PINNED = "22.04.202610150"


def vm_put(emu, name):
    puts = emu.calls("PUT", rf"/virtualMachines/{name}$")
    assert len(puts) == 1, [r.status for r in puts]
    return puts[0].body


def one_vm(emu):
    return [r for g in emu.resource_groups() for r in emu.resources_in(g) if "/virtualMachines/" in r]


# ---------------------------------------------------------------------------------------------- create
def test_t4_happy_path_request_bodies(emu, provider, t4_spec, t4):
    n = names(t4_spec.name)
    rec = provider.create(t4_spec, t4)

    assert (rec.cloud, rec.region, rec.zone, rec.instance_type, rec.state) == \
        ("azure", "eastus", None, "Standard_NC4as_T4_v3", "RUNNING")
    assert rec.image == f"Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:{PINNED}"
    assert rec.hash == t4_spec.profile_hash[:16] and rec.profile == "bert-finetune" and rec.created
    assert rec.ip and rec.ssh_command == f"ssh trainvm@{rec.ip}" and not rec.adopted
    assert any("az network nsg rule create" in note and n.nsg in note for note in rec.notes)

    body = vm_put(emu, n.vm)
    p = body["properties"]
    owner = {k: body["tags"].pop(k) for k in ("trainvm-attempt", "trainvm-lease-until")}  # the VM names its creator
    ident = own_identity_id(emu.subscription_id, n.vm)  # issue 36 item 5: trainvm's identity, made before the VM
    assert body["location"] == "eastus" and body["tags"] == {**t4_spec.labels, "trainvm-identity": ident}
    assert body["identity"] == {"type": "UserAssigned", "userAssignedIdentities": {ident: {}}}
    assert owner["trainvm-attempt"] == (emu.state.group(n.rg)["tags"] or {})["trainvm-attempt"]
    assert base64.b64decode(p["osProfile"]["customData"], validate=True).decode() == USER_DATA
    assert json.loads(base64.b64decode(p["userData"])) == json.loads(t4_spec.profile_json)
    assert p["storageProfile"]["imageReference"] == {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy",
                                                     "sku": "22_04-lts-gen2", "version": PINNED}
    os_disk = p["storageProfile"]["osDisk"]
    assert (os_disk["deleteOption"], os_disk["diskSizeGB"], os_disk["managedDisk"]["storageAccountType"]) == \
        ("Delete", 150, "StandardSSD_LRS")
    nic = p["networkProfile"]["networkInterfaceConfigurations"][0]
    pip = nic["properties"]["ipConfigurations"][0]["properties"]["publicIPAddressConfiguration"]
    assert nic["properties"]["deleteOption"] == "Delete" and pip["properties"]["deleteOption"] == "Delete"
    assert pip["sku"]["name"] == "Standard" and pip["properties"]["publicIPAllocationMethod"] == "Static"
    assert p["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"] == [
        {"path": "/home/trainvm/.ssh/authorized_keys", "keyData": SSH_KEY}]
    assert p["securityProfile"] == {"securityType": "TrustedLaunch",
                                    "uefiSettings": {"secureBootEnabled": False, "vTpmEnabled": True}}
    assert p["diagnosticsProfile"] == {"bootDiagnostics": {"enabled": True}}
    assert "priority" not in p and "billingProfile" not in p

    nsg = emu.calls("PUT", "/networkSecurityGroups/")[0].body
    assert nsg["properties"]["securityRules"] == []                      # no ssh_from: no inbound rule at all
    group = emu.calls("PUT", "/resourcegroups/")[0]
    lease = {k: group.body["tags"].pop(k) for k in ("trainvm-attempt", "trainvm-lease-until")}  # the attempt's lease
    assert group.body == {"location": "eastus", "tags": t4_spec.labels}
    assert lease["trainvm-attempt"].split(":")[1] == str(os.getpid()) and int(lease["trainvm-lease-until"]) > time.time()
    ids = emu.resources_in(n.rg)
    assert sorted(i.split("/")[-2] for i in ids) == ["disks", "networkInterfaces", "networkSecurityGroups",
                                                     "publicIPAddresses", "virtualMachines", "virtualNetworks"]
    ip = emu.resource(f"/subscriptions/{SUB}/resourceGroups/{n.rg}/providers/Microsoft.Network/publicIPAddresses/{n.pip}")
    assert ip["sku"]["name"] == "Standard" and ip["properties"]["publicIPAllocationMethod"] == "Static"
    assert not emu.calls("PUT", "/networkInterfaces/|/publicIPAddresses/")   # the VM creates its NIC and IP
    assert not emu.calls("POST", "/register")


def test_ssh_from_gives_exactly_one_inbound_rule(emu, provider, t4_spec, t4):
    rec = provider.create(named(t4_spec, "trainvm-ssh-1", ssh_from="203.0.113.7/32"), t4)
    rules = emu.calls("PUT", "/networkSecurityGroups/")[0].body["properties"]["securityRules"]
    assert len(rules) == 1
    r = rules[0]["properties"]
    assert (r["direction"], r["access"], r["protocol"], r["sourceAddressPrefix"], r["destinationPortRange"]) == \
        ("Inbound", "Allow", "Tcp", "203.0.113.7/32", "22")
    assert not any("nsg rule create" in note for note in rec.notes)


@pytest.mark.parametrize("price, expected", [(0.2, 0.2), (None, -1)])
def test_spot_body(emu, provider, t4_spec, t4, price, expected):
    rec = provider.create(named(t4_spec, "trainvm-spot-1", spot=True, max_price_per_hour=price), t4)
    p = vm_put(emu, "trainvm-spot-1")["properties"]
    assert (p["priority"], p["evictionPolicy"], p["billingProfile"]) == ("Spot", "Delete", {"maxPrice": expected})
    assert rec.spot is True


def test_input_problems_stop_before_any_cloud_call(emu, t4_spec, t4, monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(tmp_path / "missing.pub"))
    with pytest.raises(InputError):
        AzureProvider().create(t4_spec, t4)
    monkeypatch.delenv("TRAINVM_SSH_PUBLIC_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(InputError, match="no SSH public key") as err:
        AzureProvider().create(t4_spec, t4)
    assert err.value.exit_code == 2 and "ssh-keygen" in err.value.hint
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa.pub").write_text("ssh-rsa AAAAB3NzaC1yc2E fallback\n")
    big = named(t4_spec, "trainvm-big", user_data="x" * 70_000)
    with pytest.raises(InvalidRequestError, match="87380"):
        AzureProvider().create(big, t4)
    assert emu.requests == []


def test_missing_subscription_and_http_endpoint_are_cloud_errors(emu, monkeypatch):
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID")
    with pytest.raises(CloudError, match="AZURE_SUBSCRIPTION_ID") as err:
        AzureProvider()
    assert err.value.exit_code == 3 and err.value.hint
    with pytest.raises(CloudError, match="https"):
        AzureProvider(subscription_id=SUB, endpoint="http://127.0.0.1:1")


def test_auto_registration_policy_is_not_in_the_pipeline(provider):
    from azure.mgmt.core.policies import ARMAutoResourceProviderRegistrationPolicy

    for client in vars(provider.api()).values():
        pipeline = client._client._pipeline  # private: only to prove trap A8 is closed
        assert not any(isinstance(getattr(p, "_policy", p), ARMAutoResourceProviderRegistrationPolicy)
                       for p in pipeline._impl_policies)


def test_every_management_client_retries_within_the_call_budget():
    """Each client's RetryPolicy stops retrying once a call has used TRAINVM_API_TIMEOUT (``Settings.call_timeout``):
    the compute/network/resource clients, the storage client and the authorization client alike."""
    from azure.core.pipeline.policies import RetryPolicy

    from provisioner.providers.azure.clients import (
        Settings,
        StaticTokenCredential,
        make_authorization_client,
        make_clients,
        make_storage_client,
    )

    settings = Settings(SUB, "", poll_seconds=0.0, op_timeout=1.0, retry_total=2, retry_backoff=0.0, call_timeout=7.0)
    credential = StaticTokenCredential("token")
    clients = {**vars(make_clients(settings, credential)),
               "authorization": make_authorization_client(settings, credential),
               "storage": make_storage_client(settings, credential)}
    timeouts = {name: [p.timeout for p in client._client._pipeline._impl_policies  # private: the pipeline's policies
                       if isinstance(getattr(p, "_policy", p), RetryPolicy)]
                for name, client in clients.items()}
    assert timeouts == {name: [7.0] for name in clients}


# ---------------------------------------------------------------------------------------------- idempotency
def test_same_spec_twice_returns_the_existing_vm(emu, provider, t4_spec, t4):
    first = provider.create(t4_spec, t4)
    again = AzureProvider().create(t4_spec, t4)
    assert again.adopted is True and again.ip == first.ip
    assert len(emu.calls("PUT", "/virtualMachines/")) == 1 and len(one_vm(emu)) == 1


def test_other_profile_hash_is_a_conflict(emu, provider, t4_spec, t4):
    provider.create(t4_spec, t4)
    other = named(t4_spec, t4_spec.name, labels={**t4_spec.labels, "trainvm-hash": "0" * 16})
    with pytest.raises(ConflictError, match="another version"):
        provider.create(other, t4)
    assert len(one_vm(emu)) == 1


def test_rerun_after_up_was_killed_while_the_vm_was_creating(emu, t4_spec, t4, monkeypatch):
    """`up` dies right after ARM accepted the VM PUT; the re-run waits for that VM instead of making another."""
    killed = AzureProvider()
    monkeypatch.setattr(killed.creator, "wait_compute", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    emu.inject("lro_never_done", location="eastus")   # ARM keeps the VM's operation running ...
    with pytest.raises(KeyboardInterrupt):
        killed.create(t4_spec, t4)
    vm = emu.resource(f"/subscriptions/{SUB}/resourceGroups/{names(t4_spec.name).rg}/providers/"
                      f"Microsoft.Compute/virtualMachines/{t4_spec.name}")
    assert vm["properties"]["provisioningState"] == "Creating"
    timer = threading.Timer(0.3, emu.finish_operations, kwargs={"stuck": True})  # ... until it ends while the re-run waits
    timer.start()
    try:
        rec = AzureProvider(poll_seconds=0.02).create(t4_spec, t4)
    finally:
        timer.join()
    assert rec.adopted is True and rec.state == "RUNNING"
    assert len(emu.calls("PUT", "/virtualMachines/")) == 1 and len(one_vm(emu)) == 1


def test_rerun_replaces_a_failed_leftover(emu, provider, t4_spec, t4, monkeypatch):
    """A killed `up` left a Failed VM (and its group): the re-run deletes the group and creates it again."""
    from provisioner.providers.base import CapacityError

    emu.inject("allocation_failed_lro", location="eastus")
    monkeypatch.setattr(provider.lease, "cleanup", lambda *a: None)  # the process "died" before cleaning up
    with pytest.MonkeyPatch.context() as dead, pytest.raises(CapacityError):
        dead.setattr("provisioner.providers.azure.create.os.getpid", lambda: 2 ** 22 + 1)  # no such pid: its lease is dead
        provider.create(t4_spec, t4)
    rg = names(t4_spec.name).rg
    assert emu.resource(f"/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/"
                        f"{t4_spec.name}")["properties"]["provisioningState"] == "Failed"
    rec = AzureProvider().create(t4_spec, t4)
    assert rec.state == "RUNNING" and not rec.adopted
    assert emu.calls("DELETE", f"/resourcegroups/{rg}$") and len(one_vm(emu)) == 1


def test_leftover_group_in_another_region_is_moved(emu, provider, t4_spec, t4, offers):
    """A group left in westus2 (interrupted attempt, no VM yet) must not block an attempt in eastus."""
    rg = names(t4_spec.name).rg
    rc = emu.clients()[0]
    rc.resource_groups.create_or_update(rg, {"location": "westus2", "tags": t4_spec.labels})
    rec = provider.create(t4_spec, t4)
    assert rec.region == "eastus" and emu.resource_groups() == [rg]


def test_foreign_group_is_never_touched(emu, provider, t4_spec, t4):
    rg = names(t4_spec.name).rg
    emu.clients()[0].resource_groups.create_or_update(rg, {"location": "eastus", "tags": {"team": "x"}})
    with pytest.raises(ConflictError, match="not managed by trainvm"):
        provider.create(t4_spec, t4)
    with pytest.raises(ConflictError):
        provider.delete(t4_spec.name)
    assert emu.resource_groups() == [rg] and not emu.calls("DELETE")


# ---------------------------------------------------------------------------------------------- find / list / down
def test_find_and_down_twice(emu, provider, t4_spec, t4):
    assert provider.find(t4_spec.name) is None
    rec = provider.create(t4_spec, t4)
    found = provider.find(t4_spec.name)
    assert (found.name, found.state, found.ip, found.image, found.hash) == (rec.name, "RUNNING", rec.ip, rec.image, rec.hash)
    assert provider.delete(t4_spec.name) is True
    assert emu.resource_groups() == [] and provider.find(t4_spec.name) is None
    assert provider.delete(t4_spec.name) is False


def test_down_without_waiting(emu, provider, t4_spec, t4):
    provider.create(t4_spec, t4)
    emu.polls = 10**9
    assert provider.delete(t4_spec.name, wait=False) is True
    assert emu.resource_groups() == [names(t4_spec.name).rg]   # still deleting
    emu.finish_operations()
    assert emu.resource_groups() == []


def test_list_several_vms(emu, provider, t4_spec, offers):
    provider.create(named(t4_spec, "trainvm-a"), offers[("eastus", "Standard_NC4as_T4_v3")])
    provider.create(named(t4_spec, "trainvm-b", spot=True), offers[("westus2", "Standard_NC8as_T4_v3")])
    provider.create(named(t4_spec, "trainvm-c"), offers[("eastus2", "Standard_NC4as_T4_v3")])
    emu.set_power_state(names("trainvm-c").rg, "trainvm-c", "deallocated")   # the idle watchdog powered it off
    before = len(emu.requests)
    vms = provider.list()
    assert len(emu.requests) - before == 3  # one VM list (statusOnly) + one public IP list + one scale-set list
    assert [(v.name, v.region, v.instance_type, v.state) for v in vms] == [
        ("trainvm-a", "eastus", "Standard_NC4as_T4_v3", "RUNNING"),
        ("trainvm-b", "westus2", "Standard_NC8as_T4_v3", "RUNNING"),
        ("trainvm-c", "eastus2", "Standard_NC4as_T4_v3", "DEALLOCATED")]
    assert all(v.ip and v.image.endswith(PINNED) and v.created and v.hash == t4_spec.labels["trainvm-hash"] for v in vms)
    assert [v.spot for v in vms] == [False, True, False]
    assert [v.to_json()["zone"] for v in vms] == [None, None, None]


# ---------------------------------------------------------------------------------------------- read_report
REPORT = {"schema": 1, "status": "ready", "gpus": [{"name": "Tesla T4", "memory_mib": 15360}], "driver": "550.127.05",
          "cuda_runtime": "12.4", "python": "3.11.9", "packages": {"torch": "2.4.1+cu124"}}


def test_read_report_via_run_command(emu, provider, t4_spec, t4):
    rec = provider.create(t4_spec, t4)
    rg = names(rec.name).rg
    emu.set_run_command_output(rg, rec.name, json.dumps(REPORT), "")
    report, profile = provider.read_report(rec.name)
    assert report == decode_report(REPORT) and report.driver == "550.127.05"
    assert profile == json.loads(t4_spec.profile_json)
    assert "report.json" in emu.run_commands[-1]["script"][0]

    def gz(script):  # what the real command prints: gzip + base64 (Run Command keeps only 4 KiB)
        assert "gzip" in script[0] and "base64" in script[0]
        return base64.b64encode(gzip.compress(json.dumps({**REPORT, "notes": ["x" * 20_000]}).encode())).decode()
    emu.set_run_command_output(rg, rec.name, gz)
    assert provider.read_report(rec.name)[0].notes == ("x" * 20_000,)


def test_read_report_falls_back_to_the_serial_log(emu, provider, t4_spec, t4):
    rec = provider.create(t4_spec, t4)
    rg = names(rec.name).rg
    old = base64.b64encode(json.dumps({"status": "running:driver"}).encode()).decode()
    new = base64.b64encode(json.dumps(REPORT).encode()).decode()
    emu.set_serial_log(rg, rec.name, f"[ 1.0] boot\nTRAINVM_STATUS=driver\nTRAINVM_REPORT={old}\n"
                                     f"cloud-init[812]: TRAINVM_REPORT={new}\n[ 9.9] done\n")
    emu.set_run_command_output(rg, rec.name, "")               # no report file yet via Run Command ...
    assert provider.read_report(rec.name)[0] == decode_report(REPORT)
    emu.set_power_state(rg, rec.name, "stopped")               # ... or the VM is not running (409)
    report, profile = provider.read_report(rec.name)
    assert report == decode_report(REPORT) and profile["name"] == "bert-finetune"
    emu.set_serial_log(rg, rec.name, "nothing yet\n")
    assert provider.read_report(rec.name) == (None, json.loads(t4_spec.profile_json))
    assert provider.read_report("trainvm-nope") == (None, None)


def test_create_speed(emu, provider, t4_spec, offers):
    """Per-create wall time against the emulator (polling 0), averaged over a few creates."""
    provider.create(named(t4_spec, "trainvm-warm"), offers[("eastus", "Standard_NC4as_T4_v3")])
    start, count = time.perf_counter(), 5
    for i in range(count):
        provider.create(named(t4_spec, f"trainvm-speed-{i}"), offers[("eastus", "Standard_NC4as_T4_v3")])
    per_create = (time.perf_counter() - start) / count
    print(f"\naverage create() against the emulator: {per_create * 1000:.0f} ms")
    assert per_create < 2.0
