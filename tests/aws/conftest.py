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
    from provisioner.render.script import render_for_offer

    loaded = load_profile(path)
    spec = launch_spec(loaded, offer, rendered=render_for_offer(loaded, offer), spot=changes.pop("spot", None))
    return replace(spec, **changes) if changes else spec


@pytest.fixture
def moto_auth(moto_aws):
    """moto's own checks of every request's SigV4 signature and IAM policy, on from the first request after
    ``on()`` until the end of the test (moto: ``INITIAL_NO_AUTH_ACTION_COUNT``, docs/docs/iam.rst; set in its
    process-global settings: the server runs in a thread of this process). What moto's IAM does not model:
    eventual consistency, SCPs, permission boundaries, most condition keys (``ec2:InstanceProfile``...)."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    class Auth:
        @staticmethod
        def on() -> None:
            ActionAuthenticatorMixin.request_count = 0
            settings.INITIAL_NO_AUTH_ACTION_COUNT = 0

        @staticmethod
        def off() -> None:
            settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")

    yield Auth
    settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
    ActionAuthenticatorMixin.request_count = 0


def role_credentials(aws, name: str, policy: dict[str, Any]) -> dict[str, str]:
    """An IAM role with ``policy`` (as ``ensure_instance_profile`` puts it) and temporary credentials of it from
    moto's STS, as the instance metadata service serves them (AccessKeyId ASIA..., SecretAccessKey, Token,
    Expiration: botocore's instance-metadata provider refuses credentials without it)."""
    import json

    from provisioner.providers.aws.request import ASSUME_ROLE_POLICY

    iam, sts = aws.client("iam", direct=True), aws.client("sts", direct=True)
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(ASSUME_ROLE_POLICY))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="trainvm", PolicyDocument=json.dumps(policy))
    got = sts.assume_role(RoleArn=arn, RoleSessionName="i-0123456789abcdef0")["Credentials"]
    return {"Code": "Success", "LastUpdated": got["Expiration"].strftime("%Y-%m-%dT%H:%M:%SZ"), "Type": "AWS-HMAC",
            "AccessKeyId": got["AccessKeyId"], "SecretAccessKey": got["SecretAccessKey"], "Token": got["SessionToken"],
            "Expiration": got["Expiration"].strftime("%Y-%m-%dT%H:%M:%SZ")}
