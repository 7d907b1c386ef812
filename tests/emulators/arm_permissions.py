"""What a caller may do, built-in role definitions and user-assigned identities, for the ARM emulator (issue 30).
State mixin (``PermissionsMixin``, under ArmEmulator's lock) and routes (``AuthzRoutes``, mixed into ArmRouter).

Modelled:
- the caller's role assignments (``State.caller_roles``: [(role name, scope)], default Owner on the subscription,
  which every older test assumes) and ``GET {scope}/providers/Microsoft.Authorization/permissions`` at the
  subscription and at a resource group (404 ResourceGroupNotFound for a missing group): one ``{actions, notActions,
  dataActions, notDataActions}`` entry per role assigned at or above the scope, as ARM answers it (Microsoft: "request
  a user's permissions on a subscription"; an action is allowed when one entry's actions match it and the same
  entry's notActions do not). ``State.permissions_forbidden``: that GET answers 403 AuthorizationFailed.
- enforcement of ``Microsoft.Authorization/roleAssignments/write`` on role-assignment PUTs from those roles
  (arm_roles.py calls ``caller_may``): a Contributor-only caller gets ARM's 403 AuthorizationFailed there.
- ``GET /subscriptions/S/providers/Microsoft.Authorization/roleDefinitions/{id}`` for the built-in roles below, and
  ``GET /subscriptions/S/providers/Microsoft.Authorization/roleAssignments?$filter=principalId eq '{id}'`` (every
  assignment of that principal in the subscription, any scope).
- ``Microsoft.ManagedIdentity/userAssignedIdentities`` PUT/GET/DELETE in a resource group (principalId, clientId,
  tenantId; the principal exists for role assignments while the identity does). ``add_identity``/``grant`` in
  ArmEmulator plant an administrator's identity and role assignments.
Built-in role definitions: actions/notActions/dataActions as Microsoft's built-in roles page lists them
(MicrosoftDocs azure-docs articles/role-based-access-control/built-in-roles.md, 2023-08 revision), abridged to
the entries that decide trainvm's questions (Virtual Machine Contributor: its Compute/Network entries).
- deny assignments (``State.deny_assignments``, planted with ``ArmEmulator.deny``): "Deny assignments block users
  from performing specific Azure resource actions even if a role assignment grants them access"
  (learn.microsoft.com/azure/role-based-access-control/deny-assignments); they are not in the permissions answer
  (it lists the roles' actions), so a caller the permissions API allows still meets 403 AuthorizationFailed, with
  ARM's error document ``{"error": {"code", "message"}}`` (learn.microsoft.com/azure/azure-resource-manager/
  troubleshooting/common-deployment-errors) and the "has permission ...; however, the access is denied because of
  the deny assignment with name '...' and Id '...' at scope '...'" text of Microsoft's "Troubleshoot Azure RBAC"
  page (learn.microsoft.com/azure/role-based-access-control/troubleshooting). Only role-assignment writes consult
  them here (arm_roles.py); excluded principals and the deny list's notActions are not modelled.
- deleting a resource group deletes the user-assigned identities in it (and their principals).
Not modelled: ABAC conditions (Role Based Access Control Administrator's default condition that
limits which roles it may assign), management-group scopes, custom roles, ``$filter=atScope()``, classic
administrators, role propagation delay, the caller's right to assign a user-assigned identity to a VM
(``userAssignedIdentities/assign/action``, in Contributor's ``*``), and a VM PUT naming an identity that does not
exist (ARM refuses it; the emulator accepts it).
"""
from __future__ import annotations

import re
import uuid

from .arm_faults import rg_not_found
from .arm_validate import ArmError

