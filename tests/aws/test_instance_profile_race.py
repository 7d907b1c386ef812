"""Two `up`s of one name set up its instance profile at once (tests/aws/test_concurrent_up.py saw it under load): one
creates the profile, the other finds it with no role yet, and both add the role. A profile holds one role, so IAM
refuses the second add with LimitExceeded ("Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1", moto's
wording of AWS's; https://docs.aws.amazon.com/IAM/latest/APIReference/API_AddRoleToInstanceProfile.html). That `up`
must take the profile as it is when the role attached is its own, not fail."""

from __future__ import annotations

import json

import pytest

from provisioner.providers.aws.provider import AwsProvider
from provisioner.providers.aws.request import ASSUME_ROLE_POLICY, role_name
from provisioner.providers.base import ProviderError
from tests.aws.conftest import t4_offers, t4_spec


class _StaleRead:
    """The IAM client, whose first get_instance_profile answers as it stood before the other `up` added the role."""

    def __init__(self, iam: object) -> None:
        self._iam, self._stale = iam, True

    def get_instance_profile(self, **kw: object) -> dict:
        got = self._iam.get_instance_profile(**kw)  # type: ignore[attr-defined]
        if self._stale:
            self._stale = False
            got["InstanceProfile"]["Roles"] = []
        return got

    def __getattr__(self, name: str) -> object:
        return getattr(self._iam, name)


def _other_up_made_it(provider: AwsProvider, name: str, role: str) -> None:
    iam = provider.api.iam()
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(ASSUME_ROLE_POLICY))
    iam.create_instance_profile(InstanceProfileName=name)
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)


def test_a_role_another_up_attached_meanwhile_is_taken(aws, monkeypatch: pytest.MonkeyPatch) -> None:
    offer = t4_offers()[0]
    spec = t4_spec(offer, on_idle="delete", on_max_run="stop", max_run_hours=1.0, idle_shutdown_minutes=60)  # a policy
    provider = AwsProvider(op_timeout=2)
    name = role_name(spec.name)
    _other_up_made_it(provider, name, name)
    real = provider.api.iam
    monkeypatch.setattr(provider.api, "iam", lambda: _StaleRead(real()))
    assert provider.resources.ensure_instance_profile(spec, offer.region) == name
    roles = real().get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Roles"]
    assert [r["RoleName"] for r in roles] == [name]


def test_a_profile_holding_another_role_is_still_an_error(aws, monkeypatch: pytest.MonkeyPatch) -> None:
    offer = t4_offers()[0]
    spec = t4_spec(offer, on_idle="delete", on_max_run="stop", max_run_hours=1.0, idle_shutdown_minutes=60)  # a policy
    provider = AwsProvider(op_timeout=2)
    name = role_name(spec.name)
    _other_up_made_it(provider, name, "someone-elses-role")
    real = provider.api.iam
    monkeypatch.setattr(provider.api, "iam", lambda: _StaleRead(real()))
    with pytest.raises(ProviderError, match="InstanceSessionsPerInstanceProfile"):
        provider.resources.ensure_instance_profile(spec, offer.region)
