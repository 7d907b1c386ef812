"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import pytest

from tests.fakes import FakeProvider


@pytest.fixture
def clouds(monkeypatch, install_providers):
    """Fake GCE, Azure and AWS providers installed for the test (and removed after it)."""
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "0")
    fakes = {"gcp": FakeProvider("gcp"), "azure": FakeProvider("azure"), "aws": FakeProvider("aws")}
    install_providers(fakes)
    return fakes
