"""issue 10, Azure: the VM carries a user-assigned identity trainvm creates in its group, and (when it must stop or
delete itself) a role assignment on its own resource group, both created before the VM (issue 36 item 5: nothing bills
until the assignments are made) through the generic resources API and azure-mgmt-authorization against the ARM
emulator, and removed with the group; the role follows lifecycle.on_idle / on_max_run."""

from __future__ import annotations

import pytest

from provisioner.providers.azure.request import ROLES, names, own_identity_id
from provisioner.providers.base import AuthError
from tests.azure.conftest import SSH_KEY

SUB = "00000000-0000-0000-0000-000000000000"


def role_puts(emu):
    return emu.calls("PUT", r"/providers/Microsoft\.Authorization/roleAssignments/[^/]+$")


@pytest.mark.parametrize("idle, on_idle, hours, on_max_run, role", [
    (60, "stop", None, "stop", "Virtual Machine Contributor"),
    (60, "stop", 24, "stop", "Virtual Machine Contributor"),
    (60, "delete", None, "stop", "Contributor"),
    (None, "stop", 5, "delete", "Contributor"),
    (60, "stop", 5, "delete", "Contributor"),
])
def test_identity_and_role_assignment_per_setting(emu, provider, t4_spec, t4, idle, on_idle, hours, on_max_run, role):
    spec = t4_spec.__class__(**{**t4_spec.__dict__, "idle_shutdown_minutes": idle, "on_idle": on_idle,
                                "max_run_hours": hours, "on_max_run": on_max_run})
    n = names(spec.name)
    rec = provider.create(spec, t4)
    vm_req = emu.calls("PUT", rf"/virtualMachines/{n.vm}$")[0]
    ident = own_identity_id(SUB, spec.name)
    assert vm_req.body["identity"] == {"type": "UserAssigned", "userAssignedIdentities": {ident: {}}}
    assert vm_req.body["tags"]["trainvm-identity"] == ident  # the on-VM scripts ask IMDS for this identity's token
    (put,) = role_puts(emu)
    assert put.path.startswith(f"/subscriptions/{SUB}/resourceGroups/{n.rg}/providers/Microsoft.Authorization/")
    assert put.status == 201
    principal = emu.state.identities[ident.lower()]["properties"]["principalId"]
    vm_now = emu.state.get(n.rg, "Microsoft.Compute/virtualMachines", n.vm)
    assert vm_now["body"]["identity"]["userAssignedIdentities"][ident]["principalId"] == principal
    props = put.body["properties"]
    assert props == {
        "roleDefinitionId": f"/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{ROLES[role]}",
        "principalId": principal, "principalType": "ServicePrincipal", "description": props["description"]}
    # issue 36 item 5: identity, then its role, then the VM: nothing bills before the assignment is made
    order = [r.path for r in emu.requests if r.method == "PUT"]
    assert order.index(emu.calls("PUT", r"/userAssignedIdentities/")[0].path) < order.index(put.path) \
        < order.index(vm_req.path)
    assert any(role in note for note in rec.notes)
    # down removes it, and the identity, with the group
    assert provider.delete(spec.name)
    assert emu.state.role_assignments == {} and emu.state.identities == {}


def test_no_role_when_the_vm_never_acts_on_itself(emu, provider, t4_spec, t4):
    spec = t4_spec.__class__(**{**t4_spec.__dict__, "idle_shutdown_minutes": None, "max_run_hours": None})
    provider.create(spec, t4)
    assert role_puts(emu) == []
    assert emu.calls("PUT", r"/virtualMachines/")[0].body["identity"] == {
        "type": "UserAssigned", "userAssignedIdentities": {own_identity_id(SUB, spec.name): {}}}


def test_rerun_finds_the_assignment_done(emu, provider, t4_spec, t4):
    spec = t4_spec.__class__(**{**t4_spec.__dict__, "idle_shutdown_minutes": 60})
    provider.create(spec, t4)
    rec = provider.create(spec, t4)  # the same spec again: the VM exists, the assignment too
    assert rec.adopted and [r.status for r in role_puts(emu)] == [201, 409]
    assert len(emu.state.role_assignments) == 1


def test_caller_without_role_assignment_rights_leaves_nothing_billing(emu, provider, t4_spec, t4):
    """A VM that cannot deallocate itself would bill until someone notices: up fails and deletes the group."""
    spec = t4_spec.__class__(**{**t4_spec.__dict__, "idle_shutdown_minutes": 60})
    emu.state.deny_role_assignments = True
    with pytest.raises(AuthError) as info:
        provider.create(spec, t4)
    assert "Owner, User Access Administrator" in (info.value.hint or "")
    assert names(spec.name).rg not in emu.resource_groups()


