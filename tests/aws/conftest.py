"""AWS tests: one moto server (plus its fault proxy) per test session, reset before every test."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

from tests.helpers import REPO

T4 = REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"
TODAY = datetime.date(2026, 11, 22)


@pytest.fixture(scope="session")
def moto_aws():
    pytest.importorskip("moto.server")
    from tests.emulators.aws import shared_moto

    return shared_moto()


@pytest.fixture
def aws(moto_aws, monkeypatch):
    """The emulator, reset, with the provider's environment pointing at it."""
    moto_aws.reset()
    for k, v in moto_aws.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    monkeypatch.setenv("TRAINVM_AWS_OP_TIMEOUT", "5")
    monkeypatch.delenv("TRAINVM_SSH_PUBLIC_KEY", raising=False)
    return moto_aws


def t4_offers(region: str = "us-east-1", spot: bool = False, path: Any = T4) -> list[Any]:
    """The T4 example's AWS offers in ``region``: the chosen one first, then the failover order."""
    from provisioner.catalog.storage import load_catalog
    from provisioner.planner.core import plan
    from provisioner.planner.from_profile import Overrides, build_request
    from provisioner.profile import load_profile

    request, _ = build_request(load_profile(path), Overrides(("aws",), (region,), spot))
    p = plan(replace(request, include_unprovisionable=True, data_excluded_clouds={}), load_catalog(), TODAY)
    assert p.chosen is not None
    return [p.chosen, *p.failover]


def t4_spec(offer: Any, path: Any = T4, **changes: Any) -> Any:
    from provisioner.profile import load_profile
    from provisioner.provision.launch import launch_spec

    spec = launch_spec(load_profile(path), offer, spot=changes.pop("spot", None))
    return replace(spec, **changes) if changes else spec
