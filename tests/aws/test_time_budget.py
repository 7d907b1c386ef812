"""One time budget for every AWS call (``TRAINVM_API_TIMEOUT``, as GCE's): a ``RequestLimitExceeded`` storm and an
endpoint that accepts connections and never answers both end, with a named error, instead of keeping `up` busy for
minutes; and a lookup that could not answer never lets `up` create a VM of that name.

The storm and the hang come from the fault proxy in front of moto (tests/emulators/aws_faults.py). No timing is
asserted (the machine's speed is not the behaviour): only that the call ends, with this error, after how many
requests. The proxy's hang is a socket that is read and never written to; not modelled: a TCP connect that never
completes (connect_timeout, the same budget)."""

from __future__ import annotations

import pytest

from provisioner.providers.base import RetryExhaustedError
from tests.e2e.conftest import env  # noqa: F401 - the CLI tests' environment (no GCE/Azure credentials)
from tests.e2e.test_aws_cli import profile  # noqa: F401 - the T4 example reading https:// data (fits user data)


@pytest.fixture
def provider(aws, monkeypatch):
    from provisioner.providers.aws.provider import AwsProvider

    monkeypatch.setenv("TRAINVM_API_TIMEOUT", "2")
    return AwsProvider(warn=lambda _: None)


def test_a_throttling_storm_on_describe_instances_ends_after_tries_and_find_cannot_tell(aws, provider) -> None:
    aws.faults.fail("DescribeInstances", "RequestLimitExceeded")
    with pytest.raises(RetryExhaustedError) as err:
        provider.find("trainvm-x-1")
    assert err.value.code == "UNREACHABLE" and "cannot tell whether trainvm-x-1 exists" in str(err.value)
    assert "us-east-1" in str(err.value) and "us-west-2" in str(err.value)
    # each region's DescribeInstances was sent `tries` times (botocore sends each once), then given up
    assert len(aws.faults.calls("DescribeInstances")) == provider.api.tries * 2


def test_a_throttled_call_names_the_code_and_the_attempts(aws, provider) -> None:
    aws.faults.fail("DescribeInstances", "RequestLimitExceeded")
    with pytest.raises(RetryExhaustedError) as err:
        provider.instances.live("us-east-1", "trainvm-x-1")
    assert err.value.code == "RequestLimitExceeded" and f"after {provider.api.tries} attempts" in str(err.value)


def test_an_endpoint_that_never_answers_ends_within_the_budget(aws, provider) -> None:
    """Each HTTP request may take half of TRAINVM_API_TIMEOUT (2 s here), and the call gives up once the budget
    is spent: two requests, not ``tries`` read timeouts of a full budget each."""
    aws.faults.hang("DescribeInstances")
    try:
        with pytest.raises(RetryExhaustedError) as err:
            provider.instances.live("us-east-1", "trainvm-x-1")
    finally:
        aws.faults.release()
    # in words, no botocore type name (issue 36 item 24): "AWS did not answer (Read timeout on endpoint URL: ...)"
    assert "did not answer" in str(err.value) and "Read timeout" in str(err.value) and "TRAINVM_API_TIMEOUT" in str(err.value)
    assert "ReadTimeout" not in str(err.value)
    assert 1 <= len(aws.faults.calls("DescribeInstances")) < provider.api.tries


@pytest.mark.parametrize("fault", ["storm", "hang"])
def test_up_does_not_create_when_the_lookup_could_not_answer(cli, aws, env, profile, fault) -> None:  # noqa: F811
    env.setenv("TRAINVM_API_TIMEOUT", "2")
    if fault == "storm":
        aws.faults.fail("DescribeInstances", "RequestLimitExceeded")
    else:
        aws.faults.hang("DescribeInstances")
    try:
        r = cli("up", profile, "--yes", "--json", "--cloud", "aws", "--region", "us-east-1")
    finally:
        aws.faults.release()
    assert r.code == 3, r.out + r.err
    error = r.json()["error"]
    assert "could not tell whether" in error["message"] and "not creating it" in error["message"]
    assert ("RequestLimitExceeded: Request limit exceeded" if fault == "storm" else "ReadTimeout") in error["message"]
    assert not aws.faults.calls("RunInstances") and aws.instances() == []
