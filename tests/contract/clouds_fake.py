"""The in-memory fake (tests/fakes.py) as a contract-suite cloud."""

from __future__ import annotations

import pytest

from provisioner.catalog.models import Offer
from provisioner.providers.base import CapacityError, InstanceRecord
from tests.contract.harness import CloudHarness, ClusterHarness, spec_maker
from tests.fakes import FakeProvider


def gce_offer(zone: str) -> Offer:
    return Offer("gcp", "n1-standard-8", "n1", "T4", 1, 16.0, 8, 30, zone.rsplit("-", 1)[0], zone, 0.73, 0.29,
                 "attachable", ("standard", "balanced", "ssd"), 9000, "x86_64")


def a2_offer(zone: str) -> Offer:
    """One A100 node: a family GCE places compactly (N1 cannot be), for the cluster cases."""
    return Offer("gcp", "a2-highgpu-1g", "a2-highgpu", "A100", 1, 40.0, 12, 85, zone.rsplit("-", 1)[0], zone, 3.67, 1.47,
                 "bundled", ("balanced", "ssd"), 3000, "x86_64")


@pytest.fixture
def fake_cloud() -> CloudHarness:
    fake = FakeProvider("gcp")

    def plant_unmanaged(name: str, offer: Offer) -> None:
        fake.unmanaged[name] = InstanceRecord(name, "gcp", offer.region, offer.zone, offer.instance_type, "RUNNING",
                                              None, None)

    def fail(offer: Offer) -> None:
        fake.fail(offer.location, CapacityError("ZONE_RESOURCE_POOL_EXHAUSTED", code="ZONE_RESOURCE_POOL_EXHAUSTED"))

    return CloudHarness(
        name="fake", provider=fake, twin=fake.twin, offers=[gce_offer("us-central1-a"), gce_offer("europe-west4-a")],
        spec=spec_maker("#!/bin/bash\necho TRAINVM_STATUS=start\n"), plant_unmanaged=plant_unmanaged,
        fail_after_create_starts=fail, put_report=lambda rec, report: fake.reports.__setitem__(rec.name, report),
        leftovers=lambda: sorted([*fake.vms, *fake.unmanaged, *(f"placement {p}" for p in fake.placements)]),
        cluster=ClusterHarness(
            offers=[a2_offer("us-central1-a"), a2_offer("europe-west4-a")],
            stock_out=lambda offer, room: fake.capacity.__setitem__(offer.location, room)))
