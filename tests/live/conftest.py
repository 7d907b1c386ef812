"""Fixtures of the live lane's tests: the emulator runs (in `make test`) get the e2e tests' environment."""

from __future__ import annotations

import pytest

from tests.helpers import payload_stores

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHtrainvmTestKeyOnlyForTheEmulator0000000 tester@example"


@pytest.fixture
def env(monkeypatch, tmp_path):
    """As tests/e2e/conftest.py's: no real cloud's credentials, no retry or ready-poll delays, an SSH key and the
    payload stores' emulators. The scenario's CLI subprocesses inherit this environment."""
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "0.05")
    for var in ("TRAINVM_GCE_ENDPOINT", "GOOGLE_CLOUD_PROJECT", "AZURE_SUBSCRIPTION_ID", "TRAINVM_AZURE_ENDPOINT",
                "TRAINVM_AZURE_ACCESS_TOKEN", "TRAINVM_AWS_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    key = tmp_path / "id.pub"
    key.write_text(SSH_KEY + "\n")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(key))
    payload_stores(monkeypatch)
    return monkeypatch
