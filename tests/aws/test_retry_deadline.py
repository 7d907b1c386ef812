"""The two AWS answers trainvm itself retries (issue 26: one retry library, ``providers/poll.py``), through the
real AwsProvider and boto3 against moto's server and its fault proxy: an instance profile IAM has not propagated
yet (RunInstances ``InvalidParameterValue`` ... ``Invalid IAM Instance Profile``) and a placement group still in
use (DeletePlacementGroup ``InvalidPlacementGroup.InUse``). When the answer persists past the bound, what reaches
the caller is EC2's last error as a ProviderError (never a library's RetryError, which the CLI would report as an
internal error, exit 70), and a failed create still cleans up.

Not modelled by moto: IAM's real propagation delay (the fault proxy answers the error EC2 gives for it)."""

from __future__ import annotations

import pytest

from provisioner.providers.base import InvalidRequestError, ProviderError
from tests.aws.conftest import t4_offers, t4_spec

IAM_LAG = ("Value (trainvm-x) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name")


@pytest.fixture
def provider(aws):
    from provisioner.providers.aws.provider import AwsProvider

    return AwsProvider(op_timeout=1, poll_interval=0)


@pytest.fixture(scope="module")
def offer():
    return t4_offers("us-east-1")[0]


def nothing_left(aws) -> bool:
    return (aws.instances() == [] and aws.security_groups() == [] and aws.instance_profiles() == []
            and aws.placement_groups() == [])


def test_iam_lag_that_ends_is_retried_until_the_launch(aws, provider, offer) -> None:
    aws.faults.fail("RunInstances", "InvalidParameterValue", message=IAM_LAG, times=2)
    rec = provider.create(t4_spec(offer), offer)
    assert rec.cloud_id and len(aws.instances()) == 1
    assert [c.status for c in aws.faults.calls("RunInstances")] == [400, 400, 200]


def test_iam_lag_past_the_bound_is_ec2s_error_and_nothing_is_left(aws, provider, offer) -> None:
    aws.faults.fail("RunInstances", "InvalidParameterValue", message=IAM_LAG)
    with pytest.raises(InvalidRequestError) as err:
        provider.create(t4_spec(offer), offer)
    assert "Invalid IAM Instance Profile name" in str(err.value) and err.value.code == "InvalidParameterValue"
    assert err.value.cleanup == "verified" and nothing_left(aws)
    assert len(aws.faults.calls("RunInstances")) > 1  # it was retried, within op_timeout


def test_other_invalid_requests_are_not_retried(aws, provider, offer) -> None:
    aws.faults.fail("RunInstances", "InvalidParameterValue", message="Value (x) for parameter foo is invalid.")
    with pytest.raises(InvalidRequestError):
        provider.create(t4_spec(offer), offer)
    assert len(aws.faults.calls("RunInstances")) == 1 and nothing_left(aws)


def test_placement_group_in_use_past_the_bound_is_ec2s_error(aws, provider) -> None:
    offers = [o for o in t4_offers("us-east-1") if o.instance_type == t4_offers("us-east-1")[0].instance_type]
    spec = t4_spec(offers[0], nodes=2, compact=True)
    provider.create(spec, offers[0])
    aws.faults.fail("DeletePlacementGroup", "InvalidPlacementGroup.InUse",
                    message=f"The placement group '{spec.name}' is in use and may not be deleted.")
    with pytest.raises(ProviderError) as err:
        provider.delete(spec.name)
    assert err.value.code == "InvalidPlacementGroup.InUse"
    assert len(aws.faults.calls("DeletePlacementGroup")) > 1
    assert aws.instances() == [] or all(i["State"]["Name"] == "terminated" for i in aws.instances())
