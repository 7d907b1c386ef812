"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import pytest

from provisioner.providers import set_provider
from tests.fakes import FakeProvider


@pytest.fixture
def clouds(monkeypatch):
    """Fake GCE, Azure and AWS providers installed for the test (and removed after it)."""
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "0")
    fakes = {"gcp": FakeProvider("gcp"), "azure": FakeProvider("azure"), "aws": FakeProvider("aws")}
    for cloud, fake in fakes.items():
        set_provider(cloud, fake)
    yield fakes
    for cloud in fakes:
        set_provider(cloud, None)
