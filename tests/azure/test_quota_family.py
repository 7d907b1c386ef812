"""Issue 36 item 18: an Azure VM family's vCPU quota is found by Azure's own usage names, and a family trainvm cannot
name in the location's usage list is "not checked" -- never "quota: ok" after reading only the regional ``cores``.

The usage list is the documented Usage - List answer (https://learn.microsoft.com/rest/api/compute/usage/list:
``value[]`` of ``{unit, currentValue, limit, name: {value, localizedValue}}``), as the SDK's ``Usage`` objects
(``name.value``, ``current_value``, ``limit``); the family names are the Resource SKUs API's ``family``
(https://learn.microsoft.com/rest/api/compute/resource-skus/list), e.g. ``standardNCASv3_T4Family``."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from provisioner.catalog.storage import load_catalog
from provisioner.providers.azure.quota import FAMILY_QUOTA, AzureQuotas, family_usage_name
from provisioner.provision import quota as Q


def _usage(name: str, limit: int, current: int = 0) -> SimpleNamespace:
    return SimpleNamespace(name=SimpleNamespace(value=name, localized_value=name), limit=limit, current_value=current)


def _api(items: list[SimpleNamespace]) -> SimpleNamespace:
    compute = SimpleNamespace(usage=SimpleNamespace(list=lambda location: iter(items)))
    return SimpleNamespace(settings=SimpleNamespace(endpoint=None), subscription_id="sub",
                           call=lambda fn: fn(), clients=lambda: SimpleNamespace(compute=compute))


def _t4():
    return next(o for o in load_catalog().offers if o.cloud == "azure" and o.instance_type == "Standard_NC4as_T4_v3")


def _check(monkeypatch, offer, items):
    monkeypatch.setenv("TRAINVM_NO_CACHE", "1")
    monkeypatch.setattr(Q, "quota_source", lambda cloud, provider: AzureQuotas(_api(items)))
    warned: list[str] = []
    check = Q.Preflight(providers={"azure": object()}, spot=False, nodes=1, warn=warned.append).check(offer)  # type: ignore[dict-item]
    return check, warned


def test_a_family_the_location_does_not_list_is_not_checked_never_ok(monkeypatch) -> None:
    check, warned = _check(monkeypatch, _t4(), [_usage("cores", 100), _usage("lowPriorityCores", 100)])
    assert check.status == "unknown", check.message()
    assert check.message().startswith(f"quota: not checked in azure {check.region} (Azure's usage list for")
    assert "Standard_NC4as_T4_v3's family (NCasT4_v3)" in check.message()
    assert "; read: 4 regional vCPUs needed, 100 free" in check.message()  # what was read is still said
    assert warned and "`up` tries it as it would without the check" in warned[0]
    assert [r["error"] is not None for r in check.to_json()["readings"]] == [True, False]


def test_a_size_of_a_series_the_table_does_not_know_is_named_from_the_usage_list(monkeypatch) -> None:
    """Standard_NC8ads_A10_v4 (NC A10 v4, not in providers/azure/families.py): its family is read from the usage
    names by the naming convention (https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions)."""
    offer = dataclasses.replace(_t4(), instance_type="Standard_NC8ads_A10_v4", family="Standard_NC8ads_A10_v4", vcpus=8)
    items = [_usage("cores", 100), _usage("standardNCASv3_T4Family", 64), _usage("StandardNCADSA10v4Family", 4, 0)]
    check, _ = _check(monkeypatch, offer, items)
    assert check.status == "short", check.message()
    assert "0 of 8 Standard_NC8ads_A10_v4 family vCPUs" not in check.message()
    assert "8 Standard_NC8ads_A10_v4 family vCPUs needed, 4 free" in check.message()
    assert "(StandardNCADSA10v4Family: limit 4, 0 in use)" in check.message()


def test_a_table_family_is_read_in_azures_spelling(monkeypatch) -> None:
    check, _ = _check(monkeypatch, _t4(), [_usage("cores", 100), _usage("StandardNCASV3_T4FAMILY", 24, 20)])
    assert check.status == "ok" and "(StandardNCASV3_T4FAMILY: limit 24, 20 in use)" in check.message()


@pytest.mark.parametrize("listed", [["cores"], ["cores", "standardNCSv3Family", "standardNCADSA10v4Family"]])
def test_an_unknown_size_matching_no_or_another_listed_name_is_not_named(listed) -> None:
    offer = dataclasses.replace(_t4(), instance_type="Standard_NC24ads_L40S_v9", family="Standard_NC24ads_L40S_v9")
    assert family_usage_name(offer, listed) is None


def test_every_table_family_is_also_found_from_its_sizes_names_where_the_name_carries_it() -> None:
    """The convention reading agrees with the table (sizes whose family name adds what the size name lacks --
    ND96asr_v4's A100, NVv4's S -- are the table's alone)."""
    sizes = {o.instance_type: o for o in load_catalog().offers if o.cloud == "azure"}
    agree = {o.family for size, o in sizes.items()
             if family_usage_name(dataclasses.replace(o, family="?"), FAMILY_QUOTA.values()) == FAMILY_QUOTA[o.family]}
    assert {"NCasT4_v3", "NCv3", "NC_A100_v4", "NCads_H100_v5", "ND_H100_v5", "NDm_A100_v4", "NVads_A10_v5"} <= agree
