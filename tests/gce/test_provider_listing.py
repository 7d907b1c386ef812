"""#19: one unreachable GCE zone in the instance listing is skipped with a warning, through google-cloud-compute
against the emulator, which answers like compute v1: instances.aggregatedList has no returnPartialSuccess, so an
unreachable zone fails the whole call (503) and the provider lists zone by zone."""

from __future__ import annotations

import pytest

from provisioner.providers.base import RetryExhaustedError

Z1, Z2 = "us-central1-a", "europe-west4-a"


@pytest.fixture
def warned():
    return []


@pytest.fixture
def two_vms(gce, make_provider, spec, offer, warned):
    provider = make_provider(warn=warned.append)
    a = provider.create(spec(name="trainvm-zone-a"), offer(Z1))
    b = provider.create(spec(name="trainvm-zone-b"), offer(Z2))
    return provider, a, b


def test_list_skips_an_unreachable_zone_with_a_warning(gce, two_vms, warned):
    provider, a, b = two_vms
    gce.inject("unreachable", zone=Z2, method="*", times=None)  # the zone is down for every call
    listed = provider.list()
    assert [r.name for r in listed] == [a.name]
    assert len(warned) == 1 and Z2 in warned[0] and "not shown" in warned[0]
    assert [r.status for r in gce.calls("aggregatedList")][-1] == 503  # the whole call failed first
    assert gce.calls("zones.list") and {r.path.rsplit("/zones/", 1)[-1].split("/")[0] for r in gce.calls("instances.list")} >= {Z1, Z2}


def test_find_works_and_delete_refuses_to_guess_while_a_zone_is_down(gce, two_vms, warned):
    provider, a, b = two_vms
    gce.inject("unreachable", zone=Z2, method="*", times=None)
    assert provider.find(a.name).name == a.name
    assert provider.find(b.name) is None  # not visible now ...
    with pytest.raises(RetryExhaustedError, match=f"could not list {Z2}") as err:
        provider.delete(b.name)  # ... but never "already gone"
    assert err.value.code == "UNREACHABLE"
    assert gce.instance(b.name) is not None
    gce.clear_faults()
    assert [r.name for r in provider.list()] == [a.name, b.name] and provider.delete(b.name) is True


def test_every_zone_down_is_the_original_error(gce, two_vms):
    provider, a, b = two_vms
    for zone in gce.known_zones:
        gce.inject("unreachable", zone=zone, method="*", times=None)
    with pytest.raises(RetryExhaustedError, match="503"):
        provider.list()
