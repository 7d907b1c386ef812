"""The role assignment that lets an Azure VM stop or delete itself (issue 10; bodies in ``azure_request``).

Created after the VM (it names the VM's system-assigned identity by its principal id, which ARM assigns
at create), scoped to the VM's own resource group, removed with that group by ``down``. Idempotent: the
assignment's name is a deterministic GUID, and ``RoleAssignmentExists`` (the same assignment made by an
earlier run) counts as done. ``PrincipalNotFound`` (a fresh identity not replicated yet; rare with
principalType set) is retried for at most PRINCIPAL_WAIT_SECONDS. ``AuthorizationFailed``: the caller may not
create role assignments (it needs Owner, User Access Administrator or Role Based Access Control
Administrator) -- an AuthError, and ``create`` deletes the group: a VM that cannot stop itself would bill
until someone notices.
"""

from __future__ import annotations

from typing import Any

from provisioner.providers import azure_errors as errs
from provisioner.providers import azure_request as R
from provisioner.providers.base import AuthError, LaunchSpec, ProviderError

PRINCIPAL_WAIT_SECONDS = 120.0  # Microsoft: a new identity may take minutes to replicate


def grant_lifecycle_role(provider: Any, spec: LaunchSpec, vm: dict[str, Any]) -> dict[str, Any] | None:
    """Create the VM identity's role assignment when the VM acts on itself; the assignment as ARM returns it."""
    role = R.lifecycle_role(spec)
    if role is None:
        return None
    principal = (vm.get("identity") or {}).get("principalId") or (vm.get("identity") or {}).get("principal_id")
    if not principal:
        raise ProviderError(f"{spec.name} has no system-assigned identity; it could not deallocate itself",
                            code="NoManagedIdentity")
    from google.api_core.retry import Retry  # the project's retry helper (a dependency through google-cloud-compute)

    from provisioner.providers.azure_clients import make_authorization_client

    provider.api()  # settles the credential
    client = make_authorization_client(provider.settings, provider._credential)
    scope = R.role_assignment_scope(provider.subscription_id, spec)
    name = R.role_assignment_name(spec, role)
    body = R.role_assignment_body(provider.subscription_id, role, principal, spec)

    def not_replicated(exc: BaseException) -> bool:
        return errs.is_sdk_error(exc) and errs.from_exception(exc).code == "PrincipalNotFound"

    retry = Retry(predicate=not_replicated, initial=max(provider.settings.retry_backoff, 0.01), maximum=20,
                  multiplier=2, timeout=PRINCIPAL_WAIT_SECONDS)

    def create() -> Any:
        return retry(client.role_assignments.create)(scope, name, body)

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
            err.hint = (f"trainvm gives the VM's managed identity {role} on {scope} so that it can stop itself; creating "
                        "that role assignment needs Owner, User Access Administrator or Role Based Access Control "
                        "Administrator. Without it, set lifecycle.idle_shutdown_minutes: null and remove max_run_hours")
        raise err from exc
    return out.as_dict() if hasattr(out, "as_dict") else dict(out)
