"""Failover and failure classification: provisioner.provision.failover.provision() driving AzureProvider against
the ARM emulator. Every failed attempt must leave no resource group behind."""

from __future__ import annotations

import pytest

from provisioner.providers.azure.provider import AzureProvider
from provisioner.providers.azure.request import names
from provisioner.providers.base import CapacityError, ProviderError, RetryExhaustedError
from provisioner.provision.failover import ProvisionCloudError, ProvisionError, provision
from tests.azure.conftest import SSH_KEY, named
from tests.emulators.arm import ArmEmulator

T4 = "Standard_NC4as_T4_v3"


def run(provider, spec, offers, log=None):
    result = provision(offers, lambda o: spec, lambda cloud: provider, (log if log is not None else []).append)
    return result.record, list(result.attempts)


def test_capacity_failover_region_to_region(emu, provider, t4_spec, offers):
    chain = [offers[(r, T4)] for r in ("eastus", "eastus2", "westus2")]
    emu.inject("sku_not_available_409", location="eastus")
    emu.inject("allocation_failed_lro", location="eastus2")
    record, attempts = run(provider, t4_spec, chain)
    assert [(a.region, a.outcome, a.error_code) for a in attempts] == [
        ("eastus", "capacity", "SkuNotAvailable"), ("eastus2", "capacity", "AllocationFailed"),
        ("westus2", "created", None)]
    assert record.region == "westus2" and record.state == "RUNNING"
    assert emu.resource_groups() == [names(t4_spec.name).rg]
    # each failed attempt deleted its group (and waited) before the next region reused the name
    assert len(emu.calls("DELETE", "/resourcegroups/")) == 2


def test_quota_skips_the_rest_of_the_region(emu, provider, t4_spec, offers):
    chain = [offers[("eastus", T4)], offers[("eastus", "Standard_NC8as_T4_v3")], offers[("westus2", T4)]]
    emu.inject("quota", location="eastus")
    record, attempts = run(provider, t4_spec, chain)
    assert [(a.region, a.instance_type, a.outcome, a.error_code) for a in attempts] == [
        ("eastus", T4, "quota", "OperationNotAllowed"), ("westus2", T4, "created", None)]
    assert "quota" in attempts[0].message and record.region == "westus2"


def test_everything_exhausted_leaves_nothing(emu, t4_spec, offers):
    from tests.fakes import Clock

    # the deadlines run on a clock that only the test moves (and a poller may take 300 real seconds): on a
    # loaded machine an attempt slower than TRAINVM_AZURE_OP_TIMEOUT=10 used to end as retry-exhausted instead
    # of its capacity error. Nothing here is about timeouts.
    provider = AzureProvider(clock=Clock(), op_timeout=300)
    spot = named(t4_spec, t4_spec.name, spot=True)
    chain = [offers[(r, T4)] for r in ("eastus", "eastus2", "westus2", "southcentralus")]
    emu.inject("sku_not_available_409", location="eastus")
    emu.inject("allocation_failed_lro", location="eastus2")
    emu.inject("overconstrained_allocation_lro", location="westus2")
    emu.inject("quota", location="southcentralus")
    log = []
    with pytest.raises(ProvisionError) as err:
        run(provider, spot, chain, log)
    assert [(a.region, a.outcome, a.error_code) for a in err.value.attempts] == [
        ("eastus", "capacity", "SkuNotAvailable"), ("eastus2", "capacity", "AllocationFailed"),
        ("westus2", "capacity", "OverconstrainedAllocationRequest"), ("southcentralus", "quota", "OperationNotAllowed")]
    assert log == list(err.value.attempts) and err.value.exit_code == 1
    assert emu.resource_groups() == [] and emu.resources_in(names(t4_spec.name).rg) == []
    assert str(err.value).startswith("no VM could be created after 4 attempt(s); nothing was left behind (checked after every attempt)\n  1. azure eastus")


