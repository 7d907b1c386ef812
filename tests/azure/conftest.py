"""Fixtures for the Azure provider scenarios: one ARM emulator per module (reset per test), the
environment trainvm reads (SPEC "Environment"), a LaunchSpec for profiles/examples/bert-finetune-t4.yaml
and catalog offers."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # --import-mode=importlib does not put the repo root on sys.path
    sys.path.insert(0, str(REPO))

from tests.emulators.arm import DEFAULT_SUBSCRIPTION, ArmEmulator  # noqa: E402

T4_PROFILE = REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHtrainvmTestKeyOnlyForTheEmulator0000000 tester@example"
USER_DATA = "#cloud-config\nwrite_files:\n  - path: /etc/trainvm/profile\n    content: bert-finetune\nruncmd:\n  - [bash, -c, 'echo TRAINVM_STATUS=start > /dev/console']\n"


@pytest.fixture(scope="module")
def server():
    with ArmEmulator() as emu:
        yield emu


@pytest.fixture
def emu(server, monkeypatch, tmp_path):
    server.reset()
    server.polls, server.lro_style, server.page_size = 1, "async", 100
    for k, v in server.env().items():
        monkeypatch.setenv(k, v)
    key = tmp_path / "id_ed25519.pub"
    key.write_text(SSH_KEY + "\n")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(key))
    monkeypatch.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
    monkeypatch.setenv("TRAINVM_AZURE_OP_TIMEOUT", "10")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0.01")
    yield server
    server.finish_operations(stuck=True)  # never leave an SDK poller spinning on a never-ending operation


@pytest.fixture
def provider(emu):
    from provisioner.providers.azure.provider import AzureProvider

    return AzureProvider()


@pytest.fixture(scope="session")
def t4_spec():
    """The LaunchSpec ``up`` builds for the T4 example (cloud-init text standing in for the renderer's)."""
    from provisioner.profile import load_profile
    from provisioner.providers.base import LaunchSpec, labels_for, vm_name
    from provisioner.provision.launch import resolved_profile_json

    loaded = load_profile(T4_PROFILE)
    p = loaded.profile
    return LaunchSpec(
        name=vm_name(p.name, loaded.hash), profile_name=p.name, profile_hash=loaded.hash,
        profile_json=resolved_profile_json(loaded), labels=labels_for(p.name, loaded.hash),
        startup_script="#!/bin/bash\necho hi\n", user_data=USER_DATA, os=p.stack.os,
        boot_disk_type=p.hardware.boot_disk.type, boot_disk_gib=p.hardware.boot_disk.size_gib,
        local_nvme_gib=p.hardware.local_nvme_gib, spot=p.placement.spot, max_price_per_hour=p.placement.max_price_per_hour,
        max_run_hours=p.lifecycle.max_run_hours, ssh_from=p.placement.ssh_from,
        data_sources=tuple(d.source for d in p.data))


@pytest.fixture(scope="session")
def offers():
    """{(region, size): Offer} for the Azure rows of the embedded catalog."""
    from provisioner.catalog.storage import load_catalog

    return {(o.region, o.instance_type): o for o in load_catalog().offers if o.cloud == "azure"}


@pytest.fixture
def t4(offers):
    return offers[("eastus", "Standard_NC4as_T4_v3")]


def named(spec, name, **changes):
    """The same spec under another VM name (and other changes)."""
    return replace(spec, name=name, **changes)


# ---------------------------------------------------------------------------------------------- Azurite (blob)
#: the payload-store regions the tests use, and the keys Azurite is started with for their accounts
AZURITE_REGIONS = ("eastus", "westeurope", "westus2")


def azurite_keys() -> dict[str, str]:
    import base64
    import hashlib

    from provisioner.providers.azure.store import account_name

    return {account_name(DEFAULT_SUBSCRIPTION, r): base64.b64encode(hashlib.sha256(r.encode()).digest() * 2).decode()
            for r in AZURITE_REGIONS}


@pytest.fixture(scope="session")
def tls_ca():
    """One trustme CA for the session's HTTPS fakes (Azurite, and the ARM emulator where both are used)."""
    import trustme

    return trustme.CA()


@pytest.fixture(scope="session")
def azurite(tls_ca):
    """Azurite's blob service on 127.0.0.1 (tests/emulators/azurite_server.py), for the whole session."""
    from tests.emulators.azurite_server import Azurite

    with Azurite(tls_ca, azurite_keys()) as az:
        yield az
