"""AzureProvider against the loopback ARM emulator (tests/emulators/arm.py), through the azure-mgmt-* SDKs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from provisioner.catalog.models import Offer
from provisioner.providers.base import InstanceRecord
from tests.contract.harness import CloudHarness, ClusterHarness, spec_maker

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHtrainvmTestKeyOnlyForTheEmulator0000000 tester@example"
USER_DATA = "#cloud-config\nruncmd:\n  - [bash, -c, 'echo TRAINVM_STATUS=start > /dev/console']\n"
T4 = "Standard_NC4as_T4_v3"
A100 = "Standard_ND96asr_v4"  # ND A100 v4: InfiniBand, placed in a proximity placement group


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
    from provisioner.providers.azure import request as R
    from provisioner.providers.azure.provider import AzureProvider

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
        if rec.cluster:  # a scale-set instance: Run Command output is planted under NAME_<instance id>
            iid = str(rec.cloud_id).rsplit("/", 1)[1]
            emu.set_run_command_output(R.names(rec.cluster).rg, f"{rec.cluster}_{iid}", json.dumps(report), "")
            return
        emu.set_run_command_output(R.names(rec.name).rg, rec.name, json.dumps(report), "")

    def leftovers() -> list[str]:
        """Every group, every resource in it, and every scale-set instance."""
        out = []
        with emu._lock:
            for g in emu.resource_groups():
                out.append(f"resource group {g}")
                for rid in emu.resources_in(g):
                    out.append(f"resource {rid.split('/providers/', 1)[1]}")
                    rec = emu.state.by_id(rid)
                    out.extend(f"instance {rec['name']}_{i}" for i in rec["extra"].get("instances", {}))
        return sorted(out)

    def stock_out(offer: Offer, room: int) -> None:
        emu.inject("partial_capacity_lro", location=offer.region, size=offer.instance_type, times=None, created=room)

    yield CloudHarness(
        name="azure", provider=AzureProvider(), twin=AzureProvider,
        offers=[azure_offers[("eastus", T4)], azure_offers[("eastus2", T4)]], spec=spec_maker(USER_DATA),
        plant_unmanaged=plant_unmanaged, fail_after_create_starts=fail, put_report=put_report,
        leftovers=leftovers, stopped_states=("DEALLOCATED",),
        cluster=ClusterHarness(offers=[azure_offers[("eastus", A100)], azure_offers[("westus2", A100)]],
                               stock_out=stock_out))
    emu.finish_operations(stuck=True)  # never leave an SDK poller spinning
