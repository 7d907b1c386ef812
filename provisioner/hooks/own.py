"""A part that drives one cloud's own client (its baker) is made only on that cloud's provider class: the one check,
for every cloud's hook (a stand-in provider would fail later, deep in a cloud call)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from provisioner.providers.base import Provider

P = TypeVar("P")


def own_provider(provider: Provider, cls: type[P]) -> P:
    """``provider`` as ``cls``; TypeError when it is another class."""
    if not isinstance(provider, cls):
        raise TypeError(f"a bake on this cloud runs through the {cls.__name__}, not {type(provider).__name__}")
    return provider
