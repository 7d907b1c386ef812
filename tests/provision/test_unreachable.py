"""Issue 36 item 26: when no attempt got an answer about capacity or quota (every one ended in a connection,
throttling or 5xx failure the retries could not get past: ``RetryExhaustedError``), `up` failed to reach the cloud:
exit 3 (cloud, network or credential error), not exit 1 (capacity exhausted)."""

from __future__ import annotations

import pytest

from provisioner.providers.base import CapacityError, RetryExhaustedError
from provisioner.provision.failover import ProvisionCloudError, ProvisionError, provision
from tests.fakes import FakeProvider
from tests.provision.test_failover import OFFERS, spec


@pytest.fixture
def clouds() -> dict[str, FakeProvider]:
    return {"gcp": FakeProvider("gcp"), "azure": FakeProvider("azure")}


def test_every_attempt_unreachable_is_a_cloud_error_exit_3(clouds) -> None:
    for o in OFFERS:
        clouds[o.cloud].fail(o.location, RetryExhaustedError("ServiceRequestError: connection refused", code="ServiceRequestError"))
    with pytest.raises(ProvisionCloudError) as info:
        provision(OFFERS, spec, clouds.__getitem__)
    assert info.value.exit_code == 3 and len(info.value.attempts) == len(OFFERS)
    assert "not a lack of capacity" in (info.value.hint or "")


def test_an_unreachable_payload_store_is_a_cloud_error_exit_3(clouds) -> None:
    """The payload store failing (spec_for raises: no create call) skips the cloud; when that was every cloud, exit 3."""
    def unreachable(_):
        raise RetryExhaustedError("reading payloads/x.tar.gz: ServiceRequestError: Name or service not known")

    with pytest.raises(ProvisionCloudError) as info:
        provision(OFFERS, unreachable, clouds.__getitem__)
    assert info.value.exit_code == 3 and [a.cloud for a in info.value.attempts] == ["gcp", "azure"]
    assert not clouds["gcp"].calls and not clouds["azure"].calls


def test_one_capacity_answer_keeps_it_capacity_exhausted_exit_1(clouds) -> None:
    clouds["gcp"].fail("us-central1-a", CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED"))
    for o in OFFERS[1:]:
        clouds[o.cloud].fail(o.location, RetryExhaustedError("503 after 4 tries", code="503"))
    with pytest.raises(ProvisionError) as info:
        provision(OFFERS, spec, clouds.__getitem__)
    assert info.value.exit_code == 1
