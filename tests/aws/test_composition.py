"""Issue 37, one style per cloud: ``AwsProvider`` composes its parts (the API client, the instance lookups, the per-VM
resources, the group engine, power) instead of inheriting them from a calls base class, and reads no catalog: the
regions it lists are the ones its maker passes (``candidate_regions``: the catalog's, from the layer above), those
the account has enabled; ``TRAINVM_AWS_REGIONS`` / ``regions=`` still name them exactly."""

from __future__ import annotations

import typing

import pytest


@pytest.fixture
def no_region_setting(aws, monkeypatch):
    monkeypatch.delenv("TRAINVM_AWS_REGIONS", raising=False)
    return aws


def enabled(aws) -> set[str]:
    return {r["RegionName"] for r in aws.client("ec2", direct=True).describe_regions(AllRegions=False)["Regions"]}


def test_the_provider_holds_its_parts_and_inherits_no_behaviour(aws) -> None:
    from provisioner.providers.aws.api import AwsApi
    from provisioner.providers.aws.provider import AwsProvider

    # its bases are the typed interfaces of providers/capabilities.py: protocols, no behaviour
    assert all(getattr(b, "_is_protocol", False) for b in AwsProvider.__bases__), AwsProvider.__bases__
    assert not [c for c in AwsProvider.__mro__ if c.__module__.startswith("provisioner.providers.aws.")
                and c is not AwsProvider]
    provider = AwsProvider()
    assert isinstance(provider.api, AwsApi) and not isinstance(provider, AwsApi)
    parts = (provider.instances, provider.resources, provider.group, provider.power, provider.payload_store())
    assert all(part.api is provider.api for part in parts)
    assert provider.group.instances is provider.instances and provider.group.resources is provider.resources


def test_the_candidate_regions_are_asked_once_when_first_needed_and_kept_where_enabled(no_region_setting) -> None:
    from provisioner.providers.aws.provider import AwsProvider

    asked: list[int] = []

    def candidates() -> list[str]:
        asked.append(1)
        return ["us-east-1", "us-west-2", "xx-nowhere-1"]

    provider = AwsProvider(candidate_regions=candidates)
    assert asked == []  # making the provider asks nothing (plan and --help never pay for it)
    assert provider.api.regions() == ["us-east-1", "us-west-2"]  # xx-nowhere-1: not an enabled region
    assert provider.list() == [] and provider.api.regions() == ["us-east-1", "us-west-2"]
    assert asked == [1]


def test_without_candidates_every_enabled_region_is_listed(no_region_setting) -> None:
    from provisioner.providers.aws.provider import AwsProvider

    assert set(AwsProvider().api.regions()) == enabled(no_region_setting)


def test_named_regions_win_over_the_candidates(aws, monkeypatch) -> None:
    from provisioner.providers.aws.provider import AwsProvider

    def never() -> list[str]:
        raise AssertionError("the candidates are not asked when the regions are named")

    assert AwsProvider(regions=["us-east-2"], candidate_regions=never).api.regions() == ["us-east-2"]
    monkeypatch.setenv("TRAINVM_AWS_REGIONS", "us-west-2")
    assert AwsProvider(candidate_regions=never).api.regions() == ["us-west-2"]


def test_the_cloud_commands_hand_the_catalogs_regions_to_the_provider(no_region_setting) -> None:
    from provisioner.catalog.storage import cloud_regions, load_catalog
    from provisioner.commands.clouds import _providers

    catalog = {o.region for o in load_catalog().offers if o.cloud == "aws"}
    assert cloud_regions("aws") == sorted(catalog)
    ready, skipped = _providers(["aws"])
    assert not skipped
    provider = typing.cast(typing.Any, ready["aws"])
    assert provider.api.regions() == sorted(catalog & enabled(no_region_setting))


def test_the_provider_registry_hands_the_candidates_to_the_aws_hook(no_region_setting) -> None:
    from provisioner.hooks.providers import get_provider

    provider = typing.cast(typing.Any, get_provider("aws", candidate_regions=lambda: ["us-west-2"]))
    assert provider.api.regions() == ["us-west-2"]
