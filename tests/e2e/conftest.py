"""Shared fixtures of the CLI-against-emulators tests."""

from __future__ import annotations

from pathlib import Path

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


def ssh_key(folder: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public = Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                    serialization.PublicFormat.OpenSSH)
    path = folder / "aws_ed25519.pub"
    path.write_text(public.decode() + " tester@example\n")
    return path


@pytest.fixture
def aws(env, tmp_path):
    pytest.importorskip("moto.server")
    from tests.emulators.aws import shared_moto

    emu = shared_moto()
    emu.reset()
    for k, v in emu.env().items():
        env.setenv(k, v)
    env.setenv("TRAINVM_AWS_OP_TIMEOUT", "5")
    env.setenv("TRAINVM_SSH_PUBLIC_KEY", str(ssh_key(tmp_path)))  # EC2 (and moto) check the key's encoding
    return emu
