"""Two `up` of one profile on AWS, through boto3 against moto's server and the fault proxy: an `up` that finds
the instance of its name still ``pending`` (another `up` is launching it) waits, bounded, and then stops
(AttemptInProgressError, exit 5) instead of failing over to another AZ or region, where it would launch a second,
billed instance with the same Name tag (EC2 has no name uniqueness).

The other `up` runs in a thread of this process (its instance held ``pending`` by the proxy until the loser has
given up). Not modelled: two processes; EC2's own ``pending`` duration (the proxy holds it as long as asked).
"""

from __future__ import annotations

import threading
import time

import pytest

from provisioner.errors import EXIT_NOT_READY, TrainvmError
from provisioner.provision.failover import provision
from tests.aws.conftest import t4_spec
from tests.aws.test_provider_faults import offers  # noqa: F401 - the module fixture (us-east-1 AZs, then us-west-2)


def _running(aws, region):
    return [i for i in aws.instances(region) if i["State"]["Name"] in ("pending", "running")]


def test_loser_that_times_out_on_a_pending_instance_stops_instead_of_failing_over(aws, offers):  # noqa: F811
    from provisioner.providers.aws.provider import AwsProvider

    west = next(o for o in offers if o.region == "us-west-2" and o.zone.startswith("usw2-az"))  # not a Local Zone
    chain = [offers[0], west]  # us-east-1, then us-west-2
    spec = t4_spec(chain[0])
    aws.faults.hold_next_created()  # the winner's instance stays pending until released
    winner: dict[str, object] = {}

    def up_a():
        try:
            winner["r"] = AwsProvider(op_timeout=60).create(spec, chain[0])
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            winner["r"] = exc
    a = threading.Thread(target=up_a)
    a.start()
    try:
        for _ in range(1500):  # until the winner's instance was launched and is held pending (at most ~30 s)
            if aws.faults.pending:
                break
            time.sleep(0.02)
        assert aws.faults.pending and aws.instances("us-east-1"), "the winner launched nothing"
        attempts = []
        with pytest.raises(TrainvmError) as err:  # before the fix: a second instance in us-west-2, no error
            provision(chain, lambda o: spec, {"aws": AwsProvider(op_timeout=0.5)}.__getitem__, attempts.append)
    finally:
        aws.faults.pending.clear()  # the winner's instance runs now
        a.join(120)
        print("failover log:", *(f"  {i}. {a.render()}" for i, a in enumerate(attempts, 1)), sep="\n")
    e = err.value
    assert e.exit_code == EXIT_NOT_READY
    assert "still pending" in str(e) and "another `trainvm up`" in str(e) and "not trying other offers" in str(e)
    assert f"trainvm status {spec.name}" in e.hint and f"trainvm down {spec.name}" in e.hint
    assert [a.outcome for a in attempts] == ["in-progress"]  # us-west-2 was never tried
    assert _running(aws, "us-west-2") == [], "a second instance of that name was launched in the next region"
    assert not isinstance(winner["r"], Exception), winner  # the winner's instance was never terminated
    assert len(_running(aws, "us-east-1")) == 1 and not aws.faults.calls("TerminateInstances")


def test_two_ups_that_send_one_client_token_at_once_make_one_instance(aws, offers):  # noqa: F811
    """Both `up` pass the "no instance of that name yet" check, then send RunInstances with the same ClientToken at
    the same moment (a barrier holds each request until both are on their way): EC2 answers the second with the
    first's reservation, so one instance. The emulator used to look the token up for both before either had
    launched, and moto launched twice."""
    from provisioner.providers.aws.provider import AwsProvider

    spec = t4_spec(offers[0])
    barrier = threading.Barrier(2, timeout=30)
    results: list[object] = [None, None]

    def up(i: int) -> None:
        provider = AwsProvider(op_timeout=30)
        def together(**kw: object) -> None:  # a before-send handler's answer would replace the request's: None
            barrier.wait()

        provider.ec2("us-east-1").meta.events.register("before-send.ec2.RunInstances", together)
        try:
            results[i] = provider.create(spec, offers[0])
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            results[i] = exc

    threads = [threading.Thread(target=up, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(isinstance(r, Exception) for r in results), results
    assert len(aws.faults.calls("RunInstances")) == 2  # both were sent
    [inst] = _running(aws, "us-east-1")
    assert {r.cloud_id for r in results} == {inst["InstanceId"]}  # type: ignore[union-attr]