def test_throttling_is_retried_by_the_sdk(emu, provider, t4_spec, offers):
    emu.inject("throttle_429", location="eastus", times=2)   # 429 + Retry-After: 0 on the VM PUT, twice
    record = provider.create(t4_spec, offers[("eastus", T4)])
    assert record.state == "RUNNING"
    assert [r.status for r in emu.calls("PUT", "/virtualMachines/")] == [429, 429, 201]


def test_persistent_5xx_is_retry_exhausted_and_cleaned(emu, t4_spec, offers):
    emu.inject("unavailable_503", location="eastus", times=None)
    with pytest.raises(RetryExhaustedError, match="503") as err:
        AzureProvider(retry_total=2).create(t4_spec, offers[("eastus", T4)])
    assert err.value.outcome == "retry-exhausted" and len(emu.calls("PUT", "/virtualMachines/")) == 3
    assert emu.resource_groups() == []


def test_never_finishing_operation_is_bounded_and_cleaned(emu, t4_spec, offers):
    emu.inject("lro_never_done", location="eastus")
    with pytest.raises(RetryExhaustedError, match="did not finish") as err:
        AzureProvider(op_timeout=0.3).create(t4_spec, offers[("eastus", T4)])
    assert err.value.code == "OperationTimeout"
    assert emu.resource_groups() == []


def test_auth_failure_stops_failover(emu, provider, t4_spec, offers):
    emu.inject("auth_401", method="PUT", path="/resourcegroups/")
    with pytest.raises(ProvisionCloudError) as err:
        run(provider, t4_spec, [offers[("eastus", T4)], offers[("westus2", T4)]])
    assert [(a.outcome, a.error_code) for a in err.value.attempts] == [("auth", "InvalidAuthenticationToken")]
    assert err.value.exit_code == 3 and emu.resource_groups() == []


def test_invalid_request_stops_failover(emu, provider, t4_spec, offers):
    emu.inject("invalid_400", location="eastus")
    with pytest.raises(ProvisionCloudError) as err:
        run(provider, t4_spec, [offers[("eastus", T4)], offers[("westus2", T4)]])
    assert [(a.outcome, a.error_code) for a in err.value.attempts] == [("invalid", "InvalidParameter")]
    assert emu.resource_groups() == []


def test_unregistered_namespace_fails_fast(emu, provider, t4_spec, offers):
    emu.inject("quota", location="eastus", code="MissingSubscriptionRegistration",
               message="The subscription is not registered to use namespace 'Microsoft.Compute'.")
    with pytest.raises(Exception, match="az provider register") as err:
        provider.create(t4_spec, offers[("eastus", T4)])
    assert err.value.outcome == "invalid" and not emu.calls("POST", "/register") and emu.resource_groups() == []


def test_body_style_lro_failure_reads_the_instance_view(monkeypatch, t4_spec, offers, tmp_path):
    """provisioningState polling: the SDK's exception has no code; the provider takes it from the instance view."""
    with ArmEmulator(lro_style="body", polls=2) as emu:
        for k, v in emu.env().items():
            monkeypatch.setenv(k, v)
        (tmp_path / "key.pub").write_text(SSH_KEY)
        monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(tmp_path / "key.pub"))
        emu.inject("zonal_allocation_failed_lro", location="eastus", code="AllocationFailed")
        with pytest.raises(CapacityError) as err:
            AzureProvider(poll_seconds=0).create(t4_spec, offers[("eastus", T4)])
        assert err.value.code == "AllocationFailed" and emu.resource_groups() == []
        assert AzureProvider(poll_seconds=0).create(t4_spec, offers[("eastus", T4)]).state == "RUNNING"


def test_missing_image_is_an_error_before_anything_is_created(emu, provider, t4_spec, offers):
    emu.add_image("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", [])
    with pytest.raises(ProviderError, match="no version of image") as err:
        provider.create(t4_spec, offers[("eastus", T4)])
    assert err.value.outcome == "error" and err.value.code == "PlatformImageNotFound"
    assert emu.resource_groups() == [] and not emu.calls("PUT")
