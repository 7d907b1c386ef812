"""Azure's hooks (providers/hook_types.py): each imports its module of providers/azure/ when called."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from provisioner.hooks.own import own_provider
from provisioner.providers.hook_types import CloudHooks

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from provisioner.providers.bake_base import Baker
    from provisioner.providers.base import LaunchSpec, Provider
    from provisioner.providers.offer import Offer
    from provisioner.providers.price_rows import SourceResult
    from provisioner.providers.quota_records import QuotaSource


def provider(*, candidate_regions: Callable[[], Iterable[str]] | None = None) -> Provider:  # one call lists every region
    from provisioner.providers.azure.provider import AzureProvider  # lazy: startup (cloud code only when asked)

    return AzureProvider()


def request_preview(spec: LaunchSpec, offer: Offer) -> dict[str, object]:
    from provisioner.providers.azure.request import request_preview  # lazy: startup (cloud code only when asked)

    return request_preview(spec, offer)


def baker(provider: Provider) -> Baker:
    """A Compute Gallery image version, replicated (docs/bake.md)."""
    from provisioner.providers.azure.bake import AzureBaker  # lazy: startup (cloud code only when asked)
    from provisioner.providers.azure.provider import AzureProvider  # lazy: startup (cloud code only when asked)

    provider = own_provider(provider, AzureProvider)
    return AzureBaker(provider)


def price_source(known: list[Offer], regions: list[str], now: datetime) -> SourceResult:
    from provisioner.providers.azure.prices import fetch  # lazy: startup (cloud code only when asked)

    return fetch(known, regions, now)


def quota_reader(provider: Provider) -> QuotaSource | None:
    from provisioner.providers.azure.quota import reader  # lazy: startup (cloud code only when asked)

    return reader(provider)


def catalog_check(offer: Offer) -> list[str]:
    from provisioner.providers.azure.offers import check_offer  # lazy: startup (cloud code only when asked)

    return check_offer(offer)


def family_of(instance_type: str) -> str:
    from provisioner.providers.azure.families import family  # lazy: startup (cloud code only when asked)

    return family(instance_type)


def identity_check(value: str) -> str:
    """A user-assigned identity's ARM id."""
    from provisioner.providers.azure.identity import check_identity  # lazy: startup (cloud code only when asked)

    return check_identity(value)


HOOKS = CloudHooks(name="azure", request_preview=request_preview, provider=provider, baker=baker,
                   price_source=price_source, quota_reader=quota_reader, catalog_check=catalog_check,
                   family_of=family_of, identity_check=identity_check)