AUTHZ = "Microsoft.Authorization"
UAI_T = "Microsoft.ManagedIdentity/userAssignedIdentities"
ROLE_DEFINITIONS = {
    "Owner": ("8e3af657-a8ff-443c-a75c-2fe8c4bcb635", {"actions": ["*"]}),
    "Contributor": ("b24988ac-6180-42a0-ab88-20f7382dd24c", {"actions": ["*"], "notActions": [
        "Microsoft.Authorization/*/Delete", "Microsoft.Authorization/*/Write",
        "Microsoft.Authorization/elevateAccess/Action", "Microsoft.Blueprint/blueprintAssignments/write",
        "Microsoft.Blueprint/blueprintAssignments/delete", "Microsoft.Compute/galleries/share/action"]}),
    "Reader": ("acdd72a7-3385-48ef-bd42-f606fba81ae7", {"actions": ["*/read"]}),
    "Virtual Machine Contributor": ("9980e02c-c2be-4d73-94e8-173b1dc7cf3c", {"actions": [
        "Microsoft.Authorization/*/read", "Microsoft.Compute/availabilitySets/*", "Microsoft.Compute/locations/*",
        "Microsoft.Compute/virtualMachines/*", "Microsoft.Compute/virtualMachineScaleSets/*",
        "Microsoft.Compute/disks/write", "Microsoft.Compute/disks/read", "Microsoft.Compute/disks/delete",
        "Microsoft.Network/networkInterfaces/*", "Microsoft.Network/publicIPAddresses/read",
        "Microsoft.Resources/subscriptions/resourceGroups/read"]}),
    "User Access Administrator": ("18d7d88d-d35e-4fb5-a5c3-7773c20a72d9", {"actions": [
        "*/read", "Microsoft.Authorization/*", "Microsoft.Support/*"]}),
    "Role Based Access Control Administrator": ("f58310d9-a9f6-439a-9e8d-f62e7b41a168", {"actions": [
        "Microsoft.Authorization/roleAssignments/write", "Microsoft.Authorization/roleAssignments/delete", "*/read",
        "Microsoft.Support/*"]}),
    "Storage Blob Data Reader": ("2a2b9908-6ea1-4ae2-8e65-a410df84e7d1", {"actions": [
        "Microsoft.Storage/storageAccounts/blobServices/containers/read",
        "Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action"],
        "dataActions": ["Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read"]}),
}
BY_ID = {guid: name for name, (guid, _) in ROLE_DEFINITIONS.items()}


def _entry(perms):
    return {k: list(perms.get(k, [])) for k in ("actions", "notActions", "dataActions", "notDataActions")}


def _match(pattern, action):
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), action, re.I) is not None


def allowed(entries, action):
    return any(any(_match(a, action) for a in e["actions"]) and not any(_match(n, action) for n in e["notActions"])
               for e in entries)


def _covers(scope, target):
    scope, target = scope.rstrip("/").lower(), target.rstrip("/").lower()
    return target == scope or target.startswith(scope + "/")


