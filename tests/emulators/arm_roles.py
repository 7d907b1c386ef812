"""Microsoft.Authorization/roleAssignments and system-assigned identities for the ARM emulator (issue 10).
Mixed into arm_state.State (runs under ArmEmulator's lock).

Modelled:
- a VM (or scale set) PUT with ``identity.type`` UserAssigned must name existing user-assigned identities
  (arm_permissions.py); ARM fills each one's principalId and clientId (``give_identity``).
- a VM PUT with ``identity.type`` SystemAssigned gets ``identity.principalId`` (a new GUID, kept across
  re-PUTs) and ``tenantId``; the principal exists while the VM does (deleting the VM deletes it).
- PUT/GET/DELETE ``{resource group}/providers/Microsoft.Authorization/roleAssignments/{name}`` and the list at
  that scope. Checks, with ARM's codes: the name must be a GUID (400 InvalidRoleAssignmentId); body schema
  (properties.roleDefinitionId and principalId required, principalType an enum); the role definition id must
  be ``/subscriptions/{this sub}/providers/Microsoft.Authorization/roleDefinitions/{a built-in GUID}`` (400
  RoleDefinitionDoesNotExist); the principal must exist (400 PrincipalNotFound) and match principalType (400
  UnmatchedPrincipalType); a principal created moments ago without principalType -> PrincipalNotFound
  (replication delay: ``replication_misses`` PUTs fail first); the same role + principal at the same scope
  already assigned -> 409 RoleAssignmentExists (also for a repeated PUT of the same name); a missing resource
  group -> 404 ResourceGroupNotFound; a deny assignment (``ArmEmulator.deny``, arm_permissions.py) covering the
  assignment -> 403 AuthorizationFailed even though the caller's roles allow it; ``deny_role_assignments`` -> 403
  AuthorizationFailed (a caller without
  Microsoft.Authorization/roleAssignments/write; also derived from the caller's roles, arm_permissions.py).
- deleting the resource group removes the role assignments scoped to it.
- the same at a storage container's scope (arm_storage.py routes it; the container must exist).
Not modelled: role definitions beyond the built-in ids below, custom roles, conditions, scopes other than
a resource group or a storage container, and enforcement (the emulator never checks what a principal's token may do).
"""
from __future__ import annotations

import re
import uuid

from . import arm_validate as V
from .arm_faults import rg_not_found
from .arm_validate import STR, ArmError, Enum, Obj

TENANT = "72f988bf-0000-4000-8000-000000000001"
ROLE_T = "Microsoft.Authorization/roleAssignments"
BUILT_IN_ROLES = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
    "acdd72a7-3385-48ef-bd42-f606fba81ae7": "Reader",
    "9980e02c-c2be-4d73-94e8-173b1dc7cf3c": "Virtual Machine Contributor",
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": "User Access Administrator",
    "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1": "Storage Blob Data Reader",
}
API_VERSIONS = ("2015-07-01", "2018-01-01-preview", "2018-09-01-preview", "2020-04-01-preview", "2022-04-01")
GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
ROLE_ASSIGNMENT = Obj("RoleAssignmentCreateParameters", {"properties": Obj("RoleAssignmentProperties", {
    "roleDefinitionId": STR, "principalId": STR, "description": STR, "condition": STR, "conditionVersion": STR,
    "delegatedManagedIdentityResourceId": STR,
    "principalType": Enum("PrincipalType", "User", "Group", "ServicePrincipal", "ForeignGroup", "Device")},
    required=("roleDefinitionId", "principalId"),
    readonly=("scope", "createdOn", "updatedOn", "createdBy", "updatedBy"))},
    required=("properties",), readonly=("id", "name", "type"))


