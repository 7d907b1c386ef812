"""The role assignments of an Azure VM's identity: the one that lets it stop or delete itself (issue 10; bodies in
``azure_request``) and Storage Blob Data Reader on the payload store's container (``grant_payload_reader``).

Created after the VM (it names the VM's system-assigned identity by its principal id, which ARM assigns
at create). The lifecycle role is scoped to the VM's own resource group and removed with that group by ``down``;
the payload reader is scoped to the shared payload container, so ``down`` deletes it by name first
(``revoke_payload_reader``). Idempotent: the
assignment's name is a deterministic GUID, and ``RoleAssignmentExists`` (the same assignment made by an
earlier run) counts as done. ``PrincipalNotFound`` (a fresh identity not replicated yet; rare with
principalType set) is retried for at most PRINCIPAL_WAIT_SECONDS. ``AuthorizationFailed``: the caller may not
create role assignments (it needs Owner, User Access Administrator or Role Based Access Control
Administrator) -- an AuthError, and ``create`` deletes the group: a VM that cannot stop itself would bill
until someone notices.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import request as R
from provisioner.providers.azure.clients import make_authorization_client
from provisioner.providers.azure.identity import user_identity
from provisioner.providers.azure.store import BLOB_DATA_READER, store_group
from provisioner.providers.base import AuthError, LaunchSpec, ProviderError
from provisioner.providers.poll import poll
from provisioner.providers.store import PayloadRef

PRINCIPAL_WAIT_SECONDS = 120.0  # Microsoft: a new identity may take minutes to replicate


def _principal(spec: LaunchSpec, vm: dict[str, Any], why: str) -> str:
    principal = (vm.get("identity") or {}).get("principalId") or (vm.get("identity") or {}).get("principal_id")
    if not principal:
        raise ProviderError(f"{spec.name} has no system-assigned identity; {why}", code="NoManagedIdentity")
    return str(principal)


def grant_lifecycle_role(provider: Any, spec: LaunchSpec, vm: dict[str, Any]) -> dict[str, Any] | None:
    """Create the VM identity's role assignment when the VM acts on itself; the assignment as ARM returns it."""
    role = R.lifecycle_role(spec)
    if role is None or user_identity(spec):  # a user-assigned identity: its administrator granted the roles
        return None
    principal = _principal(spec, vm, "it could not deallocate itself")
    scope = R.role_assignment_scope(provider.subscription_id, spec)
    return _assign(provider, scope, R.role_assignment_name(spec, role),
                   R.role_assignment_body(provider.subscription_id, role, principal, spec),
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


def grant_payload_reader(provider: Any, spec: LaunchSpec, vm: dict[str, Any]) -> dict[str, Any] | None:
    """Storage Blob Data Reader for the VM's (or scale set's) system-assigned identity on the container of
    ``spec.payload``, so that the bootstrap can fetch it with an IMDS token (fetch-azure.sh). Created after the VM
    (it needs the identity's principal id). Role changes reach a VM's token cache only after a while ("can take
    significant time", Microsoft's managed-identity best practices): the bootstrap retries rc 3 until its deadline.
    Kept when the VM goes (the container is shared); ``down`` removes it (``revoke_payload_reader``)."""
    ref = spec.payload
    if ref is None or ref.cloud != "azure" or user_identity(spec):  # user-assigned: granted by its administrator
        return None

    principal = _principal(spec, vm, "it could not read its payload")
    scope = payload_scope(provider.subscription_id, ref)
    body = {"properties": {
        "roleDefinitionId": f"/subscriptions/{provider.subscription_id}/providers/{R.AUTHZ}/roleDefinitions/{BLOB_DATA_READER}",
        "principalId": principal, "principalType": "ServicePrincipal",
        "description": f"trainvm: lets {spec.name} read its provisioning payload"}}
    return _assign(provider, scope, payload_assignment_name(scope, principal), body,
                   f"trainvm gives the VM's managed identity Storage Blob Data Reader on {ref.store} so that it can fetch "
                   "its provisioning payload; creating that role assignment needs Owner, User Access Administrator or "
                   "Role Based Access Control Administrator on the payload store's resource group")


def revoke_payload_reader(provider: Any, scope: str, principal: str) -> bool:
    """Delete the identity's payload-reader assignment (``down``); False when there was none."""
    provider.api()
    client = make_authorization_client(provider.settings, provider._credential)
    out = provider._call(lambda: client.role_assignments.delete(scope, payload_assignment_name(scope, principal)),
                         missing=None)
    return out is not None


def _assign(provider: Any, scope: str, name: str, body: dict[str, Any], hint: str) -> dict[str, Any]:
    """PUT one role assignment: RoleAssignmentExists is done, PrincipalNotFound retried (bounded), refusals AuthError."""
    provider.api()  # settles the credential
    client = make_authorization_client(provider.settings, provider._credential)

    def not_replicated(exc: BaseException) -> bool:
        return errs.is_sdk_error(exc) and errs.from_exception(exc).code == "PrincipalNotFound"

    def create() -> Any:  # past PRINCIPAL_WAIT_SECONDS, ARM's last answer propagates (classified below)
        return poll(lambda: client.role_assignments.create(scope, name, body),
                    deadline=time.monotonic() + PRINCIPAL_WAIT_SECONDS, transient=not_replicated, tries=None,
                    backoff=max(provider.settings.retry_backoff, 0.01), timed_out=lambda last: last)

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
    return out.as_dict() if hasattr(out, "as_dict") else dict(out)
