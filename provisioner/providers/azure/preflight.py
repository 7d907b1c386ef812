"""``up``'s Azure preflight (issue 30): before anything is created, may this caller make what ``up`` makes?

trainvm creates two role assignments for a VM's system-assigned identity (azure_roles): the lifecycle role on the
VM's group ``trainvm-NAME`` (when idle shutdown or max_run_hours is on) and Storage Blob Data Reader on the payload
store's container. Creating them needs ``Microsoft.Authorization/roleAssignments/write``, which Contributor's
notActions take away (``Microsoft.Authorization/*/Write``). Without this check ``up`` created the VM, failed on the
assignment and deleted it again.

The check reads ARM's permissions API, ``GET {scope}/providers/Microsoft.Authorization/permissions`` (api-version
2022-04-01; at the subscription, since the VM's group does not exist yet, and at the payload store's group when it
exists): a list of ``{actions, notActions, dataActions, notDataActions}``, one per role the caller holds at or above
the scope. An action is allowed when the actions of one entry match it (``*`` is a wildcard, case-insensitive) and
the notActions of that same entry do not (Microsoft, "Call Resource Manager to get the user's permissions").
Deny assignments and ABAC conditions are not in that answer: a "yes" can still meet a refusal at create time.
If the read itself fails (a 403 is possible), ``up`` goes on with a warning and claims nothing.

With ``placement.identity.azure`` (azure_identity) no assignment is made; instead the identity must exist (GET) and,
where its role assignments are readable, hold the lifecycle action at the subscription and blob read on the store.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict, cast
from urllib.parse import quote

from provisioner.errors import InputError
from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi
from provisioner.providers.azure.identity import check_identity
from provisioner.providers.azure.store import CONTAINER, account_name, store_group
from provisioner.providers.base import AuthError
from provisioner.providers.capabilities import PreflightResult

if TYPE_CHECKING:
    from provisioner.profile.model import Profile

API = "2022-04-01"
IDENTITY_API = "2023-01-31"
ROLE_WRITE = "Microsoft.Authorization/roleAssignments/write"
BLOB_READ = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read"
#: what the on-VM lifecycle script calls (templates/files/trainvm-lifecycle-azure.sh): deallocate its VM (a scale set
#: node: its instance), or delete its resource group
LIFECYCLE_ACTIONS = {"stop": "Microsoft.Compute/virtualMachines/deallocate/action",
                     "stop-node": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/deallocate/action",
                     "delete": "Microsoft.Resources/subscriptions/resourceGroups/delete"}


class Permission(TypedDict, total=False):
    """One entry of the permissions API, or of a role definition's ``permissions``."""

    actions: list[str]
    notActions: list[str]
    dataActions: list[str]
    notDataActions: list[str]


class AuthzProps(TypedDict, total=False):
    principalId: str  # an identity's
    roleDefinitionId: str  # a role assignment's
    scope: str
    permissions: list[Permission]  # a role definition's


class Entry(Permission, total=False):
    """An item of a listed answer: a permission entry, or a role assignment (``properties``)."""

    properties: AuthzProps


class ApiError(TypedDict, total=False):
    code: str
    message: str


class Json(TypedDict, total=False):
    """An answer of the permissions, role assignments, role definitions or identity API (``send_request``'s JSON;
    the fields read, learn.microsoft.com/rest/api/authorization and /rest/api/managedidentity)."""

    value: list[Entry]
    nextLink: str
    properties: AuthzProps
    error: ApiError


class Unreadable(Exception):
    """A read the preflight needed failed: not checked, never claimed."""


def _match(pattern: str, action: str) -> bool:
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), action, re.I) is not None


def allows(permissions: Sequence[Permission], action: str, *, data: bool = False) -> bool:
    """Whether ``permissions`` (the permissions API's entries, or role definitions' ``permissions``) allow ``action``."""
    def listed(p: Permission, deny: bool) -> list[str]:
        if data:
            return (p.get("notDataActions") if deny else p.get("dataActions")) or []
        return (p.get("notActions") if deny else p.get("actions")) or []

    return any(any(_match(a, action) for a in listed(p, False)) and not any(_match(n, action) for n in listed(p, True))
               for p in permissions)