def test_deny_assignment_refuses_the_role_before_the_vm_exists(emu, provider, t4_spec, t4):
    """issue 36 item 5: the permissions API lists roleAssignments/write (the caller is Owner), but a deny assignment
    refuses the PUT (403 AuthorizationFailed). No VM (nothing billable) was ever requested; the identity and the
    group are gone."""
    spec = t4_spec.__class__(**{**t4_spec.__dict__, "idle_shutdown_minutes": 60})
    n = names(spec.name)
    emu.deny(f"/subscriptions/{SUB}/resourceGroups/{n.rg}")
    assert emu.state.caller_may("Microsoft.Authorization/roleAssignments/write", f"/subscriptions/{SUB}")
    with pytest.raises(AuthError, match="deny assignment") as info:
        provider.create(spec, t4)
    assert info.value.code == "AuthorizationFailed" and info.value.cleanup == "verified"
    assert [r.status for r in role_puts(emu)] == [403]
    assert emu.calls("PUT", r"/virtualMachines/") == []
    assert n.rg not in emu.resource_groups() and emu.state.identities == {} and emu.state.role_assignments == {}


def test_emulator_refuses_a_vm_naming_a_missing_identity(emu, provider, t4_spec, t4):
    """ARM refuses a VM whose userAssignedIdentities name an identity that does not exist (FailedIdentityOperation):
    the identity must be created first."""
    from azure.core.exceptions import HttpResponseError

    from provisioner.providers.azure.request import ImageRef, vm_body

    n = names(t4_spec.name)
    api = provider.api()
    api.resource.resource_groups.create_or_update(n.rg, {"location": "eastus"})
    body = vm_body(t4_spec, t4, subscription_id=SUB, image=ImageRef("Canonical", "x", "y", "1"),
                   ssh_public_key=SSH_KEY)
    with pytest.raises(HttpResponseError) as e:
        api.compute.virtual_machines.begin_create_or_update(n.rg, n.vm, body).result()
    assert e.value.error.code == "FailedIdentityOperation" and n.identity in e.value.error.message


def test_emulator_rejects_what_arm_rejects(emu, provider, t4_spec, t4):
    from azure.core.exceptions import HttpResponseError, ResourceExistsError

    from provisioner.providers.azure.clients import make_authorization_client

    spec = t4_spec.__class__(**{**t4_spec.__dict__, "idle_shutdown_minutes": None, "max_run_hours": None})
    provider.create(spec, t4)
    client = make_authorization_client(provider.settings, provider.client.credential)
    scope = f"/subscriptions/{SUB}/resourceGroups/{names(spec.name).rg}"
    principal = emu.state.identities[own_identity_id(SUB, spec.name).lower()]["properties"]["principalId"]
    role = f"/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{ROLES['Contributor']}"

    def put(name, **props):
        return client.role_assignments.create(scope, name, {"properties": {"roleDefinitionId": role, "principalId": principal,
                                                                           "principalType": "ServicePrincipal", **props}})

    with pytest.raises(HttpResponseError) as e:
        put("not-a-guid")
    assert e.value.error.code == "InvalidRoleAssignmentId"
    with pytest.raises(HttpResponseError) as e:
        put("11111111-1111-4111-8111-111111111111", roleDefinitionId=role[:-4] + "0000")
    assert e.value.error.code == "RoleDefinitionDoesNotExist"
    with pytest.raises(HttpResponseError) as e:
        put("11111111-1111-4111-8111-111111111111", principalId="22222222-2222-4222-8222-222222222222")
    assert e.value.error.code == "PrincipalNotFound"
    with pytest.raises(HttpResponseError) as e:
        put("11111111-1111-4111-8111-111111111111", principalType="User")
    assert e.value.error.code == "UnmatchedPrincipalType"
    assert put("11111111-1111-4111-8111-111111111111").principal_id == principal
    with pytest.raises(ResourceExistsError) as e:
        put("33333333-3333-4333-8333-333333333333")
    assert e.value.error.code == "RoleAssignmentExists"
    listed = list(client.role_assignments.list_for_scope(scope))
    assert [a.name for a in listed] == ["11111111-1111-4111-8111-111111111111"]
    # a fresh identity without principalType: replication delay
    emu.state.principals[principal]["misses"] = 1
    client.role_assignments.delete(scope, "11111111-1111-4111-8111-111111111111")
    with pytest.raises(HttpResponseError) as e:
        client.role_assignments.create(scope, "44444444-4444-4444-8444-444444444444",
                                       {"properties": {"roleDefinitionId": role, "principalId": principal}})
    assert e.value.error.code == "PrincipalNotFound"
