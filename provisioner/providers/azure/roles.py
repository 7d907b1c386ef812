"""The VM's identity and its role assignments (issue 10; issue 36 item 5): the user-assigned identity trainvm creates
for a VM (``NAME-identity`` in its group, ``ensure_identity``), the role that lets the VM stop or delete itself
(bodies in ``azure_request``) and Storage Blob Data Reader on the payload store's container.

Order: identity -> lifecycle role -> payload reader -> (only then) the VM or scale set, which references the identity.
Nothing billable exists until trainvm knows the VM will be able to read its payload and stop itself: a refused
assignment (no right, or a deny assignment: the permissions API lists the action, the PUT answers 403
AuthorizationFailed) is an AuthError before any compute PUT, and the create's cleanup deletes the group (identity,
network, the lifecycle assignment with it). The payload reader is scoped outside the group (the shared container), so
it is created last, and whatever deletes the VM's group removes it first (``revoke_payload_reader``).

Older trainvm VMs carry a system-assigned identity; adopting one grants its principal as before (``principal_of``).
Idempotent: assignment names are deterministic GUIDs, ``RoleAssignmentExists`` counts as done, a re-PUT identity
keeps its principal. ``PrincipalNotFound`` (a fresh identity not replicated yet; rare with principalType set) is
retried for at most PRINCIPAL_WAIT_SECONDS. Creating assignments needs Owner, User Access Administrator or Role Based
Access Control Administrator.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi, wire
from provisioner.providers.azure.arm import Arm
from provisioner.providers.azure.identity import user_identity
from provisioner.providers.azure.store import BLOB_DATA_READER, CONTAINER, account_name, store_group
from provisioner.providers.base import AuthError, LaunchSpec, ProviderError
from provisioner.providers.poll import poll
from provisioner.providers.store import PAYLOAD_LABEL, PayloadRef

PRINCIPAL_WAIT_SECONDS = 120.0  # Microsoft: a new identity may take minutes to replicate


def ensure_identity(api: AzureApi, spec: LaunchSpec, location: str, deadline: float) -> str:
    """PUT the VM's own user-assigned identity (``NAME-identity`` in its group; free): its principal id."""
    ident = R.own_identity_id(api.subscription_id, spec.name)
    body = R.identity_resource_body(spec, location)
    poller = api.call(lambda: api.clients().resource.resources.begin_create_or_update_by_id(
        ident, body, api_version=R.IDENTITY_API))
    out = wire(api.wait(poller, deadline, f"managed identity {R.names(spec.name).identity}"))
    principal = (out.get("properties") or {}).get("principalId")
    if not principal:
        raise ProviderError(f"the managed identity {ident} came back without a principalId", code="NoManagedIdentity")
    return str(principal)


def principal_of(api: AzureApi, spec: LaunchSpec, res: Arm) -> str:
    """The principal a VM or scale set of ``spec`` acts as: trainvm's own user-assigned identity, or the
    system-assigned one of a VM an older trainvm made."""
    ident = res.get("identity") or {}
    users = ident.get("userAssignedIdentities") or ident.get("user_assigned_identities") or {}
    own = R.own_identity_id(api.subscription_id, spec.name).lower()
    for key, value in users.items():
        found = (value or {}).get("principalId") or (value or {}).get("principal_id")
        if key.lower() == own and found:
            return str(found)
    if users:  # ARM did not echo the principal: read the identity itself
        got = api.call(lambda: api.clients().resource.resources.get_by_id(own, api_version=R.IDENTITY_API), missing=None)
        found = (wire(got).get("properties") or {}).get("principalId")
        if found:
            return str(found)
    principal = ident.get("principalId") or ident.get("principal_id")
    if not principal:
        raise ProviderError(f"{spec.name} has no managed identity of trainvm's; it could not read its payload or stop "
                            "itself", code="NoManagedIdentity")
    return str(principal)


def grant_roles(api: AzureApi, spec: LaunchSpec, principal: str) -> None:
    """The lifecycle role, then (last: its scope is outside the group) the payload reader; nothing with
    placement.identity.azure (its administrator granted them)."""
    if user_identity(spec):
        return
    grant_lifecycle_role(api, spec, principal)
    grant_payload_reader(api, spec, principal)


def grant_lifecycle_role(api: AzureApi, spec: LaunchSpec, principal: str) -> Mapping[str, object] | None:
    """Create the VM identity's role assignment when the VM acts on itself; the assignment as ARM returns it."""
    role = R.lifecycle_role(spec)
    if role is None or user_identity(spec):  # a user-assigned identity: its administrator granted the roles
        return None
    scope = R.role_assignment_scope(api.subscription_id, spec)
    return _assign(api, scope, R.role_assignment_name(spec, role),
                   R.role_assignment_body(api.subscription_id, role, principal, spec),
                   f"trainvm gives the VM's managed identity {role} on {scope} so that it can stop itself; creating "
                   "that role assignment needs Owner, User Access Administrator or Role Based Access Control "
                   "Administrator. Without it, set lifecycle.idle_shutdown_minutes: null and remove max_run_hours")


