"""Per-cloud facts that cloud-neutral code (plan, up's summary, the data phase) looks up instead of
branching on a cloud's name. Pure data: importing this module imports no SDK.

* ``SSH_DEFAULT``: who can reach port 22 when neither ``placement.ssh_from`` nor ``--ssh-from`` is set.
* ``NATIVE_SCHEMES``: the data URL schemes a VM of that cloud reads with its own identity, no secret
  needed (gs:// through the GCE VM's service-account scope, s3:// through an AWS instance profile, az://
  through the Azure VM's managed identity). Any other scheme needs a credential reference
  (``data[].credential``) or must be a plain https:// URL.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

SSH_DEFAULT: Mapping[str, str] = MappingProxyType({
    "gcp": "open to any address (the default network's default-allow-ssh rule allows tcp:22 from 0.0.0.0/0)",
    "azure": "closed (the VM's network security group allows no inbound traffic)",
    "aws": "as the default security group allows",
})

NATIVE_SCHEMES: Mapping[str, frozenset[str]] = MappingProxyType({
    "gcp": frozenset({"gs"}),
    "aws": frozenset({"s3"}),
    "azure": frozenset({"az"}),
})

#: Schemes every cloud reads without any credential.
PUBLIC_SCHEMES: frozenset[str] = frozenset({"https"})


def ssh_exposure(cloud: str, ssh_from: str | None) -> str:
    if ssh_from:
        return f"only from {ssh_from}"
    return SSH_DEFAULT.get(cloud, "as the cloud's defaults allow")


def reads_natively(cloud: str, scheme: str) -> bool:
    return scheme in PUBLIC_SCHEMES or scheme in NATIVE_SCHEMES.get(cloud, frozenset())


def native_clouds(scheme: str) -> tuple[str, ...]:
    return tuple(sorted(c for c, schemes in NATIVE_SCHEMES.items() if scheme in schemes))
