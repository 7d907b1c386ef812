"""The providers the commands use, by cloud: a ``ProviderRegistry`` takes them in its constructor (a test's fakes),
and builds any other provisionable cloud's with its ``provider`` hook (hooks/__init__.py) each time it is asked.

``DEFAULT`` is the one registry the commands ask (``get_provider``, ``provider_clouds``): the real providers. A test
installs its own with the ``install_providers`` fixture (tests/conftest.py), which swaps ``DEFAULT`` for the test's duration;
code that is handed providers (``Preflight``, ``BakedImages``...) takes them as arguments instead."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from provisioner.errors import CloudError
from provisioner.hooks import HOOKS
from provisioner.providers.registry import provisionable_clouds

if TYPE_CHECKING:
    from provisioner.providers.base import Provider
    from provisioner.providers.hook_types import ProviderFactory


def real_factories() -> dict[str, ProviderFactory]:
    """cloud -> its provider hook, for the provisionable clouds (providers/clouds.py ``provisionable``)."""
    return {c: f for c in provisionable_clouds() if (f := HOOKS[c].provider) is not None}


class ProviderRegistry:
    """cloud -> provider. ``providers``: ready-made ones, handed back as they are (a test's fakes); ``factories``:
    the rest, built on each ask (a provider's constructor makes no cloud call); default: the real ones."""

    def __init__(self, providers: Mapping[str, Provider] | None = None,
                 factories: Mapping[str, ProviderFactory] | None = None) -> None:
        self._given = dict(providers or {})
        self._factories = real_factories() if factories is None else dict(factories)

    @property
    def clouds(self) -> tuple[str, ...]:
        """The clouds this registry has a provider for: the factories' in the registry's order, then the given."""
        return tuple(dict.fromkeys([*self._factories, *self._given]))

    def get(self, cloud: str, *, candidate_regions: Callable[[], Iterable[str]] | None = None) -> Provider:
        """The provider for ``cloud``; CloudError for a cloud it has none for. ``candidate_regions``: handed to the
        factory (``ProviderFactory``: where the caller says the cloud's VMs can be)."""
        if cloud in self._given:
            return self._given[cloud]
        factory = self._factories.get(cloud)
        if factory is None:
            raise CloudError(f"trainvm cannot provision on {cloud!r} yet (supported: {', '.join(self.clouds)})")
        return factory() if candidate_regions is None else factory(candidate_regions=candidate_regions)


#: the registry the commands ask: the real providers (the ``providers`` test fixture swaps it)
DEFAULT = ProviderRegistry()


def get_provider(cloud: str, *, candidate_regions: Callable[[], Iterable[str]] | None = None) -> Provider:
    """The provider for ``cloud`` from ``DEFAULT`` (read when called, so a test's registry takes effect)."""
    return DEFAULT.get(cloud, candidate_regions=candidate_regions)


def provider_clouds() -> tuple[str, ...]:
    """The clouds ``DEFAULT`` has a provider for."""
    return DEFAULT.clouds