class RolesMixin:
    # set by State.__init__: self.principals {id: {"type", "misses"}}, self.role_assignments {id.lower(): rec}
    deny_role_assignments = False
    replication_misses = 0

    # ------------------------------------------------------------------ identities
    def give_identity(self, rec, old):
        ident = rec["body"].get("identity")
        kind = ((ident or {}).get("type") or "").replace(" ", "").lower()
        if "userassigned" in kind:
            # VirtualMachineIdentity.userAssignedIdentities (learn.microsoft.com/rest/api/compute/virtual-machines/
            # create-or-update#virtualmachineidentity): keys are identity ids, the values {} in a PUT; ARM fills the
            # read-only principalId and clientId. An identity that does not exist is refused (400
            # FailedIdentityOperation; the message as quoted in github.com/Azure/azure-policy/issues/1311).
            users = {}
            for uid in ident.get("userAssignedIdentities") or {}:
                found = self.identities.get(uid.lower())
                if found is None:
                    raise ArmError(400, "FailedIdentityOperation", f"Identity operation for resource '{rec['id']}' "
                                   "failed with error 'Failed to perform resource identity operation. Status: "
                                   f"'BadRequest'. Response: '{{\"error\":{{\"code\":\"BadRequest\",\"message\":"
                                   f"\"Resource '{uid}' was not found.\"}}}}'.'.")
                users[uid] = {"principalId": found["properties"]["principalId"],
                              "clientId": found["properties"]["clientId"]}
            ident["userAssignedIdentities"] = users
        if "systemassigned" not in kind:
            return
        was = ((old or {}).get("body") or {}).get("identity") or {}
        pid = was.get("principalId") or str(uuid.uuid4())
        ident.update(principalId=pid, tenantId=TENANT)
        self.principals.setdefault(pid, {"type": "ServicePrincipal", "misses": self.replication_misses})

    def drop_identity(self, rec):
        pid = ((rec["body"].get("identity") or {}).get("principalId"))
        self.principals.pop(pid, None)  # assignments naming it stay, as in Azure ("Identity not found")

    # ------------------------------------------------------------------ role assignments
    def role_scope(self, rg):
        return f"/subscriptions/{self.sub}/resourceGroups/{rg}"

    def role_assignment(self, method, rg, name, body, api, scope=None):
        """``scope``: a resource under the group (a storage container, arm_storage.py); None: the group itself."""
        if api not in API_VERSIONS:
            raise ArmError(400, "NoRegisteredProviderFound", f"No registered resource provider found for location "
                           f"'global' and API version '{api}' for type 'roleAssignments'.")
        if self.group(rg, required=False) is None:
            raise rg_not_found(rg)
        scope = scope or self.role_scope(self.group(rg)["name"])
        if name is None:
            if method != "GET":
                raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")
            return 200, {"value": [self._render_role(r) for r in self.role_assignments.values()
                                   if r["scope"].lower() == scope.lower()]}
        if not GUID.match(name):
            raise ArmError(400, "InvalidRoleAssignmentId", f"The role assignment ID '{name}' is not valid. The role "
                           "assignment ID must be a GUID.")
        rid = f"{scope}/providers/{ROLE_T}/{name}"
        rec = self.role_assignments.get(rid.lower())
        if method == "GET":
            if rec is None:
                raise ArmError(404, "RoleAssignmentNotFound", f"The role assignment '{name}' is not found.")
            return 200, self._render_role(rec)
        if method == "DELETE":
            if rec is None:
                return 204, None
            del self.role_assignments[rid.lower()]
            return 200, self._render_role(rec)
        if method != "PUT":
            raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")
        deny = self.deny_assignment_for(f"{ROLE_T}/write", rid)  # arm_permissions.py
        if deny is not None:
            raise deny
        if self.deny_role_assignments or not self.caller_may(f"{ROLE_T}/write", scope):  # arm_permissions.py
            raise ArmError(403, "AuthorizationFailed", "The client 'trainvm-user' with object id "
                           "'00000000-0000-0000-0000-00000000cafe' does not have authorization to perform action "
                           f"'{ROLE_T}/write' over scope '{rid}' or the scope is invalid. If access was recently "
                           "granted, please refresh your credentials.")
        p = V.validate(ROLE_ASSIGNMENT, body if isinstance(body, dict) else {})["properties"]
        role_id, pid, ptype = p["roleDefinitionId"], p["principalId"], p.get("principalType")
        m = re.fullmatch(rf"/subscriptions/{re.escape(self.sub)}/providers/Microsoft\.Authorization/"
                         r"roleDefinitions/([0-9a-fA-F-]{36})", role_id)
        if not m or m.group(1).lower() not in BUILT_IN_ROLES:
            raise ArmError(400, "RoleDefinitionDoesNotExist", f"The specified role definition with ID "
                           f"'{role_id.rsplit('/', 1)[-1]}' does not exist.")
        principal = self.principals.get(pid)
        if principal is not None and ptype is None and principal["misses"] > 0:
            principal["misses"] -= 1
            principal = None
        if principal is None:
            raise ArmError(400, "PrincipalNotFound", f"Principal {pid.replace('-', '')} does not exist in the "
                           f"directory {TENANT}. Check that you have the correct principal ID. If you are creating "
                           "this principal and then immediately assigning a role, this error might be related to a "
                           "replication delay. In this case, set the role assignment principalType property to a "
                           "value, such as ServicePrincipal, User, or Group.  See https://aka.ms/docs-principaltype")
        if ptype and ptype.lower() != principal["type"].lower():
            raise ArmError(400, "UnmatchedPrincipalType", f"The PrincipalId '{pid.replace('-', '')}' has type "
                           f"'{principal['type']}' , which is different from specified PrincipalType '{ptype}'.")
        for other in self.role_assignments.values():
            if other["scope"].lower() == scope.lower() and other["principalId"] == pid and \
                    other["roleDefinitionId"].lower() == role_id.lower():
                raise ArmError(409, "RoleAssignmentExists", "The role assignment already exists.")
        rec = {"id": rid, "name": name, "scope": scope, "roleDefinitionId": role_id, "principalId": pid,
               "principalType": principal["type"], "description": p.get("description")}
        self.role_assignments[rid.lower()] = rec
        return 201, self._render_role(rec)

    def drop_role_assignments(self, rg):
        scope = self.role_scope(rg).lower()
        for key in [k for k, r in self.role_assignments.items()
                    if r["scope"].lower() == scope or r["scope"].lower().startswith(scope + "/")]:
            del self.role_assignments[key]

    @staticmethod
    def _render_role(rec):
        return {"id": rec["id"], "name": rec["name"], "type": ROLE_T, "properties": {
            "roleDefinitionId": rec["roleDefinitionId"], "principalId": rec["principalId"],
            "principalType": rec["principalType"], "scope": rec["scope"], "description": rec["description"],
            "condition": None, "conditionVersion": None, "createdOn": "2026-11-22T10:00:00.0000000Z",
            "updatedOn": "2026-11-22T10:00:00.0000000Z", "createdBy": None, "updatedBy": None,
            "delegatedManagedIdentityResourceId": None}}
