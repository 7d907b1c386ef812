"""provision() (the cloud-neutral failover loop) driving the real GcpProvider against the GCE emulator."""

from __future__ import annotations

import pytest

from provisioner.provision.failover import ProvisionCloudError, ProvisionError, provision
from tests.fakes import FakeProvider

ZONES = ["us-central1-a", "us-central1-b", "us-east1-c", "us-east4-a", "europe-west4-a"]


def run(provider, spec, offers, others=None):
    seen = []
    clouds = {"gcp": provider, **(others or {})}
    result = provision(offers, lambda o: spec(), clouds.__getitem__, seen.append)
    return (result.record, list(result.attempts)), seen


def test_zone_then_zone_then_region(gce, provider, spec, offer):
    gce.inject("stockout_op", zone="us-central1-a")
    gce.inject("stockout_op_bare", zone="us-central1-b")  # G2: DONE with only error.errors
    (record, attempts), seen = run(provider, spec, [offer(z) for z in ZONES])
    assert record.zone == "us-east1-c" and record.state == "RUNNING"
    assert [(a.zone, a.outcome, a.error_code) for a in attempts] == [
        ("us-central1-a", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED"),
        ("us-central1-b", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED"),
        ("us-east1-c", "created", None)]
    assert seen == attempts and [k[1] for k in gce.instances] == ["us-east1-c"]


def test_regional_quota_moves_to_next_region(gce, provider, spec, offer):
    gce.inject("quota_op", zone="us-central1-a")
    (record, attempts), _ = run(provider, spec, [offer(z) for z in ZONES])
    assert record.zone == "us-east1-c"
    assert [(a.zone, a.outcome) for a in attempts] == [("us-central1-a", "quota"), ("us-east1-c", "created")]
    assert not [r for r in gce.calls("instances.insert") if "/us-central1-b/" in r.path]


def test_sync_quota_403_moves_to_next_region(gce, provider, spec, offer):
    gce.inject("quota_403", zone="us-central1-a", metric="NVIDIA_T4_GPUS")
    (record, attempts), _ = run(provider, spec, [offer(z) for z in ZONES])
    assert record.region == "us-east1" and attempts[0].error_code == "QUOTA_EXCEEDED:NVIDIA_T4_GPUS"


def test_gpus_all_regions_stops_gce(gce, provider, spec, offer):
    gce.inject("quota_op_global", zone="us-central1-a")
    azure = FakeProvider("azure")
    az = offer("us-central1-a")
    az = type(az)(**{**{f: getattr(az, f) for f in az.__slots__}, "cloud": "azure", "region": "eastus", "zone": None,
                     "instance_type": "Standard_NC4as_T4_v3"})
    (record, attempts), _ = run(provider, spec, [offer(z) for z in ZONES] + [az], {"azure": azure})
    assert record.cloud == "azure"
    assert [(a.cloud, a.outcome, a.error_code) for a in attempts] == [
        ("gcp", "quota-cloud", "QUOTA_EXCEEDED:GPUS_ALL_REGIONS"), ("azure", "created", None)]
    assert len(gce.calls("instances.insert")) == 1 and not gce.instances


def test_rate_limit_and_503_retried_inside_one_attempt(gce, provider, spec, offer):
    gce.inject("rate_429", zone="us-central1-a")
    gce.inject("unavailable_503", zone="us-central1-a", times=2)
    (record, attempts), _ = run(provider, spec, [offer(z) for z in ZONES])
    assert record.zone == "us-central1-a" and [a.outcome for a in attempts] == ["created"]


def test_everything_exhausted_leaves_nothing(gce, make_provider, spec, offer):
    gce.inject("stockout_op", zone="us-central1-a")
    gce.inject("stockout_details", zone="us-central1-b")
    gce.inject("quota_op", zone="us-east1-c")
    gce.inject("unavailable_503", zone="us-east4-a", times=None)
    gce.inject("op_never_done", zone="europe-west4-a")
    offers = [offer(z) for z in ZONES] + [offer("us-east1-c", "a2-highgpu-1g")]  # skipped: us-east1 is out of quota
    with pytest.raises(ProvisionError) as e:
        run(make_provider(op_timeout=0.2), spec, offers)
    err = e.value
    assert [(a.zone, a.outcome, a.error_code) for a in err.attempts] == [
        ("us-central1-a", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED"),
        ("us-central1-b", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
        ("us-east1-c", "quota", "QUOTA_EXCEEDED:NVIDIA_T4_GPUS"),
        ("us-east4-a", "retry-exhausted", "503"),
        ("europe-west4-a", "retry-exhausted", "OPERATION_TIMEOUT")]
    assert err.exit_code == 1 and "nothing was left behind" in str(err) and "1. gcp us-central1-a n1-standard-8" in str(err)
    assert not gce.instances  # the timed-out VM was deleted
    print("\n" + str(err))


def test_auth_failure_stops_with_cloud_error(gce, provider, spec, offer):
    gce.require_auth = True
    with pytest.raises(ProvisionCloudError) as e:
        run(provider, spec, [offer(z) for z in ZONES])
    assert e.value.exit_code == 3 and [a.outcome for a in e.value.attempts] == ["auth"]
    assert "gcloud auth application-default login" in e.value.hint
