"""AzureProvider against the loopback ARM emulator (tests/emulators/arm.py), through the azure-mgmt-* SDKs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from provisioner.catalog.models import Offer
from provisioner.providers.base import InstanceRecord
from tests.contract.harness import CloudHarness, spec_maker

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHtrainvmTestKeyOnlyForTheEmulator0000000 tester@example"
USER_DATA = "#cloud-config\nruncmd:\n  - [bash, -c, 'echo TRAINVM_STATUS=start > /dev/console']\n"
T4 = "Standard_NC4as_T4_v3"


@pytest.fixture(scope="session")
def contract_arm_server():
    from tests.emulators.arm import ArmEmulator

    with ArmEmulator() as emu:
        yield emu


@pytest.fixture(scope="session")
def azure_offers() -> dict[tuple[str, str], Offer]:
    from provisioner.catalog.storage import load_catalog

    return {(o.region, o.instance_type): o for o in load_catalog().offers if o.cloud == "azure"}


@pytest.fixture
def azure_cloud(contract_arm_server, azure_offers, monkeypatch, tmp_path) -> Any:
    from provisioner.providers import azure_request as R
    from provisioner.providers.azure import AzureProvider

    emu = contract_arm_server
    emu.reset()
    emu.polls, emu.lro_style, emu.page_size = 1, "async", 100
    for k, v in emu.env().items():
        monkeypatch.setenv(k, v)
    key = tmp_path / "id_ed25519.pub"
    key.write_text(SSH_KEY + "\n")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(key))
    monkeypatch.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
    monkeypatch.setenv("TRAINVM_AZURE_OP_TIMEOUT", "60")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0.01")

    def plant_unmanaged(name: str, offer: Offer) -> None:
        AzureProvider().create(spec_maker(USER_DATA)(name=name), offer)
        rg = R.names(name).rg
        with emu._lock:
            emu.state.vm(rg, name)["body"]["tags"] = {"team": "research"}
            emu.state.group(rg)["tags"] = {"team": "research"}

    def fail(offer: Offer) -> None:
        # the group, VNet and NSG are made, then the VM's operation fails (AllocationFailed, HTTP 200 on the LRO)
        emu.inject("allocation_failed_lro", location=offer.region)

    def put_report(rec: InstanceRecord, report: dict[str, Any]) -> None:
        emu.set_run_command_output(R.names(rec.name).rg, rec.name, json.dumps(report), "")

    yield CloudHarness(
        name="azure", provider=AzureProvider(), twin=AzureProvider,
        offers=[azure_offers[("eastus", T4)], azure_offers[("eastus2", T4)]], spec=spec_maker(USER_DATA),
        plant_unmanaged=plant_unmanaged, fail_after_create_starts=fail, put_report=put_report,
        leftovers=lambda: [f"resource group {g}" for g in emu.resource_groups()], stopped_states=("DEALLOCATED",))
    emu.finish_operations(stuck=True)  # never leave an SDK poller spinning
