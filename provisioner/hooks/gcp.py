"""GCE's hooks (providers/hook_types.py): each imports its module of providers/gcp/ when called."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from provisioner.hooks.own import own_provider
from provisioner.providers.hook_types import CloudHooks

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from provisioner.providers.bake_base import Baker
    from provisioner.providers.base import LaunchSpec, Provider
    from provisioner.providers.capabilities import LocalSsdBuilder
    from provisioner.providers.offer import Offer
    from provisioner.providers.price_rows import SourceResult
    from provisioner.providers.quota_records import QuotaSource


def provider(*, candidate_regions: Callable[[], Iterable[str]] | None = None) -> Provider:  # one call lists every region
    from provisioner.providers.gcp.provider import GcpProvider  # lazy: startup (cloud code only when asked)

    return GcpProvider()


def request_preview(spec: LaunchSpec, offer: Offer) -> dict[str, object]:
    from provisioner.providers.gcp.request import request_preview  # lazy: startup (cloud code only when asked)

    return request_preview(spec, offer)


def baker(provider: Provider) -> Baker:
    from provisioner.providers.gcp.bake import GceBaker  # lazy: startup (cloud code only when asked)
    from provisioner.providers.gcp.provider import GcpProvider  # lazy: startup (cloud code only when asked)

    provider = own_provider(provider, GcpProvider)
    return GceBaker(provider)


def price_source(known: list[Offer], regions: list[str], now: datetime) -> SourceResult:
    from provisioner.providers.gcp.prices import fetch  # lazy: startup (cloud code only when asked)

    return fetch(known, regions, now)


def quota_reader(provider: Provider) -> QuotaSource | None:
    from provisioner.providers.gcp.quota import reader  # lazy: startup (cloud code only when asked)

    return reader(provider)


def family_disk_map(family: str) -> Mapping[str, str] | None:
    from provisioner.providers.gcp.families import family_disk_map  # lazy: startup (cloud code only when asked)

    return family_disk_map(family)


def local_ssd() -> LocalSsdBuilder:
    from provisioner.providers.gcp import families  # lazy: startup (cloud code only when asked)

    return families


def catalog_check(offer: Offer) -> list[str]:
    from provisioner.providers.gcp.families import check_offer  # lazy: startup (cloud code only when asked)

    return check_offer(offer)


def family_of(instance_type: str) -> str:
    from provisioner.providers.gcp.families import gce_family  # lazy: startup (cloud code only when asked)

    return gce_family(instance_type)


HOOKS = CloudHooks(name="gcp", request_preview=request_preview, provider=provider, baker=baker,
                   price_source=price_source, quota_reader=quota_reader, family_disk_map=family_disk_map,
                   local_ssd=local_ssd, catalog_check=catalog_check, family_of=family_of)
