"""A user-assigned managed identity for Azure VMs (``placement.identity.azure``; issue 30). Pure: no SDK.

Why: trainvm gives the identity it creates for a VM (``NAME-identity``, azure_roles) two roles (Virtual Machine Contributor or
Contributor on the VM's group, so that idle shutdown / max-run can deallocate or delete it; Storage Blob Data
Reader on the payload container). Creating role assignments needs Owner, User Access Administrator or Role Based
Access Control Administrator; a Contributor-only user cannot. An administrator can instead create one
user-assigned identity once and grant it those roles at the subscription (or the payload store's) scope; a
Contributor may then attach it to VMs (``userAssignedIdentities/assign/action`` is inside Contributor's ``*``).

With ``placement.identity.azure`` set:
- the VM (and a cluster's scale set) carries ``identity: {type: UserAssigned, userAssignedIdentities: {ID: {}}}``
  with the administrator's identity instead of trainvm's own; trainvm creates no identity and no role assignment
  and ``down`` removes none (the administrator's grants are meant to last);
- the VM's tag ``trainvm-identity`` holds the identity's ARM id, and the on-VM scripts (the bootstrap's
  templates/bootstrap/fetch-azure.sh, templates/files/trainvm-lifecycle-azure.sh) read it from IMDS
  (``instance/compute/tagsList``) and ask IMDS for a token with ``msi_res_id=ID``: IMDS needs the identity named
  when the VM has no system-assigned one and more than one user-assigned (e.g. one attached by Azure Policy);
- ``up``'s preflight (azure_preflight) reads the identity (it must exist) and, where the caller may read role
  assignments, checks that its roles allow the lifecycle action at the subscription and blob reads on the
  payload store; what is missing is named, with the ``az role assignment create`` line an administrator runs.
Azure tag values hold 256 characters: an id longer than that is refused here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provisioner.providers.base import LaunchSpec

TAG = "trainvm-identity"
TAG_MAX = 256
ID_RE = re.compile(r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w._()]{1,90}/providers/"
                   r"Microsoft\.ManagedIdentity/userAssignedIdentities/[A-Za-z0-9][-\w]{2,127}$", re.I)
EXAMPLE = ("/subscriptions/SUBSCRIPTION-ID/resourceGroups/GROUP/providers/Microsoft.ManagedIdentity/"
           "userAssignedIdentities/NAME")


def check_identity(value: str) -> str:
    """The registry's ``identity_check`` for Azure: a user-assigned identity's ARM resource id."""
    value = value.strip()
    if not ID_RE.match(value):
        raise ValueError(f"azure: {value!r} is not a user-assigned identity's resource id ({EXAMPLE}; "
                         "`az identity show -g GROUP -n NAME --query id -o tsv` prints it)")
    if len(value) > TAG_MAX:
        raise ValueError(f"azure: the identity's resource id is {len(value)} characters; the VM tag {TAG} that tells "
                         f"the VM which identity to use holds at most {TAG_MAX}")
    return value


def user_identity(spec: LaunchSpec) -> str | None:
    """The profile's ``placement.identity.azure`` (``LaunchSpec.identity``), None: trainvm's own identity."""
    return spec.identity.get("azure") or None


def identity_body(identity: str | None) -> dict[str, object]:
    """The VM's (or scale set's) ``identity`` member."""
    if identity is None:
        return {"type": "SystemAssigned"}
    return {"type": "UserAssigned", "userAssignedIdentities": {identity: {}}}