class PermissionsMixin:
    permissions_forbidden = False

    @property
    def caller_roles(self):
        if not hasattr(self, "_caller_roles"):
            self._caller_roles = [("Owner", f"/subscriptions/{self.sub}")]
        return self._caller_roles

    @caller_roles.setter
    def caller_roles(self, value):
        self._caller_roles = list(value)

    @property
    def identities(self):
        if not hasattr(self, "_identities"):
            self._identities = {}
        return self._identities

    @property
    def deny_assignments(self):
        if not hasattr(self, "_deny_assignments"):
            self._deny_assignments = []
        return self._deny_assignments

    def deny_assignment_for(self, action, target):
        """The 403 a deny assignment covering ``target`` with ``action`` among its actions gives, else None."""
        for d in self.deny_assignments:
            if _covers(d["scope"], target) and any(_match(a, action) for a in d["actions"]):
                return ArmError(403, "AuthorizationFailed", "The client 'trainvm-user' with object id "
                                f"'00000000-0000-0000-0000-00000000cafe' has permission to perform action '{action}' on "
                                f"scope '{target}'; however, the access is denied because of the deny assignment with "
                                f"name '{d['name']}' and Id '{d['id']}' at scope '{d['scope']}'.")
        return None

    def drop_identities(self, rg):
        prefix = f"/subscriptions/{self.sub}/resourcegroups/{rg}/".lower()
        for key in [k for k in self.identities if k.startswith(prefix)]:
            self.principals.pop(self.identities.pop(key)["properties"]["principalId"], None)

    def caller_permissions(self, scope):
        return [_entry(ROLE_DEFINITIONS[name][1]) for name, at in self.caller_roles if _covers(at, scope)]

    def caller_may(self, action, scope):
        return allowed(self.caller_permissions(scope), action)

    def role_definition(self, guid):
        name = BY_ID.get(guid.lower())
        if name is None:
            raise ArmError(404, "RoleDefinitionDoesNotExist", f"The specified role definition with ID '{guid}' does "
                           "not exist.")
        return {"id": f"/subscriptions/{self.sub}/providers/{AUTHZ}/roleDefinitions/{guid}", "name": guid,
                "type": f"{AUTHZ}/roleDefinitions", "properties": {
                    "roleName": name, "type": "BuiltInRole", "description": name, "assignableScopes": ["/"],
                    "permissions": [_entry(ROLE_DEFINITIONS[name][1])]}}

    # ------------------------------------------------------------------ user-assigned identities
    def identity_id(self, rg, name):
        return f"/subscriptions/{self.sub}/resourceGroups/{rg}/providers/{UAI_T}/{name}"

    def identity(self, method, rg, name, body):
        g = self.group(rg, required=False)
        if g is None:
            raise rg_not_found(rg)
        key = self.identity_id(g["name"], name).lower()
        rec = self.identities.get(key)
        if method == "GET":
            if rec is None:
                raise ArmError(404, "ResourceNotFound", f"The Resource '{UAI_T}/{name}' under resource group '{rg}' "
                               "was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix")
            return 200, rec
        if method == "DELETE":
            if rec is None:
                return 204, None
            del self.identities[key]
            self.principals.pop(rec["properties"]["principalId"], None)
            return 200, None
        if method != "PUT":
            raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")
        body = body if isinstance(body, dict) else {}
        if not body.get("location"):
            raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
        created = rec is None
        rec = rec or {"id": self.identity_id(g["name"], name), "name": name, "type": UAI_T, "properties": {
            "tenantId": "72f988bf-0000-4000-8000-000000000001", "principalId": str(uuid.uuid4()),
            "clientId": str(uuid.uuid4())}}
        rec.update(location=body["location"], tags=body.get("tags") or {})
        self.identities[key] = rec
        self.principals.setdefault(rec["properties"]["principalId"], {"type": "ServicePrincipal", "misses": 0})
        return (201 if created else 200), rec


class AuthzRoutes:
    """Routes for ArmRouter: permissions (subscription / resource group), role definitions, role assignments listed
    by principal, user-assigned identities."""

    def _authz_route(self, method, s, ls, q, body):
        st = self.state
        if ls[:1] == ["resourcegroups"] and len(s) == 5 and ls[2:5] == ["providers", "microsoft.authorization",
                                                                         "permissions"]:
            if st.group(s[1], required=False) is None:
                raise rg_not_found(s[1])
            return self._permissions(method, f"/subscriptions/{st.sub}/resourceGroups/{s[1]}")
        if ls[:1] == ["resourcegroups"] and len(s) == 6 and ls[2:5] == ["providers", "microsoft.managedidentity",
                                                                         "userassignedidentities"]:
            status, out = st.identity(method, s[1], s[5], body)
            return status, {}, out
        if ls[:2] != ["providers", "microsoft.authorization"] or method != "GET":
            return None
        if ls[2:] == ["permissions"]:
            return self._permissions(method, f"/subscriptions/{st.sub}")
        if len(ls) == 4 and ls[2] == "roledefinitions":
            return 200, {}, st.role_definition(s[3])
        if ls[2:] == ["roleassignments"]:
            m = re.fullmatch(r"\s*principalId\s+eq\s+'([^']+)'\s*", q.get("$filter") or "")
            if not m:
                raise ArmError(400, "UnsupportedQuery", "The emulator lists role assignments by principalId only.")
            return 200, {}, {"value": [st._render_role(r) for r in st.role_assignments.values()
                                       if r["principalId"] == m.group(1)]}
        return None

    def _permissions(self, method, scope):
        st = self.state
        if method != "GET":
            raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")
        if st.permissions_forbidden:
            raise ArmError(403, "AuthorizationFailed", "The client 'trainvm-user' with object id "
                           "'00000000-0000-0000-0000-00000000cafe' does not have authorization to perform action "
                           f"'{AUTHZ}/permissions/read' over scope '{scope}' or the scope is invalid.")
        return 200, {}, {"value": st.caller_permissions(scope)}
