"""Capabilities beyond the Provider contract are typed interfaces (providers/capabilities.py) that each provider
class names among its bases, never a method probed by name from outside ``providers/`` (issue 26)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provisioner.hooks import HOOKS
from provisioner.providers.capabilities import ClusterReader, ImagePinner, LocalSsdBuilder, Preflighter

ROOT = Path(__file__).parents[2]


def _provider_class(cloud: str) -> type:
    """The class the cloud's ``provider`` hook builds (building one asks for credentials)."""
    from provisioner.providers.aws.provider import AwsProvider
    from provisioner.providers.azure.provider import AzureProvider
    from provisioner.providers.gcp.provider import GcpProvider

    return {"gcp": GcpProvider, "azure": AzureProvider, "aws": AwsProvider}[cloud]


@pytest.mark.parametrize(("cloud", "expected"), [
    ("gcp", {ImagePinner, ClusterReader}),
    ("azure", {ImagePinner, ClusterReader, Preflighter}),
    ("aws", {ImagePinner, ClusterReader}),
])
def test_each_provider_declares_the_capabilities_it_implements(cloud: str, expected: set[type]) -> None:
    cls = _provider_class(cloud)
    declared = {c for c in (ImagePinner, ClusterReader, Preflighter) if c in cls.__mro__}
    assert declared == expected
    # and what it declares it has (isinstance of the runtime-checkable protocol agrees with the declaration)
    assert {c for c in (ImagePinner, ClusterReader, Preflighter) if issubclass(cls, c)} == expected


def test_only_gce_attaches_local_ssd_as_separate_disks() -> None:
    """The ``local_ssd`` hook gives the facts (catalog/costs.py prices scratch disks with them, issue 37: without
    importing the request builder); the request builder attaches disks with the same ``local_ssd_count``."""
    from provisioner.providers.gcp import request as builder

    facts = {n: h.local_ssd() for n, h in HOOKS.items() if h.local_ssd}
    assert {n for n, b in facts.items() if isinstance(b, LocalSsdBuilder)} == set(facts) == {"gcp"}
    assert builder.local_ssd_count is facts["gcp"].local_ssd_count


def test_no_capability_is_probed_by_name_outside_providers() -> None:
    rx = re.compile(r"""(getattr|hasattr)\((provider|providers\[[^]]*\]|builder)\b""")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "provisioner").rglob("*.py"))
             if not p.relative_to(ROOT).as_posix().startswith("provisioner/providers/")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if rx.search(line)]
    assert found == []