def _covers(scope: str, target: str) -> bool:
    scope, target = scope.rstrip("/").lower(), target.rstrip("/").lower()
    return target == scope or target.startswith(scope + "/") or scope.startswith("/providers/microsoft.management/")


def _get(api: AzureApi, path: str, version: str, extra: str = "") -> tuple[int, Json]:
    from azure.core.rest import HttpRequest

    client = api.clients().resource
    url = f"{path}?api-version={version}{extra}"
    out: Json = {"value": []}
    while url:
        try:
            resp = client.send_request(HttpRequest("GET", url))
        except Exception as exc:  # noqa: BLE001 - a network failure: not checked
            raise Unreadable(str(exc)) from exc
        try:
            body = cast(Json, resp.json() if resp.text() else {})
        except ValueError:
            body = {}
        if resp.status_code != 200:
            return resp.status_code, body
        if "value" not in body:
            return 200, body
        out["value"].extend(body.get("value") or [])
        url = body.get("nextLink") or ""
    return 200, out


def _fail(status: int, body: Json, what: str) -> Unreadable:
    err = body.get("error") or {}
    return Unreadable(f"{what}: HTTP {status} {err.get('code') or ''} {errs.classify(errs.Failure(status, err.get('code'), err.get('message') or '')).args[0]}".strip())


def _permissions(api: AzureApi, scope: str) -> list[Entry]:
    status, body = _get(api, f"{scope}/providers/Microsoft.Authorization/permissions", API)
    if status != 200:
        raise _fail(status, body, f"reading your permissions at {scope}")
    return list(body.get("value") or [])


def _lifecycle(profile: Profile) -> tuple[str | None, str | None]:
    """(the role trainvm would grant, the action the on-VM script needs), or (None, None) without self-stop."""
    lc = profile.lifecycle
    role = R.lifecycle_role(lc)
    if role is None:
        return None, None
    if role == R.LIFECYCLE_ROLE["delete"]:
        return role, LIFECYCLE_ACTIONS["delete"]
    return role, LIFECYCLE_ACTIONS["stop-node" if profile.hardware.nodes > 1 else "stop"]


def _store_scope(api: AzureApi, region: str) -> str:
    return (f"/subscriptions/{api.subscription_id}/resourceGroups/{store_group(region)}/providers/"
            f"Microsoft.Storage/storageAccounts/{account_name(api.subscription_id, region)}/blobServices/default/"
            f"containers/{CONTAINER}")


def preflight(api: AzureApi, profile: Profile, name: str, regions: list[str]) -> PreflightResult:
    """The check ``up`` runs before it creates anything: ``{cloud, status: ok|unchecked, message}``; raises AuthError
    (exit 3) naming the choices when the caller cannot make what ``up`` makes, InputError for a missing identity."""
    identity = (profile.placement.identity or {}).get("azure")
    try:
        if identity:
            return _identity(api, profile, name, regions, check_identity(identity))
        return _assignments(api, profile, name, regions)
    except Unreadable as exc:
        return {"cloud": "azure", "status": "unchecked",
                "message": f"could not check your Azure permissions ({exc}); `up` goes on and may fail at the role "
                           "assignment (it then deletes what it created)"}


def _assignments(api: AzureApi, profile: Profile, name: str, regions: list[str]) -> PreflightResult:
    sub = f"/subscriptions/{api.subscription_id}"
    role, _ = _lifecycle(profile)
    wanted: list[tuple[str, str]] = []  # (scope the permission is read at, what trainvm grants there)
    if role:
        wanted.append((sub, f"{role} on resource group {R.names(name).rg} (created by `up`: its rights come from the "
                            f"subscription) for idle shutdown / max_run_hours"))

    for region in dict.fromkeys(regions):
        group = api.get_group(store_group(region))
        wanted.append((f"{sub}/resourceGroups/{store_group(region)}" if group is not None else sub,
                       f"Storage Blob Data Reader on the payload store {store_group(region)} (the VM fetches its "
                       "provisioning payload with it)"))
    seen: dict[str, list[Entry]] = {}
    missing = []
    for scope, what in wanted:
        if scope not in seen:
            seen[scope] = _permissions(api, scope)
        if not allows(seen[scope], ROLE_WRITE):
            missing.append(what)
    if missing:
        raise AuthError(
            f"you may not create the role assignments `up` makes for {name} ({ROLE_WRITE} is not among your permissions "
            f"at {api.subscription_id}: Contributor's notActions exclude Microsoft.Authorization/*/Write): "
            + "; ".join(missing) + ". Nothing was created", code="RoleAssignmentNotPermitted", hint=_choices(profile))
    return {"cloud": "azure", "status": "ok",
            "message": f"you may create the role assignments `up` makes ({ROLE_WRITE} at {', '.join(seen)})"}


