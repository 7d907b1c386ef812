"""Cloud providers behind one small contract (``base.Provider``), loaded lazily by name so that
``trainvm --help``, ``validate`` and ``plan`` never import a cloud SDK."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from provisioner.errors import CloudError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from provisioner.providers.base import Provider

    #: cloud -> "module:Class", for the clouds the registry marks provisionable
    PROVIDERS: dict[str, str]

_override: dict[str, Provider] = {}


def get_provider(cloud: str, *, candidate_regions: Callable[[], Iterable[str]] | None = None) -> Provider:
    """The provider for ``cloud`` (tests may install fakes with ``set_provider``). ``candidate_regions``: where
    the caller (a layer above, which knows the catalog) says the cloud's VMs can be; handed to the providers that
    list region by region (``CloudSpec.candidate_regions``), ignored by the others."""
    if cloud in _override:
        return _override[cloud]
    from provisioner.providers.registry import CLOUDS, providers  # lazy: startup (--help imports providers.names only)

    registered = providers()
    target = registered.get(cloud)
    if target is None:
        raise CloudError(f"trainvm cannot provision on {cloud!r} yet (supported: {', '.join(registered)})")
    module, _, cls = target.partition(":")
    made = getattr(importlib.import_module(module), cls)
    if candidate_regions is not None and CLOUDS[cloud].candidate_regions:
        return made(candidate_regions=candidate_regions)
    return made()


def __getattr__(name: str) -> dict[str, str]:
    """``PROVIDERS``, read from the registry when first asked: importing this package (``providers.names`` for
    ``trainvm --help``) does not import the registry."""
    if name == "PROVIDERS":
        from provisioner.providers.registry import providers  # lazy: startup (--help imports providers.names only)

        return providers()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def set_provider(cloud: str, provider: Provider | None) -> None:
    if provider is None:
        _override.pop(cloud, None)
    else:
        _override[cloud] = provider
