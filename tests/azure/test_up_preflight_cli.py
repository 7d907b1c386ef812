"""Issue 30 (Azure), at the level the user meets it: `trainvm up` through the real azure-mgmt SDKs against the ARM
emulator (tests/emulators/arm*.py) and the shared Azurite for the payload.

- an earlier attempt's resource group still being deleted stops the failover at once (exit 5), instead of every region
  waiting the operation timeout for the same group name;
- the preflight (ARM's permissions API) stops a Contributor-only caller before anything is created;
- a user-assigned identity an administrator made once keeps idle shutdown for such a caller.

What the emulator does not model is said in tests/emulators/arm_permissions.py and arm_roles.py: deny assignments,
conditions (RBAC Administrator's ABAC condition), management-group scopes, role-assignment propagation delays."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.emulators.arm import ArmEmulator
from tests.helpers import payload_stores

REPO = Path(__file__).resolve().parents[2]
T4 = REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHtrainvmTestKeyOnlyForTheEmulator0000000 tester@example"
NAME = "box30"
RG = f"trainvm-{NAME}"


@pytest.fixture
def arm(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    for var in ("TRAINVM_GCE_ENDPOINT", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    key = tmp_path / "id.pub"
    key.write_text(SSH_KEY + "\n")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(key))
    payload_stores(monkeypatch)
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        monkeypatch.setenv("TRAINVM_AZURE_OP_TIMEOUT", "3")
        try:
            yield emu
        finally:
            emu.finish_operations(stuck=True)


@pytest.fixture
def profile(tmp_path):
    """The T4 example with its data over https (a gs:// source rules Azure out: data locality)."""
    def write(extra: str = "") -> str:
        p = tmp_path / "t4.yaml"
        text = T4.read_text().replace("gs://example-ml-data/glue/", "https://example.com/glue/")
        p.write_text(text + extra)
        return str(p)
    return write


def vm_puts(emu):
    return emu.calls("PUT", r"/virtualMachines/")


# ---------------------------------------------------------------------------------------------- group being deleted
def test_group_of_an_earlier_attempt_still_deleting_stops_failover_at_once(cli, arm, profile):
    """An earlier attempt's (or a `trainvm down`'s) deletion of trainvm-NAME is still running. Every region would use
    that same group name and ARM refuses new resources in it (409 ResourceGroupBeingDeleted) until the delete ends:
    one attempt, exit 5 (not ready yet), the message says to wait or run `trainvm down NAME`; no VM PUT, no walk."""
    arm.deleting_group(RG, "eastus", {"trainvm-managed": "true"})
    up = cli("up", profile(), "--yes", "--json", "--cloud", "azure", "--name", NAME)
    assert up.code == 5, up.err
    err = up.json()["error"]
    assert len(err["attempts"]) == 1 and err["attempts"][0]["error_code"] == "ResourceGroupBeingDeleted"
    assert "still being deleted" in err["message"] and "second VM" not in err["message"]
    assert f"trainvm down {NAME}" in err["hint"] and "wait" in err["hint"]
    assert not vm_puts(arm) and not arm.calls("PUT", rf"/resourcegroups/{RG}$")


# ---------------------------------------------------------------------------------------------- preflight
def test_contributor_only_stops_before_anything_is_created_with_the_choices(cli, arm, profile):
    """Before: `up` created the group, VNet, NSG and VM, met 403 on the role assignment and deleted it all (a VM
    billed for minutes). Now the permissions API (Contributor: actions *, notActions Microsoft.Authorization/*/Write)
    says no first: exit 3, no PUT at all (not even the payload store), and the message names the honest choices."""
    arm.caller("Contributor")
    up = cli("up", profile(), "--yes", "--json", "--cloud", "azure", "--name", NAME)
    assert up.code == 3, up.err
    err = up.json()["error"]
    assert "Microsoft.Authorization/roleAssignments/write" in err["message"] and "Nothing was created" in err["message"]
    assert "Virtual Machine Contributor" in err["message"] and "Storage Blob Data Reader" in err["message"]
    hint = err["hint"]
    assert "Role Based Access Control Administrator" in hint and "User Access Administrator" in hint and "Owner" in hint
    assert "placement.identity" in hint and "--cloud" in hint
    assert "bills until `trainvm down`" in hint  # (idle shutdown off is no way out: the payload reader remains)
    assert not arm.calls("PUT") and not arm.calls("POST")
    assert arm.calls("GET", r"/providers/Microsoft\.Authorization/permissions$")


def test_owner_passes_and_the_summary_says_so(cli, arm, profile):
    up = cli("up", profile(), "--yes", "--json", "--cloud", "azure", "--name", NAME)
    assert up.code == 0, up.err
    pre = up.json()["summary"]["preflight"]
    assert pre == [{"cloud": "azure", "status": "ok", "message": pre[0]["message"]}]
    assert "roleAssignments/write" in pre[0]["message"]
    assert arm.calls("PUT", r"/roleAssignments/")  # the VM's identity got its roles, as before


def test_rbac_administrator_on_the_subscription_with_contributor_passes(cli, arm, profile):
    arm.caller("Contributor", "Role Based Access Control Administrator")
    up = cli("up", profile(), "--yes", "--json", "--cloud", "azure", "--name", NAME)
    assert up.code == 0, up.err
    assert up.json()["summary"]["preflight"][0]["status"] == "ok"


def test_unreadable_permissions_warn_and_claim_nothing(cli, arm, profile):
    """A 403 on the permissions read: `up` goes on (the create then meets ARM's own answer), saying it did not check."""
    arm.state.permissions_forbidden = True
    up = cli("up", profile(), "--yes", "--cloud", "azure", "--name", NAME)
    assert up.code == 0, up.err
    assert "could not check your Azure permissions" in up.err and "AuthorizationFailed" in up.err


# ---------------------------------------------------------------------------------------------- user-assigned identity
def _placement(profile, line):
    path = Path(profile())
    text = path.read_text()
    assert "\nplacement:\n" in text
    path.write_text(text.replace("\nplacement:\n", f"\nplacement:\n  {line}\n", 1))
    return str(path)


def test_contributor_with_an_administrators_identity_keeps_idle_shutdown(cli, arm, profile):
    """The administrator made the identity once and granted it Virtual Machine Contributor on the subscription and
    Storage Blob Data Reader on the payload store's group: the Contributor's VM carries that identity (no system
    one), its tag names it for the on-VM scripts, and trainvm sends no role assignment at all."""
    ident = arm.add_identity("ops", "trainvm-vms")
    pid = ident["properties"]["principalId"]
    sub = f"/subscriptions/{arm.subscription_id}"
    arm.grant(pid, "Virtual Machine Contributor")
    arm.grant(pid, "Storage Blob Data Reader", f"{sub}/resourceGroups/trainvm-payload-eastus")
    arm.caller("Contributor")
    up = cli("up", _placement(profile, f"identity: {{azure: '{ident['id']}'}}"), "--yes", "--json", "--cloud", "azure",
             "--name", NAME, "--region", "eastus")
    assert up.code == 0, up.err
    doc = up.json()
    assert doc["summary"]["preflight"][0]["status"] == "ok" and "trainvm-vms" in doc["summary"]["preflight"][0]["message"]
    body = vm_puts(arm)[-1].body
    assert body["identity"] == {"type": "UserAssigned", "userAssignedIdentities": {ident["id"]: {}}}
    assert body["tags"]["trainvm-identity"] == ident["id"]
    assert not arm.calls("PUT", r"/roleAssignments/")
    assert any("user-assigned identity trainvm-vms" in n for n in doc["notes"])


def test_identity_without_the_lifecycle_role_is_named_with_the_admins_command(cli, arm, profile):
    ident = arm.add_identity("ops", "trainvm-vms")
    pid = ident["properties"]["principalId"]
    arm.grant(pid, "Storage Blob Data Reader")  # the payload, but no right to deallocate
    arm.caller("Contributor")
    up = cli("up", _placement(profile, f"identity: {{azure: '{ident['id']}'}}"), "--yes", "--json", "--cloud", "azure",
             "--name", NAME, "--region", "eastus")
    assert up.code == 3, up.err
    err = up.json()["error"]
    assert "Virtual Machine Contributor" in err["message"] and "deallocate/action" in err["message"]
    assert "Storage Blob Data Reader" not in err["message"]
    assert f"az role assignment create --assignee-object-id {pid}" in err["hint"]
    assert not arm.calls("PUT") and not arm.calls("POST")


def test_identity_that_does_not_exist_is_an_input_error(cli, arm, profile):
    missing = f"/subscriptions/{arm.subscription_id}/resourceGroups/ops/providers/Microsoft.ManagedIdentity/" \
              "userAssignedIdentities/nope"
    arm.add_identity("ops", "other")
    up = cli("up", _placement(profile, f"identity: {{azure: '{missing}'}}"), "--yes", "--cloud", "azure",
             "--name", NAME)
    assert up.code == 2, up.err
    assert "does not exist" in up.err and not arm.calls("PUT")


def test_identity_is_checked_by_the_cloud_it_names(cli, profile):
    bad = cli("validate", _placement(profile, "identity: {azure: 'my-identity'}"))
    assert bad.code == 1 and "placement.identity" in bad.out + bad.err and "resource id" in bad.out + bad.err
    gcp = cli("validate", _placement(profile, "identity: {gcp: 'sa@p.iam.gserviceaccount.com'}"))
    assert gcp.code == 1 and "only on azure" in gcp.out + gcp.err
