"""Failures moto cannot produce, injected by the fault proxy in front of it with EC2's own error shape, and the
failover walk (``provision``) over the real AwsProvider: capacity -> next AZ, quota -> next region, throttling
retried by botocore, auth -> stop, an instance that never runs -> bounded wait, and nothing left behind."""

from __future__ import annotations

import pytest

from provisioner.providers.base import AuthError, CapacityError, QuotaError, RetryExhaustedError
from provisioner.provision.failover import ProvisionCloudError, provision
from tests.aws.conftest import t4_offers, t4_spec


@pytest.fixture
def provider(aws):
    from provisioner.providers.aws.provider import AwsProvider

    return AwsProvider()


@pytest.fixture(scope="module")
def offers():
    """us-east-1's T4 offers (one per AZ, cheapest first), then us-west-2's."""
    east = [o for o in t4_offers("us-east-1") if o.instance_type == t4_offers("us-east-1")[0].instance_type]
    west = [o for o in t4_offers("us-west-2") if o.instance_type == east[0].instance_type]
    return east + west


def nothing_left(aws) -> bool:
    return (aws.instances("us-east-1") == [] and aws.instances("us-west-2") == [] and aws.security_groups() == []
            and aws.instance_profiles() == [] and aws.roles() == [])


def walk(provider, offers):
    seen = []
    spec = t4_spec(offers[0])
    result = provision(offers, lambda o: spec, {"aws": provider}.__getitem__, seen.append)
    return result, seen


def zone_name(aws, zone_id: str, region: str = "us-east-1") -> str:
    zones = aws.client("ec2", region, direct=True).describe_availability_zones()["AvailabilityZones"]
    return {z["ZoneId"]: z["ZoneName"] for z in zones}[zone_id]


def test_capacity_moves_to_the_next_az_and_cleans_up(aws, provider, offers) -> None:
    for offer in offers[:2]:  # EC2 answers 500: botocore retries it within the attempt, then the walk moves on
        aws.faults.fail("RunInstances", "InsufficientInstanceCapacity",
                        when={"Placement.AvailabilityZone": zone_name(aws, offer.zone)})
    result, seen = walk(provider, offers)
    assert [(a.zone, a.outcome, a.error_code) for a in seen] == [
        (offers[0].zone, "capacity", "InsufficientInstanceCapacity"),
        (offers[1].zone, "capacity", "InsufficientInstanceCapacity"),
        (offers[2].zone, "created", None)]
    assert "We currently do not have sufficient" in seen[0].message
    assert result.record.zone is not None and result.offer == offers[2]
    [inst] = aws.instances()
    assert inst["Placement"]["AvailabilityZone"] == result.record.zone
    assert len(aws.security_groups()) == 1  # the two failed attempts' groups were deleted
    # each AZ got its own ClientToken (EC2 would answer IdempotentParameterMismatch to a reused one)
    tokens = [r.params["ClientToken"] for r in aws.faults.calls("RunInstances")]
    assert len(tokens) == 2 * provider.api.tries + 1 and len(set(tokens)) == 3 and all(len(t) <= 64 for t in tokens)


def test_vcpu_quota_skips_the_rest_of_the_region(aws, provider, offers) -> None:
    aws.faults.fail("RunInstances", "VcpuLimitExceeded", times=1)
    result, seen = walk(provider, offers)
    assert [(a.region, a.outcome, a.error_code) for a in seen] == [
        ("us-east-1", "quota", "VcpuLimitExceeded"), ("us-west-2", "created", None)]
    assert aws.instances("us-east-1") == [] and len(aws.instances("us-west-2")) == 1
    assert aws.security_groups("us-east-1") == []


def test_throttling_is_retried_by_botocore_within_one_attempt(aws, provider, offers) -> None:
    aws.faults.fail("RunInstances", "RequestLimitExceeded", times=2)
    result, seen = walk(provider, offers)
    assert [a.outcome for a in seen] == ["created"]
    statuses = [r.status for r in aws.faults.calls("RunInstances")]
    assert statuses == [503, 503, 200] and len(aws.instances()) == 1


def test_throttling_that_never_ends_is_retry_exhausted(aws, provider, offers) -> None:
    aws.faults.fail("RunInstances", "RequestLimitExceeded")
    with pytest.raises(RetryExhaustedError) as err:
        provider.create(t4_spec(offers[0]), offers[0])
    assert err.value.code == "RequestLimitExceeded" and err.value.cleanup == "verified"
    assert len(aws.faults.calls("RunInstances")) == provider.api.tries and nothing_left(aws)


def test_unauthorized_stops_the_walk(aws, provider, offers) -> None:
    aws.faults.fail("RunInstances", "UnauthorizedOperation", message="You are not authorized to perform this operation.")
    with pytest.raises(ProvisionCloudError) as err:
        walk(provider, offers)
    assert [a.outcome for a in err.value.attempts] == ["auth"]
    assert len(aws.faults.calls("RunInstances")) == 1 and nothing_left(aws)


def test_instance_that_never_runs_is_bounded_and_terminated(aws, provider, offers, monkeypatch) -> None:
    aws.faults.hold_pending("*")
    with pytest.raises(RetryExhaustedError) as err:
        provider.create(t4_spec(offers[0]), offers[0])
    assert err.value.code == "OPERATION_TIMEOUT" and err.value.cleanup == "verified"
    assert "still pending" in str(err.value)
    assert len(aws.faults.calls("TerminateInstances")) == 1 and nothing_left(aws)


def test_errors_are_classified_for_failover() -> None:
    from botocore.exceptions import ClientError, EndpointConnectionError

    from provisioner.providers.aws.errors import classify

    def err(code, status=400):
        return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "RunInstances")

    assert isinstance(classify(err("InsufficientInstanceCapacity", 500)), CapacityError)
    assert isinstance(classify(err("Unsupported")), CapacityError)
    assert isinstance(classify(err("VcpuLimitExceeded")), QuotaError)
    assert isinstance(classify(err("MaxSpotInstanceCountExceeded")), QuotaError)
    assert isinstance(classify(err("AuthFailure", 401)), AuthError)
    assert isinstance(classify(err("UnauthorizedOperation", 403)), AuthError)
    assert isinstance(classify(err("RequestLimitExceeded", 503)), RetryExhaustedError)
    assert isinstance(classify(err("SomethingNew", 502)), RetryExhaustedError)
    assert classify(err("InvalidParameterValue")).outcome == "invalid"
    assert isinstance(classify(EndpointConnectionError(endpoint_url="http://127.0.0.1:1")), RetryExhaustedError)
