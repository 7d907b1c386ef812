"""Lookups over the table of clouds (providers/clouds.py ``CLOUDS``, of ``CloudSpec`` records:
providers/cloud_spec.py); everything outside ``providers/`` asks this module instead of branching on a cloud's
name. Pure data: importing it imports no SDK (``--help``, ``validate`` and ``plan`` stay SDK-free; a test checks
it), nor any cloud's code: the layers above reach that through the typed hooks of provisioner/hooks/. The record types and the table are re-exported here under their old names (``registry.CloudSpec``,
``registry.CLOUDS``, ...): the per-cloud facts and their sources are in providers/clouds.py."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from provisioner.providers.cloud_spec import (
    DISK_TYPES,
    OS_NAMES,
    AmiParameter,
    AzureImage,
    CloudName,
    CloudSpec,
    GceImage,
    ImageRef,
    LifecycleFacts,
    LocalImage,
    OsName,
    PayloadStoreFacts,
    ReadyEstimate,
    RegistryLogin,
    SecretRefForm,
    UserDataEncoding,
    UserDataFormat,
)
from provisioner.providers.clouds import CLOUD_NAMES, CLOUDS, HASHED_DEFAULT_CLOUDS, PUBLIC_SCHEMES
from provisioner.providers.names import or_list

if TYPE_CHECKING:
    from provisioner.providers.placement import ShapePlacement

__all__ = [
    "AmiParameter",
    "AzureImage",
    "CloudName",
    "CloudSpec",
    "DISK_TYPES",
    "GceImage",
    "ImageRef",
    "LifecycleFacts",
    "LocalImage",
    "OS_NAMES",
    "OsName",
    "PayloadStoreFacts",
    "ReadyEstimate",
    "RegistryLogin",
    "SecretRefForm",
    "UserDataEncoding",
    "UserDataFormat",
    "CLOUD_NAMES",
    "CLOUDS",
    "HASHED_DEFAULT_CLOUDS",
    "PUBLIC_SCHEMES",
    "cloud",
    "provisionable_clouds",
    "cluster_clouds",
    "default_clouds",
    "rehearsal_clouds",
    "provisionable",
    "unknown_cloud_message",
    "credential_hint",
    "image_ref",
    "image_refs",
    "os_arches",
    "identity_examples",
    "secret_kind",
    "ssh_exposure",
    "reads_natively",
    "native_clouds",
    "placement",
    "compactable_families",
    "SSH_DEFAULT",
    "NATIVE_SCHEMES",
    "METADATA_VALUE_LIMIT",
]


def cloud(name: str) -> CloudSpec:
    """The spec of ``name`` (KeyError for a cloud trainvm does not know; callers validate names first)."""
    return CLOUDS[name]


def provisionable_clouds() -> tuple[str, ...]:
    return tuple(n for n, c in CLOUDS.items() if c.provisionable)


def cluster_clouds() -> tuple[str, ...]:
    """The provisionable clouds whose provider creates multi-node clusters (``CloudSpec.group_engine``)."""
    return tuple(n for n, c in CLOUDS.items() if c.provisionable and c.group_engine)


def default_clouds() -> tuple[str, ...]:
    """The clouds a profile without ``placement.clouds`` is planned on."""
    return tuple(n for n, c in CLOUDS.items() if c.provisionable and c.default)


def rehearsal_clouds() -> frozenset[str]:
    """The clouds without a GPU, where a profile that asks for one is rehearsed, never passed (``rehearsal``)."""
    return frozenset(n for n, c in CLOUDS.items() if c.rehearsal)


def provisionable(name: str) -> bool:
    spec = CLOUDS.get(name)
    return spec is not None and spec.provisionable


def unknown_cloud_message(name: str) -> str:
    return f"unknown cloud {name!r} (choose {or_list(CLOUD_NAMES)})"


def credential_hint(names: tuple[str, ...] | None = None) -> str:
    """How to give trainvm credentials for ``names`` (default: every provisionable cloud)."""
    return "; ".join(CLOUDS[n].credential_hint for n in (names or provisionable_clouds()))


def image_ref(name: str, os_name: str) -> ImageRef | None:
    spec = CLOUDS.get(name)
    return None if spec is None else spec.os_images.get(os_name)


def image_refs(os_name: str) -> dict[str, dict[str, str]]:
    """cloud -> the image reference of ``os_name`` there (the lock file records them), sorted by cloud; a cloud whose
    image is a file on this machine (``LocalImage``) has none to record."""
    refs = {n: c.os_images[os_name].lock_ref() for n, c in sorted(CLOUDS.items()) if os_name in c.os_images}
    return {n: r for n, r in refs.items() if r}  # an empty reference: a file on this machine, nothing to pin


def os_arches() -> dict[str, Mapping[str, frozenset[str]]]:
    """cloud -> os -> architectures with a published image (the planner's os_image filter)."""
    return {n: c.os_arches for n, c in CLOUDS.items()}


# Back-compatible views (data locality, plan, up's summary)
SSH_DEFAULT: Mapping[str, str] = MappingProxyType({n: c.ssh_default for n, c in CLOUDS.items()})
NATIVE_SCHEMES: Mapping[str, frozenset[str]] = MappingProxyType({n: c.native_schemes for n, c in CLOUDS.items()})


def identity_examples() -> dict[str, str]:
    """cloud -> an example ``placement.identity`` value, for the clouds that take one (the profile model's example)."""
    return {c.name: c.identity_example for c in CLOUDS.values() if c.identity_example}


def secret_kind(ref: str) -> str:
    """``secret://KIND/...`` -> KIND."""
    return ref[len("secret://"):].split("/", 1)[0]


def ssh_exposure(cloud: str, ssh_from: str | None) -> str:
    if ssh_from:
        return f"only from {ssh_from}"
    return SSH_DEFAULT.get(cloud, "as the cloud's defaults allow")


def reads_natively(cloud: str, scheme: str) -> bool:
    return scheme in PUBLIC_SCHEMES or scheme in NATIVE_SCHEMES.get(cloud, frozenset())


def native_clouds(scheme: str) -> tuple[str, ...]:
    return tuple(sorted(c for c, schemes in NATIVE_SCHEMES.items() if scheme in schemes))


def placement(cloud: str, family: str, instance_type: str) -> ShapePlacement:
    """Multi-node facts of one shape (data/placement.yaml): compact placement, fabric, what the guest
    needs to use the fabric."""
    from provisioner.providers.placement import shape_placement  # lazy: startup

    return shape_placement(cloud, family, instance_type)


#: The longest value one instance metadata item / tag may hold: GCE metadata values 256 KiB; Azure and
#: AWS tag values 256 characters. A cluster's node list is split into items of at most this size.
METADATA_VALUE_LIMIT: Mapping[str, int] = MappingProxyType({"gcp": 262_144, "azure": 256, "aws": 256})


def compactable_families(clouds: tuple[str, ...]) -> frozenset[tuple[str, str]]:
    """(cloud, family) pairs whose nodes the cloud can place compactly (data/placement.yaml)."""
    from provisioner.providers.placement import compactable  # lazy: startup

    return compactable(clouds)
