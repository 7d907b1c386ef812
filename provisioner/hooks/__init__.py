"""Each cloud's code, as the layers above reach it: the table of typed hooks (providers/hook_types.py
``CloudHooks``, one per cloud: ``hooks/gcp.py``, ``hooks/azure.py``, ``hooks/aws.py``) and, in ``hooks/providers.py``,
the registry of providers the commands use.

This package sits above the cloud packages and below the stages: the catalog, the profile, provision, bake and the
commands import it; nothing under providers/ does (tests/unit/test_layers.py). A hook imports its cloud's module only
when called: importing this package imports no cloud package and no SDK (``--help`` never imports it; ``validate`` and
``plan`` call only the pure hooks: families, local SSD facts). Adding a cloud: a ``hooks/NAME.py`` with its
``HOOKS`` and one entry in ``HOOKS`` below (tests/unit/test_hooks.py keeps the table in step with ``CLOUDS``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from provisioner.hooks import aws, azure, gcp, local
from provisioner.providers.hook_types import CloudHooks
from provisioner.providers.names import or_list

if TYPE_CHECKING:
    from provisioner.providers.offer import Offer

#: cloud -> its hooks, in the registry's order (providers/clouds.py ``CLOUDS``)
HOOKS: Mapping[str, CloudHooks] = MappingProxyType({h.name: h for h in (gcp.HOOKS, azure.HOOKS, aws.HOOKS, local.HOOKS)})


def of(cloud: str) -> CloudHooks:
    """The hooks of ``cloud`` (KeyError for a cloud trainvm does not know; callers validate names first)."""
    return HOOKS[cloud]


def bakers() -> tuple[str, ...]:
    """The clouds that can bake (a ``baker`` hook)."""
    return tuple(n for n, h in HOOKS.items() if h.baker is not None)


def priced_clouds() -> tuple[str, ...]:
    """The clouds ``catalog refresh`` can renew (a ``price_source`` hook)."""
    return tuple(n for n, h in HOOKS.items() if h.price_source is not None)


def host_offers(clouds: tuple[str, ...]) -> tuple[Offer, ...]:
    """The offers ``clouds`` make from facts of this machine (their ``host_offers`` hooks), read now; only the clouds
    asked are read (a plan that does not name such a cloud reads nothing of the host)."""
    return tuple(o for c in clouds if (hook := HOOKS[c].host_offers) is not None for o in hook())


def family_of(cloud: str, instance_type: str) -> str:
    """The catalog's ``family`` of an instance type: the cloud's ``family_of`` hook, or the instance type itself."""
    hook = HOOKS[cloud].family_of
    return instance_type if hook is None else hook(instance_type)


def check_identity(cloud: str, value: str) -> str:
    """``placement.identity.CLOUD``: the cloud's own check of a pre-made VM identity (ValueError when refused)."""
    check = HOOKS[cloud].identity_check
    if check is None:
        takes = or_list(tuple(n for n, h in HOOKS.items() if h.identity_check is not None))
        raise ValueError(f"{cloud}: trainvm uses a pre-made VM identity only on {takes}")
    return check(value)
