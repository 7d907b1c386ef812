"""AWS's hooks (providers/hook_types.py): each imports its module of providers/aws/ when called."""

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


def provider(*, candidate_regions: Callable[[], Iterable[str]] | None = None) -> Provider:
    """``candidate_regions``: the regions list/find look in (those the account has enabled); the caller's, the
    catalog's (commands/clouds.py): a provider reads no catalog."""
    from provisioner.providers.aws.provider import AwsProvider  # lazy: startup (cloud code only when asked)

    return AwsProvider(candidate_regions=candidate_regions)


def request_preview(spec: LaunchSpec, offer: Offer) -> dict[str, object]:
    from provisioner.providers.aws.request import request_preview  # lazy: startup (cloud code only when asked)

    return request_preview(spec, offer)


def baker(provider: Provider) -> Baker:
    """An AMI, copied to the failover regions (docs/bake.md)."""
    from provisioner.providers.aws.bake import AwsBaker  # lazy: startup (cloud code only when asked)
    from provisioner.providers.aws.provider import AwsProvider  # lazy: startup (cloud code only when asked)

    provider = own_provider(provider, AwsProvider)
    return AwsBaker(provider)


def price_source(known: list[Offer], regions: list[str], now: datetime) -> SourceResult:
    from provisioner.providers.aws.prices import fetch  # lazy: startup (cloud code only when asked)

    return fetch(known, regions, now)


def quota_reader(provider: Provider) -> QuotaSource | None:
    from provisioner.providers.aws.quota import reader  # lazy: startup (cloud code only when asked)

    return reader(provider)


def family_of(instance_type: str) -> str:
    from provisioner.providers.aws.families import family  # lazy: startup (cloud code only when asked)

    return family(instance_type)


HOOKS = CloudHooks(name="aws", request_preview=request_preview, provider=provider, baker=baker,
                   price_source=price_source, quota_reader=quota_reader, family_of=family_of)
