"""Issue 37: the typed record reaches the cloud call. ``launch_spec`` puts on ``LaunchSpec`` what the providers need,
from the profile's record and the plan, and a provider reads those fields, never the stored profile's text:

- the container image as the record parsed it once (``LoadedProfile.resolved.image``) and its registry login: AWS's
  ECR statements came from ``json.loads(spec.profile_json)`` and a second parse of the image;
- ``placement.identity`` (Azure's user-assigned identity) came from ``getattr(spec, "profile_json")`` + ``json.loads``;
- spot, the price and the disks' cost are the plan's (``launch_spec(..., spot=, cost=)``): ``up`` recomputed spot from the profile and
  loaded the catalog again for the disk prices the plan already holds.

Each test replaces ``profile_json`` with ``"{}"`` where a provider reads the spec: what it decides must not change."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.providers.aws import request as aws_request
from provisioner.providers.azure.identity import user_identity
from tests.contract.clouds_fake import gce_offer

DIGEST = "sha256:" + "b" * 64
ECR = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/team/train:1@{DIGEST}"
IDENTITY = ("/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/ops/providers/"
            "Microsoft.ManagedIdentity/userAssignedIdentities/trainvm-vms")


def _profile(placement: dict | None = None, **container) -> dict:
    return {"name": "typed", "hardware": {"gpu": "T4"}, "placement": placement or {},
            "stack": {"os": "ubuntu-22.04", "driver": "560.35.03", "container": {"image": ECR, **container}}}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)


def _spec(write_yaml, doc, **kw):
    from provisioner.profile import load_profile
    from provisioner.provision.launch import launch_spec
    from provisioner.render.script import render_for_offer

    loaded, offer = load_profile(write_yaml(doc)), gce_offer("us-central1-a")
    return loaded, launch_spec(loaded, offer, rendered=render_for_offer(loaded, offer), **kw)


def _ecr(policy) -> list:
    return [s for s in (policy or {"Statement": []})["Statement"] if "ecr:GetAuthorizationToken" in str(s["Action"])]


def test_the_container_image_reaches_the_aws_policy_as_the_record_parsed_it(write_yaml) -> None:
    loaded, spec = _spec(write_yaml, _profile())
    assert spec.image is loaded.resolved.image and spec.registry_auth is None  # parsed once, not again
    blind = replace(spec, profile_json="{}")  # the stored text is an output: nothing below reads it
    assert _ecr(aws_request.role_policy(blind, "us-east-1")), aws_request.role_policy(blind, "us-east-1")
    _, with_secret = _spec(write_yaml, _profile(registry_auth="secret://aws/ecr-user"))
    assert with_secret.registry_auth == "secret://aws/ecr-user"
    assert _ecr(aws_request.role_policy(replace(with_secret, profile_json="{}"), "us-east-1")) == []


def test_the_azure_user_assigned_identity_reaches_the_provider_as_a_field(write_yaml) -> None:
    _, spec = _spec(write_yaml, _profile({"identity": {"azure": IDENTITY}}))
    assert spec.identity == {"azure": IDENTITY}
    assert user_identity(replace(spec, profile_json="{}")) == IDENTITY
    _, own = _spec(write_yaml, _profile())
    assert own.identity == {} and user_identity(own) is None


def test_spot_and_the_disk_prices_are_the_plans(write_yaml, monkeypatch) -> None:
    """``up`` passes its plan: the command line's --spot (in the plan's request) and the catalog the plan ranked with
    reach the spec; the catalog is not loaded again."""
    from provisioner.planner.from_profile import Overrides, make_plan
    from provisioner.profile import load_profile
    from provisioner.providers.base import DISKS_PRICE_LABEL
    from provisioner.provision import launch
    from provisioner.render.script import render_for_offer

    loaded = load_profile(write_yaml(_profile({"spot": False})))
    plan = make_plan(loaded, Overrides(clouds=("gcp",), spot=True)).plan
    assert plan.chosen is not None and plan.disk_prices is not None
    rendered = render_for_offer(loaded, plan.chosen)
    expected = launch.launch_spec(loaded, plan.chosen, rendered=rendered, spot=True)  # the catalog loaded: no plan

    def no_catalog():
        raise AssertionError("launch_spec loaded the catalog the plan holds")

    monkeypatch.setattr(launch, "load_catalog", no_catalog)
    o = plan.chosen  # what `up` hands over (commands/up.py staged_spec)
    spec = launch.launch_spec(loaded, o, rendered=rendered, spot=plan.request.spot, cost=plan.cost(o))
    assert spec.spot is True and spec.price_hourly == plan.chosen.price(True)
    assert spec.labels == expected.labels and DISKS_PRICE_LABEL in spec.labels
