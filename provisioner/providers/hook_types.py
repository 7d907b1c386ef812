"""The typed hooks a cloud supplies (issue 37): what the layers above ask of a cloud's code, one ``Protocol`` per
hook, and ``CloudHooks``, one cloud's set of them. The table of every cloud's hooks lives above the cloud packages
(provisioner/hooks/: each hook imports its cloud's module when called, so ``--help``, ``validate`` and ``plan`` import
no cloud SDK); this module is the contract both sides are checked against by mypy. A cloud's facts that are pure data
(titles, images, disk types, lifecycle...) stay in its ``CloudSpec`` (providers/clouds.py).

Pure types: importing this module imports neither the provider contract (base.py) nor any cloud package."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from provisioner.providers.bake_base import Baker
    from provisioner.providers.base import LaunchSpec, Provider
    from provisioner.providers.capabilities import LocalSsdBuilder
    from provisioner.providers.cloud_spec import CloudName
    from provisioner.providers.offer import Offer
    from provisioner.providers.price_rows import SourceResult
    from provisioner.providers.quota_records import QuotaSource


class ProviderFactory(Protocol):
    """The cloud's provider, built now (cheap: no cloud call until a method is called). ``candidate_regions``: where
    the caller (a layer above, which knows the catalog) says the cloud's VMs can be, asked when first needed; a
    provider that lists region by region (AWS) looks there, the others list everything in one call and ignore it."""

    def __call__(self, *, candidate_regions: Callable[[], Iterable[str]] | None = None) -> Provider: ...


class RequestPreview(Protocol):
    """The pure create request ``up`` would send for ``spec`` on ``offer`` (``trainvm render``; no SDK)."""

    def __call__(self, spec: LaunchSpec, offer: Offer) -> dict[str, object]: ...


class BakerFactory(Protocol):
    """The cloud's ``Baker`` (providers/bake_base.py) on ``provider`` (``trainvm bake``, ``trainvm images``)."""

    def __call__(self, provider: Provider) -> Baker: ...


class PriceSource(Protocol):
    """Prices ``known`` (the catalog's rows of that cloud) in ``regions`` from the cloud's public price API
    (``trainvm catalog refresh``, catalog/refresh.py)."""

    def __call__(self, known: list[Offer], regions: list[str], now: datetime) -> SourceResult: ...


class QuotaReader(Protocol):
    """The cloud's quota reader for ``provider`` (provision/quota.py); None: it cannot read quotas there."""

    def __call__(self, provider: Provider) -> QuotaSource | None: ...


class FamilyDiskMap(Protocol):
    """Profile disk type -> the cloud's boot disk type on one machine ``family`` (None: the cloud's ``disk_types``)."""

    def __call__(self, family: str) -> Mapping[str, str] | None: ...


class LocalSsdFacts(Protocol):
    """The cloud's local SSD facts (``LocalSsdBuilder``, pure data): what ``plan`` prices scratch disks with."""

    def __call__(self) -> LocalSsdBuilder: ...


class CatalogCheck(Protocol):
    """The cloud's own consistency checks of one catalog row: the problems found (catalog/storage.py)."""

    def __call__(self, offer: Offer) -> list[str]: ...


class FamilyOf(Protocol):
    """The catalog's ``family`` of an instance type (catalog/families.py ``family_of``)."""

    def __call__(self, instance_type: str) -> str: ...


class IdentityCheck(Protocol):
    """A ``placement.identity`` value for this cloud, checked (ValueError when refused) and normalised."""

    def __call__(self, value: str) -> str: ...


class HostOffers(Protocol):
    """The offers a cloud makes from facts of this machine, read when asked (``plan``: the local cloud's one VM sized
    from the host), not rows of the price catalog."""

    def __call__(self) -> tuple[Offer, ...]: ...


@dataclass(frozen=True)
class CloudHooks:
    """One cloud's code, as the layers above call it. ``None``: the cloud has no such hook (what that means is said
    per field)."""

    name: CloudName
    #: the pure create request (every cloud trainvm knows has one: ``render`` previews it)
    request_preview: RequestPreview
    #: None: planned and rendered for review, never provisioned (its ``CloudSpec.provisionable`` is False)
    provider: ProviderFactory | None = None
    #: None: this cloud cannot bake yet (docs/bake.md)
    baker: BakerFactory | None = None
    #: None: ``catalog refresh`` cannot renew its prices
    price_source: PriceSource | None = None
    #: None: its quotas are not read (``up`` tries the offer as it would without the check)
    quota_reader: QuotaReader | None = None
    #: None: the cloud's ``disk_types`` on every family
    family_disk_map: FamilyDiskMap | None = None
    #: None: one scratch disk of the size asked, or none
    local_ssd: LocalSsdFacts | None = None
    #: None: only the checks every cloud's rows get
    catalog_check: CatalogCheck | None = None
    #: None: an instance type is its own family
    family_of: FamilyOf | None = None
    #: None: the cloud takes no pre-made VM identity
    identity_check: IdentityCheck | None = None
    #: None: the cloud's offers are the catalog's rows only
    host_offers: HostOffers | None = None
