"""Capabilities beyond the Provider contract are typed interfaces (providers/capabilities.py) that each provider
class names among its bases, never a method probed by name from outside ``providers/`` (issue 26)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from provisioner.providers.capabilities import ClusterReader, ImagePinner, LocalSsdBuilder, Preflighter
from provisioner.providers.registry import CLOUDS

ROOT = Path(__file__).parents[2]


def _provider_class(cloud: str) -> type:
    module, _, cls = (CLOUDS[cloud].provider or "").partition(":")
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


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
    """``CloudSpec.local_ssd`` names the facts (catalog/costs.py prices scratch disks with them, issue 37: without
    importing the request builder); the request builder attaches disks with the same ``local_ssd_count``."""
    facts = {n: importlib.import_module(c.local_ssd) for n, c in CLOUDS.items() if c.local_ssd}
    assert {n for n, b in facts.items() if isinstance(b, LocalSsdBuilder)} == set(facts) == {"gcp"}
    builder = importlib.import_module(CLOUDS["gcp"].request_builder)
    assert builder.local_ssd_count is facts["gcp"].local_ssd_count


def test_no_capability_is_probed_by_name_outside_providers() -> None:
    rx = re.compile(r"""(getattr|hasattr)\((provider|providers\[[^]]*\]|builder)\b""")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "provisioner").rglob("*.py"))
             if not p.relative_to(ROOT).as_posix().startswith("provisioner/providers/")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if rx.search(line)]
    assert found == []
