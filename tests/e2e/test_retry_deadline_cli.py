"""What the user meets when an eventually consistent answer outlasts trainvm's retry (issue 26: one retry library,
``providers/poll.py``): the real CLI and boto3 against moto's server behind the fault proxy, which answers every
RunInstances with the error EC2 gives while a just-created instance profile has not propagated through IAM. After
min(60 s, TRAINVM_AWS_OP_TIMEOUT) of retries, ``up`` exits 3 with EC2's own message (a classified cloud error), not
70 with a retry library's "RetryError" (an internal error), and leaves nothing billing.

Not modelled by moto: IAM's real propagation delay (the proxy answers the error for it, every time)."""

from __future__ import annotations

from tests.e2e.test_aws_cli import profile  # noqa: F401 - the fixture

IAM_LAG = "Value (trainvm-x) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"


def test_iam_lag_past_the_bound_is_ec2s_error_exit_3_and_nothing_left(cli, aws, profile) -> None:  # noqa: F811
    aws.faults.fail("RunInstances", "InvalidParameterValue", message=IAM_LAG)
    up = cli("up", profile, "--yes", "--cloud", "aws", "--region", "us-east-1", "--ssh-from", "203.0.113.7/32")
    assert up.code == 3, (up.code, up.err)
    assert "Invalid IAM Instance Profile name" in up.err and "RetryError" not in up.err
    assert len(aws.faults.calls("RunInstances")) > 1  # retried before giving up
    assert aws.instances() == [] and aws.security_groups() == [] and aws.instance_profiles() == []
