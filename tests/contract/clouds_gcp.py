"""GcpProvider against the loopback GCE emulator (tests/emulators/gce.py), through google-cloud-compute."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.catalog.models import Offer
from provisioner.providers.base import InstanceRecord
from tests.contract.clouds_fake import a2_offer, gce_offer
from tests.contract.harness import CloudHarness, ClusterHarness, b64_json, spec_maker

PROJECT = "contract-proj"
CIDR = "203.0.113.7/32"  # every GCE spec has ssh_from: the VPC firewall rules are part of each create
DEFAULT_RULES = {"default-allow-icmp", "default-allow-internal", "default-allow-rdp", "default-allow-ssh"}
TRIES = 4


@pytest.fixture(scope="session")
def contract_gce_server():
    from tests.emulators.gce_group import GceGroupEmulator

    with GceGroupEmulator(seed=11) as emu:
        yield emu


@pytest.fixture
def gcp_cloud(contract_gce_server) -> Any:
    from provisioner.providers.gcp.provider import GcpProvider

    gce = contract_gce_server
    gce.reset()
    gce.polls_to_done, gce.require_auth, gce.projects = 1, False, None

    def make() -> GcpProvider:
        return GcpProvider(endpoint=gce.url, project=PROJECT, retry_base_delay=0, poll_interval=0, op_timeout=60,
                           tries=TRIES)

    base = spec_maker("#!/bin/bash\necho TRAINVM_STATUS=start\n")

    def spec(**kw: Any):
        kw.setdefault("ssh_from", CIDR)
        return base(**kw)

    def plant_unmanaged(name: str, offer: Offer) -> None:
        make().create(spec(name=name, ssh_from=None), offer)
        with gce._lock:
            gce.instances[gce.find(name)]["labels"] = {"team": "research"}

    def fail(offer: Offer) -> None:
        # the insert goes through and the VM exists (PROVISIONING); waiting for its operation then fails TRIES
        # times in a row (503): RetryExhaustedError, and the cleanup must delete the VM and its firewall rules
        gce.inject("unavailable_503", zone=offer.zone, method="zoneOperations.wait", times=TRIES)

    def put_report(rec: InstanceRecord, report: dict[str, Any]) -> None:
        gce.set_guest_attributes(rec.name, {"report": b64_json(report)})

    def leftovers() -> list[str]:
        with gce._lock:
            vms = [f"instance {k[2]}" for k in gce.instances if k[0] == PROJECT]
        rules = [f"firewall {n}" for n in gce.firewall_names(PROJECT) if n not in DEFAULT_RULES]
        with gce._lock:
            policies = [f"resourcePolicy {k[2]}" for k in gce.policies if k[0] == PROJECT]
        return sorted(vms + rules + policies)

    def stock_out(offer: Offer, room: int) -> None:
        with gce._lock:
            gce.capacity[str(offer.zone)] = room

    yield CloudHarness(
        name="gcp", provider=make(), twin=make, offers=[gce_offer("us-central1-a"), gce_offer("europe-west4-a")],
        spec=spec, plant_unmanaged=plant_unmanaged, fail_after_create_starts=fail, put_report=put_report,
        leftovers=leftovers, stopped_states=("TERMINATED",),
        cluster=ClusterHarness(offers=[a2_offer("us-central1-a"), a2_offer("europe-west4-a")], stock_out=stock_out))
    gce.reset()
