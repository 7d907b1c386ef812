"""The failover loop: capacity -> next zone, quota -> next region / cloud, auth stops."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from provisioner.catalog import Catalog
from provisioner.catalog.models import Offer
from provisioner.errors import CloudError
from provisioner.planner import PlanRequest, plan
from provisioner.providers.base import (
    AuthError,
    CapacityError,
    ConflictError,
    InstanceRecord,
    LaunchSpec,
    QuotaError,
    RetryExhaustedError,
    labels_for,
    vm_name,
)
from provisioner.provision.failover import ProvisionError, find_existing, provision
from tests.fakes import FakeProvider

HASH = "ab" * 32


def offer(cloud: str, region: str, zone: str | None, price: float = 1.0) -> Offer:
    return Offer(cloud, "n1-standard-8", "n1", "T4", 1, 16.0, 8, 30, region, zone, price, None, "attachable", ("balanced",), 0, "x86_64")


OFFERS = [
    offer("gcp", "us-central1", "us-central1-a"),
    offer("gcp", "us-central1", "us-central1-b"),
    offer("gcp", "us-east1", "us-east1-c"),
    offer("gcp", "us-east1", "us-east1-d"),
    offer("azure", "eastus", None),
]


def spec(_: Offer) -> LaunchSpec:
    return LaunchSpec(
        name=vm_name("bert", HASH), profile_name="bert", profile_hash=HASH, profile_json="{}", labels=labels_for("bert", HASH),
        startup_script="#!/bin/bash\n", user_data="#!/bin/bash\n", os="ubuntu-22.04", boot_disk_type="balanced",
        boot_disk_gib=100, local_nvme_gib=0, spot=False, max_price_per_hour=None, max_run_hours=None, ssh_from=None,
    )


@pytest.fixture
def clouds() -> dict[str, FakeProvider]:
    return {"gcp": FakeProvider("gcp"), "azure": FakeProvider("azure")}


def test_first_offer_wins(clouds) -> None:
    result = provision(OFFERS, spec, clouds.__getitem__)
    record, attempts = result.record, list(result.attempts)
    assert record.zone == "us-central1-a" and [a.outcome for a in attempts] == ["created"]
    assert record.name == "trainvm-bert-abababab"


def test_zone_then_region_then_cloud(clouds) -> None:
    gcp = clouds["gcp"]
    gcp.fail("us-central1-a", CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    gcp.fail("us-central1-b", QuotaError("Quota 'NVIDIA_T4_GPUS' exceeded", code="QUOTA_EXCEEDED"))
    gcp.fail("us-east1-c", RetryExhaustedError("503 after 4 tries", code="503"))
    gcp.fail("us-east1-d", QuotaError("GPUS_ALL_REGIONS", code="QUOTA_EXCEEDED", scope="cloud"))
    seen = []
    result = provision(OFFERS, spec, clouds.__getitem__, seen.append)
    record, attempts = result.record, list(result.attempts)
    assert record.cloud == "azure"
    assert [a.outcome for a in attempts] == ["capacity", "quota", "retry-exhausted", "quota-cloud", "created"]
    assert seen == attempts


def test_regional_quota_skips_rest_of_region(clouds) -> None:
    clouds["gcp"].fail("us-central1-a", QuotaError("regional quota", code="QUOTA_EXCEEDED"))
    result = provision(OFFERS, spec, clouds.__getitem__)
    record = result.record
    assert record.zone == "us-east1-c"
    assert ("create", "us-central1-b") not in clouds["gcp"].calls


def test_everything_exhausted_lists_attempts(clouds) -> None:
    for o in OFFERS:
        clouds[o.cloud].fail(o.location, CapacityError(f"no capacity in {o.location}", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    with pytest.raises(ProvisionError) as info:
        provision(OFFERS, spec, clouds.__getitem__)
    assert len(info.value.attempts) == 5 and info.value.exit_code == 1
    assert "us-east1-d" in str(info.value) and "nothing was left behind" in str(info.value)
    assert not clouds["gcp"].vms and not clouds["azure"].vms


def test_auth_error_stops_with_exit_3(clouds) -> None:
    clouds["gcp"].fail("us-central1-a", AuthError("401 invalid credentials", code="401"))
    with pytest.raises(CloudError) as info:
        provision(OFFERS, spec, clouds.__getitem__)
    assert info.value.exit_code == 3
    assert clouds["gcp"].calls == [("create", "us-central1-a")]


def test_find_existing_same_hash_and_conflict(clouds) -> None:
    rec = InstanceRecord("trainvm-bert-abababab", "azure", "eastus", None, "Standard_NC4as_T4_v3", "RUNNING", "bert", HASH[:16])
    clouds["azure"].vms[rec.name] = rec
    assert find_existing(rec.name, ["gcp", "azure"], clouds.__getitem__, HASH) == rec
    with pytest.raises(ConflictError):
        find_existing(rec.name, ["gcp", "azure"], clouds.__getitem__, "cd" * 32)
    assert find_existing("other", ["gcp", "azure"], clouds.__getitem__, HASH) is None


def test_max_attempts_bounds_the_walk(clouds) -> None:
    for o in OFFERS:
        clouds[o.cloud].fail(o.location, CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    with pytest.raises(ProvisionError) as info:
        provision(OFFERS, spec, clouds.__getitem__, max_attempts=2)
    assert len(info.value.attempts) == 2 and "--max-attempts" in str(info.value)


def test_returns_the_offer_it_created_and_its_price(clouds) -> None:
    offers = [offer("gcp", "us-central1", "us-central1-a", 0.5), offer("gcp", "us-east1", "us-east1-c", 0.6)]
    clouds["gcp"].fail("us-central1-a", CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    result = provision(offers, spec, clouds.__getitem__, price_of=lambda o: o.price_hourly * 0.4)
    assert result.offer is offers[1] and result.price_hourly == pytest.approx(0.24)
    assert result.record.price_hourly == pytest.approx(0.24) and result.record.zone == "us-east1-c"
    assert [a.price_hourly for a in result.attempts] == [pytest.approx(0.2), pytest.approx(0.24)]
    assert "($0.240/h)" in result.attempts[1].render()


def test_offers_above_the_bound_are_never_tried(clouds) -> None:
    offers = [offer("gcp", "us-central1", "us-central1-a", 0.5), offer("gcp", "us-east1", "us-east1-c", 0.9),
              offer("azure", "eastus", None, 0.6)]
    clouds["gcp"].fail("us-central1-a", CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    clouds["azure"].fail("eastus", CapacityError("SkuNotAvailable", code="SkuNotAvailable"))
    with pytest.raises(ProvisionError) as err:
        provision(offers, spec, clouds.__getitem__, bound=0.65)
    assert [(a.cloud, a.zone or a.region) for a in err.value.attempts] == [("gcp", "us-central1-a"), ("azure", "eastus")]
    assert str(err.value).startswith("no VM could be created within the failover bound of $0.650/h after 2 attempt(s)")
    assert ("create", "us-east1-c") not in clouds["gcp"].calls
    assert not clouds["gcp"].vms and not clouds["azure"].vms


def test_an_offer_priced_exactly_at_the_bound_is_tried(clouds) -> None:
    """The bound is the most an attempt may cost: an offer at it is allowed (`max_failover_premium: 0` makes the
    bound the chosen offer's own price; `max_price_per_hour` may equal an offer's price)."""
    offers = [offer("gcp", "us-central1", "us-central1-a", 0.65), offer("gcp", "us-east1", "us-east1-c", 0.65)]
    clouds["gcp"].fail("us-central1-a", CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    result = provision(offers, spec, clouds.__getitem__, bound=0.65)
    assert [(a.zone, a.outcome) for a in result.attempts] == [("us-central1-a", "capacity"), ("us-east1-c", "created")]
    assert result.offer is offers[1] and result.price_hourly == 0.65


def test_a_zero_failover_premium_still_creates_the_chosen_offer(clouds) -> None:
    """The plan's bound with `max_failover_premium: 0` (or a `max_price_per_hour` equal to the chosen price) is the
    chosen offer's price: `up` hands the plan's price and bound to the walk, which must not refuse the chosen offer."""
    chosen = offer("gcp", "us-central1", "us-central1-a", 0.53)
    same_price = offer("gcp", "us-east1", "us-east1-c", 0.53)
    dearer = offer("azure", "eastus", None, 0.54)
    catalog = Catalog(offers=(chosen, same_price, dearer), source="test", date=date(2026, 1, 1), schema_version=1,
                      path=Path("/synthetic"))
    for req in (PlanRequest(max_failover_premium=0), PlanRequest(max_price_per_hour=0.53, max_failover_premium=0)):
        p = plan(req, catalog, date(2026, 1, 2))
        assert p.chosen == chosen and p.failover_bound == 0.53 and p.failover == (same_price,)
        fresh = {"gcp": FakeProvider("gcp"), "azure": FakeProvider("azure")}
        result = provision([p.chosen, *p.failover, dearer], spec, fresh.__getitem__, price_of=p.price,
                           bound=p.failover_bound)
        assert result.offer == chosen and [a.outcome for a in result.attempts] == ["created"]
        fresh["gcp"].vms.clear()
        fresh["gcp"].fail("us-central1-a", CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
        result = provision([p.chosen, *p.failover, dearer], spec, fresh.__getitem__, price_of=p.price,
                           bound=p.failover_bound)
        assert result.offer == same_price and ("create", "eastus") not in fresh["azure"].calls
