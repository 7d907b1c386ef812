"""The local cloud's hooks (providers/hook_types.py): each imports its module of providers/local/ when called."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.hooks.own import own_provider
from provisioner.providers.hook_types import CloudHooks

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from provisioner.providers.bake_base import Baker
    from provisioner.providers.base import LaunchSpec, Provider
    from provisioner.providers.offer import Offer


def provider(*, candidate_regions: Callable[[], Iterable[str]] | None = None) -> Provider:  # one folder: no regions
    from provisioner.providers.local.provider import LocalProvider  # lazy: startup (cloud code only when asked)

    return LocalProvider()


def request_preview(spec: LaunchSpec, offer: Offer) -> dict[str, object]:
    from provisioner.providers.local.request import request_preview  # lazy: startup (cloud code only when asked)

    return request_preview(spec, offer)


def baker(provider: Provider) -> Baker:
    from provisioner.providers.local.bake import LocalBaker  # lazy: startup (cloud code only when asked)
    from provisioner.providers.local.provider import LocalProvider  # lazy: startup (cloud code only when asked)

    return LocalBaker(own_provider(provider, LocalProvider))


def host_offers() -> tuple[Offer, ...]:
    from provisioner.providers.local.host import host_offers  # lazy: startup (cloud code only when asked)

    return host_offers()


def family_of(instance_type: str) -> str:
    from provisioner.providers.local.host import family_of  # lazy: startup (cloud code only when asked)

    return family_of(instance_type)


HOOKS = CloudHooks(name="local", request_preview=request_preview, provider=provider, baker=baker, host_offers=host_offers,
                   family_of=family_of)