def payload_scope(subscription_id: str, ref: PayloadRef) -> str:
    """The ARM id of the container holding the staged payload (``ref.store`` = ``ACCOUNT/CONTAINER``)."""
    account, _, container = ref.store.partition("/")
    return (f"/subscriptions/{subscription_id}/resourceGroups/{store_group(ref.region)}/providers/Microsoft.Storage/"
            f"storageAccounts/{account}/blobServices/default/containers/{container}")


def payload_assignment_name(scope: str, principal: str) -> str:
    """Deterministic GUID per (container, identity): a re-run finds it; a VM re-created under the same name has a new
    identity and so a new assignment (an assignment's principal cannot be changed: RoleAssignmentUpdateNotPermitted)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"trainvm:payload:{scope.lower()}:{principal}"))


def grant_payload_reader(api: AzureApi, spec: LaunchSpec, principal: str) -> Mapping[str, object] | None:
    """Storage Blob Data Reader for the VM's (or scale set's) identity on the container of ``spec.payload``, so that
    the bootstrap can fetch it with an IMDS token (fetch-azure.sh). Created before the VM. Role changes reach a VM's
    token cache only after a while ("can take significant time", Microsoft's managed-identity best practices): the
    bootstrap retries rc 3 until its deadline. Outside the VM's group (the container is shared): whatever deletes the
    group (``down``, a failed create's cleanup) removes it first (``revoke_payload_reader``)."""
    ref = spec.payload
    if ref is None or ref.cloud != "azure" or user_identity(spec):  # user-assigned: granted by its administrator
        return None
    scope = payload_scope(api.subscription_id, ref)
    body = {"properties": {
        "roleDefinitionId": f"/subscriptions/{api.subscription_id}/providers/{R.AUTHZ}/roleDefinitions/{BLOB_DATA_READER}",
        "principalId": principal, "principalType": "ServicePrincipal",
        "description": f"trainvm: lets {spec.name} read its provisioning payload"}}
    return _assign(api, scope, payload_assignment_name(scope, principal), body,
                   f"trainvm gives the VM's managed identity Storage Blob Data Reader on {ref.store} so that it can fetch "
                   "its provisioning payload; creating that role assignment needs Owner, User Access Administrator or "
                   "Role Based Access Control Administrator on the payload store's resource group")


def revoke_payload_reader(api: AzureApi, scope: str, principal: str) -> bool:
    """Delete the identity's payload-reader assignment (``down``); False when there was none."""
    client = api.authorization()
    out = api.call(lambda: client.role_assignments.delete(scope, payload_assignment_name(scope, principal)),
                         missing=None)
    return out is not None


def _assign(api: AzureApi, scope: str, name: str, body: Mapping[str, object], hint: str) -> Mapping[str, object]:
    """PUT one role assignment: RoleAssignmentExists is done, PrincipalNotFound retried (bounded), refusals AuthError."""
    client = api.authorization()

    def not_replicated(exc: BaseException) -> bool:
        return errs.is_sdk_error(exc) and errs.from_exception(exc).code == "PrincipalNotFound"

    def create() -> object:  # past PRINCIPAL_WAIT_SECONDS, ARM's last answer propagates (classified below)
        return poll(lambda: client.role_assignments.create(scope, name, body),
                    deadline=time.monotonic() + PRINCIPAL_WAIT_SECONDS, transient=not_replicated, tries=None,
                    backoff=max(api.settings.retry_backoff, 0.01), timed_out=lambda last: last)

    try:
        out = create()
    except Exception as exc:
        if not errs.is_sdk_error(exc):
            raise
        f = errs.from_exception(exc)
        if f.code == "RoleAssignmentExists":
            return {"name": name, "scope": scope, "existing": True}
        err = errs.classify(f)
        if isinstance(err, AuthError):
            err.hint = hint
        raise err from exc
    return wire(out)


def revoke_vm_payload_reader(api: AzureApi, name: str, rg: str) -> None:
    """Remove the VM's (or scale set's) Storage Blob Data Reader assignment on the payload container: it lives
    outside the VM's group, so deleting the group leaves it (an orphan "Identity not found" assignment that
    counts against the subscription's role-assignment limit). Best effort: a failure leaves only that orphan."""
    try:
        own = api.call(lambda: api.clients().resource.resources.get_by_id(
            R.own_identity_id(api.subscription_id, name), api_version=R.IDENTITY_API), missing=None)
        if own is not None:  # trainvm's own identity (issue 36 item 5): read even when the VM is gone or never was
            ident = wire(own)
            if not (ident.get("tags") or {}).get(PAYLOAD_LABEL):
                return
            principal, region = (ident.get("properties") or {}).get("principalId"), ident.get("location")
        else:  # a VM made by an older trainvm: its system-assigned identity
            res = api.get_vm(rg, name, expand=None)
            if res is None:
                res = api.get_scale_set(name)
            if not res or not (res.get("tags") or {}).get(PAYLOAD_LABEL):
                return
            principal, region = (res.get("identity") or {}).get("principalId"), res.get("location")
        if not principal or not region:
            return
        region = str(region)
        ref = PayloadRef(cloud="azure", region=region, store=f"{account_name(api.subscription_id, region)}/{CONTAINER}",
                         key="", url="", sha256="", size=0)
        revoke_payload_reader(api, payload_scope(api.subscription_id, ref), principal)
    except ProviderError:
        return