def _choices(profile: Profile) -> str:
    role, _ = _lifecycle(profile)
    lines = ["choose one:",
             "(a) ask an administrator for Role Based Access Control Administrator (or User Access Administrator, or "
             "Owner) on the subscription: `up` then grants the VM's own identity what it needs, and `down` removes it;",
             "(b) ask an administrator to create one user-assigned identity once and grant it "
             + (f"{role} on the subscription and " if role else "")
             + "Storage Blob Data Reader on the payload store (docs/vm.md \"Azure without role-assignment rights\"), then "
             "set placement.identity: {azure: <its resource id>}; every VM with it can then "
             + ("deallocate (or delete) any VM of the subscription, and " if role else "")
             + "read every payload;",
             "(c) leave Azure out (placement.clouds or --cloud)."]
    if role:
        lines.append("Turning idle shutdown and max_run_hours off does not avoid it: the VM still needs Storage Blob "
                     "Data Reader to fetch its payload, and without self-stop it bills until `trainvm down`.")
    return "\n".join(lines)


def _identity(api: AzureApi, profile: Profile, name: str, regions: list[str], identity: str) -> PreflightResult:
    status, body = _get(api, identity, IDENTITY_API)
    short = identity.rsplit("/", 1)[-1]
    if status == 404:
        raise InputError(f"placement.identity.azure: the user-assigned identity {identity} does not exist (or is in "
                         "another subscription)", hint="`az identity list -o table` shows the identities you can see")
    if status != 200:
        raise _fail(status, body, f"reading the identity {short}")
    principal = (body.get("properties") or {}).get("principalId")
    flt = quote(f"principalId eq '{principal}'")
    status, listed = _get(api, f"/subscriptions/{api.subscription_id}/providers/Microsoft.Authorization/"
                                    "roleAssignments", API, f"&$filter={flt}")
    if status != 200:
        raise _fail(status, listed, f"reading the role assignments of {short}")
    grants: list[tuple[str, list[Permission]]] = []
    for a in listed.get("value") or []:
        props = a.get("properties") or {}
        s2, definition = _get(api, props.get("roleDefinitionId") or "", API)
        if s2 != 200:
            raise _fail(s2, definition, f"reading a role definition of {short}")
        grants.append((props.get("scope") or "", (definition.get("properties") or {}).get("permissions") or []))
    sub = f"/subscriptions/{api.subscription_id}"
    role, action = _lifecycle(profile)
    missing: list[tuple[str, str, str]] = []  # (role, scope, what for)
    if action and not any(_covers(scope, sub) and allows(perms, action) for scope, perms in grants):
        missing.append((str(role), sub, action))

    for region in dict.fromkeys(regions):
        if not any(_covers(scope, _store_scope(api, region)) and allows(perms, BLOB_READ, data=True)
                   for scope, perms in grants):
            missing.append(("Storage Blob Data Reader", f"{sub}/resourceGroups/{store_group(region)}", BLOB_READ))
    if missing:
        raise AuthError(f"the user-assigned identity {short} lacks: "
                        + "; ".join(f"{r} on {sc} (for {why})" for r, sc, why in missing) + ". Nothing was created",
                        code="IdentityRoleMissing", hint="an administrator grants it once: " + "; ".join(
                            f"`az role assignment create --assignee-object-id {principal} --assignee-principal-type "
                            f"ServicePrincipal --role \"{r}\" --scope {sc}`" for r, sc, _ in missing))
    return {"cloud": "azure", "status": "ok",
            "message": f"the user-assigned identity {short} exists and its roles allow "
                       + (f"{action} and " if action else "") + "reading the payload; `up` creates no role assignment"}
