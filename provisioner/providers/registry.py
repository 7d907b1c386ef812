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


def data_locality_exclusions(items: list[tuple[str, bool]], clouds: tuple[str, ...]) -> dict[str, str]:
    """cloud -> why a VM there cannot read the profile's data, for ``items`` = (source URL, has a
    credential reference). A source is readable where its scheme is native or public, or anywhere
    with ``data[].credential``."""
    out: dict[str, str] = {}
    for cloud in clouds:
        for source, has_credential in items:
            scheme = source.split("://", 1)[0]
            if has_credential or reads_natively(cloud, scheme):
                continue
            native = ", ".join(native_clouds(scheme)) or "no cloud"
            out[cloud] = (f"{source} is read natively only on {native}; a {cloud} VM needs data[].credential "
                          f"(a secret:// reference) or an https:// URL")
            break
    return out


def egress_prices() -> dict[str, dict[str, object]]:
    """Per-cloud internet egress list prices (data/egress.yaml, each with its source URL)."""
    from pathlib import Path

    from ruamel.yaml import YAML

    doc = YAML(typ="safe").load((Path(__file__).parent / "data" / "egress.yaml").read_text())
    return {c: dict(v, as_of=doc["as_of"]) for c, v in doc["clouds"].items()}


GB_PER_GIB = 1.073741824


def egress_estimate(items: list[tuple[str, float | None]], cloud: str) -> list[dict[str, object]]:
    """What copying each sized ``(source, size_gib)`` to a VM on ``cloud`` costs in the source cloud's
    internet egress (nothing for same-cloud sources; https:// sources have no known source cloud)."""
    prices = egress_prices()
    out: list[dict[str, object]] = []
    for source, size in items:
        owners = native_clouds(source.split("://", 1)[0])
        if size is None or not owners or cloud in owners:
            continue
        price = prices.get(owners[0])
        if price is None:
            continue
        usd_per_gb = float(price["usd_per_gb"])  # type: ignore[arg-type]
        out.append({"source": source, "from": owners[0], "to": cloud, "size_gib": size, "usd_per_gb": usd_per_gb,
                    "cost": round(size * GB_PER_GIB * usd_per_gb, 2), "price_source": price["source"]})
    return out


def ssh_exposure(cloud: str, ssh_from: str | None) -> str:
    if ssh_from:
        return f"only from {ssh_from}"
    return SSH_DEFAULT.get(cloud, "as the cloud's defaults allow")


def reads_natively(cloud: str, scheme: str) -> bool:
    return scheme in PUBLIC_SCHEMES or scheme in NATIVE_SCHEMES.get(cloud, frozenset())


def native_clouds(scheme: str) -> tuple[str, ...]:
    return tuple(sorted(c for c, schemes in NATIVE_SCHEMES.items() if scheme in schemes))
