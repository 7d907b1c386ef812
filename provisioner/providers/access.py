"""What a VM on each cloud can read, and what copying data to it across clouds costs.

* ``data_locality_exclusions``: clouds whose VM cannot read a data source (no native access and no
  ``data[].credential`` in a secret store the VM reads with its own identity).
* ``secret_store_exclusions``: clouds whose VM cannot read a ``secret://`` reference elsewhere in the profile
  (``stack.env``): the startup script resolves it on the VM with the VM's own identity, so a reference to
  another cloud's store would fail only there, after the driver install.
* ``egress_prices`` / ``egress_estimate`` / ``egress_basis``: the source cloud's internet egress for sized data
  (data/egress.yaml says where each price comes from and whether it was checked against an official source).

The per-cloud facts (native schemes, secret kinds) are ``CloudSpec`` fields in registry.py. Pure data, no SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from provisioner.cache import cached
from provisioner.providers.registry import CLOUDS, native_clouds, provisionable, reads_natively, secret_kind


def _stores(cloud: str) -> str:
    return ", ".join(f"secret://{k}/..." for k in sorted(CLOUDS[cloud].secret_kinds))


def data_locality_exclusions(items: list[tuple[str, str | None]], clouds: tuple[str, ...]) -> dict[str, str]:
    """cloud -> why a VM there cannot read the profile's data, for ``items`` = (source URL, its
    ``data[].credential`` reference or None). A source is readable where its scheme is native or public, or
    with a credential that the VM can itself read (its secret store is one of the cloud's ``secret_kinds``)."""
    out: dict[str, str] = {}
    for cloud in clouds:
        for source, credential in items:
            scheme = source.split("://", 1)[0]
            if reads_natively(cloud, scheme):
                continue
            if credential and secret_kind(credential) in CLOUDS[cloud].secret_kinds:
                continue
            if credential:
                out[cloud] = (f"{source}: its data[].credential {credential} is in a secret store that a VM on {cloud} cannot "
                              f"read with its own identity (a VM on {cloud} reads {_stores(cloud)})")
                break
            native = ", ".join(native_clouds(scheme)) or "no cloud"
            out[cloud] = (f"{source} is read natively only on {native}; a VM on {cloud} needs data[].credential "
                          f"(a secret:// reference) or an https:// URL")
            break
    return out


def secret_store_exclusions(refs: list[tuple[str, str]], clouds: tuple[str, ...]) -> dict[str, str]:
    """cloud -> why a VM there cannot read one of ``refs`` = (where in the profile, ``secret://`` reference),
    e.g. ``("stack.env.TOKEN (train.yaml:7)", "secret://gcp/hf-token")``. The first unreadable one is named."""
    out: dict[str, str] = {}
    for cloud in clouds:
        for where, ref in refs:
            if secret_kind(ref) not in CLOUDS[cloud].secret_kinds:
                out[cloud] = (f"{where}: {ref} is in a secret store that a VM on {cloud} cannot read with its own "
                              f"identity (a VM on {cloud} reads {_stores(cloud)})")
                break
    return out


def secret_region(name: str) -> str | None:
    """The region a ``secret://aws/`` reference is read in: an ARN's own; None for a name (the VM's region)."""
    return name.split(":")[3] if name.startswith("arn:") else None


def secret_region_warnings(refs: list[tuple[str, str]], offers: list[tuple[str, str]]) -> list[str]:
    """``refs`` = (where, ``secret://`` reference) read in the VM's own region (AWS Secrets Manager by name: its
    secrets are regional) while ``offers`` = the (cloud, region) pairs `up` may create in span several regions of
    that cloud: the secret must exist in each, or be named by its ARN (read in its own region)."""
    regions = sorted({r for c, r in offers if c == "aws"})
    out = []
    for where, ref in refs:
        if len(regions) > 1 and ref.startswith("secret://aws/") and secret_region(ref[len("secret://aws/"):]) is None:
            name = ref[len("secret://aws/"):]
            out.append(f"{where}: {ref} is read in the VM's own region, and failover may create the VM in "
                       f"{', '.join(regions)}: the secret must exist in each of them, or name it by its ARN "
                       f"(secret://aws/arn:aws:secretsmanager:REGION:ACCOUNT:secret:{name}), read in its own region")
    return out


class Credentialed(Protocol):
    """A data item as ``secret_warnings`` reads it (profile/model.py ``DataItem``)."""

    @property
    def credential(self) -> str | None: ...


def plan_secret_warnings(loaded: Any, plan: Any) -> list[str]:
    """``secret_region_warnings`` for a loaded profile (stack.env and data[].credential) and its plan's offers."""
    offers = [(o.cloud, o.region) for o in (plan.chosen, *plan.failover) if o is not None]
    # which clouds trainvm can create on is the registry's fact (one look-up per cloud): asking each offer
    # (catalog.models.Offer.provisionable) called up into the catalog once per offer of the plan
    creatable = {cloud for cloud in {c for c, _ in offers} if provisionable(cloud)}
    return secret_warnings(loaded.secret_refs, loaded.profile.data, [(c, r) for c, r in offers if c in creatable])


def secret_warnings(secret_refs: Iterable[tuple[str, str]], data: Iterable[Credentialed],
                    where: list[tuple[str, str]]) -> list[str]:
    """``secret_region_warnings`` for a profile's secret references (``LoadedProfile.secret_refs``) and its data items'
    credentials, on the (cloud, region) pairs ``where`` (the plan's provisionable offers, in order)."""
    refs = list(secret_refs) + [(f"data[{i}].credential", d.credential) for i, d in enumerate(data) if d.credential]
    return secret_region_warnings(refs, where)


def egress_prices() -> dict[str, dict[str, object]]:
    """Per-cloud internet egress prices (data/egress.yaml): each with ``source``, ``checked`` (read from
    the provider's own page or price API) and, when not checked, the official ``api`` it was not read from."""
    path = Path(__file__).parent / "data" / "egress.yaml"
    doc = cached("egress", [path], lambda: _read_yaml(path))  # `plan` need not import ruamel.yaml
    return {c: dict(v, as_of=doc["as_of"]) for c, v in doc["clouds"].items()}


def _read_yaml(path: Path) -> dict[str, Any]:
    from ruamel.yaml import YAML  # lazy: startup

    return dict(YAML(typ="safe").load(path.read_text()))


GB_PER_GIB = 1.073741824


def _outside(price: Mapping[str, object], cloud: str, region: str | None) -> bool:
    """The VM's region is a destination the price does not cover (egress.yaml ``other_destinations``)."""
    marks = (price.get("other_destinations") or {}).get(cloud, ())  # type: ignore[attr-defined]
    return bool(region) and any(m in str(region) for m in marks)


def egress_estimate(items: list[tuple[str, float | None]], cloud: str, region: str | None = None) -> list[dict[str, object]]:
    """What copying each sized ``(source, size_gib)`` to a VM on ``cloud`` (in ``region``) costs in the source
    cloud's internet egress (nothing for same-cloud sources; https:// sources have no known source cloud).
    ``checked`` is False where the price was not read from an official source, or does not cover the VM's
    region as a destination (GCS prices by destination): output calls it an estimate."""
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
        outside = _outside(price, cloud, region)
        checked = bool(price["checked"]) and not outside
        out.append({"source": source, "from": owners[0], "to": cloud, "size_gib": size, "usd_per_gb": usd_per_gb,
                    "cost": round(size * GB_PER_GIB * usd_per_gb, 2), "price_source": price["source"],
                    "checked": checked, "price_as_of": price["as_of"],
                    "not_checked_against": None if checked else price["api"],
                    "destination_not_covered": region if outside else None,
                    "checked_for": price.get("checked_for")})
    return out


def egress_basis(e: Mapping[str, object]) -> str:
    """How one ``egress_estimate`` item's price is known, for output: a list price with its source, or
    an estimate that names the official source it was not checked against."""
    if e["checked"]:
        return f"${e['usd_per_gb']}/GB list price, {e['price_source']}, as of {e['price_as_of']}"
    if e.get("destination_not_covered"):
        return (f"estimate: ${e['usd_per_gb']}/GB, {e['from']}'s price was checked for {e['checked_for']}, not for "
                f"{e['destination_not_covered']}; see provisioner/providers/data/egress.yaml")
    return (f"estimate: ${e['usd_per_gb']}/GB, not checked against {e['from']}'s official price list; "
            f"see provisioner/providers/data/egress.yaml")
