"""Shared fixtures of the CLI-against-emulators tests."""

from __future__ import annotations

import pytest

from tests.helpers import payload_stores

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHtrainvmTestKeyOnlyForTheEmulator0000000 tester@example"


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "0")
    for var in ("TRAINVM_GCE_ENDPOINT", "GOOGLE_CLOUD_PROJECT", "AZURE_SUBSCRIPTION_ID", "TRAINVM_AZURE_ENDPOINT", "TRAINVM_AZURE_ACCESS_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    key = tmp_path / "id.pub"
    key.write_text(SSH_KEY + "\n")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(key))
    payload_stores(monkeypatch)
    return monkeypatch
