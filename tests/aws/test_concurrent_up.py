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
from datetime import datetime

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


def _together(specs: list, offer) -> list[object]:
    """``create(specs[i], offer)`` in one thread each, their RunInstances sent at the same moment (a barrier holds
    each request until all are on their way): the records, or the exceptions."""
    from provisioner.providers.aws.provider import AwsProvider

    barrier = threading.Barrier(len(specs), timeout=30)
    results: list[object] = [None] * len(specs)

    def up(i: int) -> None:
        provider = AwsProvider(op_timeout=30)
        def together(**kw: object) -> None:  # a before-send handler's answer would replace the request's: None
            barrier.wait()

        provider.api.ec2("us-east-1").meta.events.register("before-send.ec2.RunInstances", together)
        try:
            results[i] = provider.create(specs[i], offer)
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            results[i] = exc

    threads = [threading.Thread(target=up, args=(i,)) for i in range(len(specs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_two_ups_that_send_one_client_token_at_once_make_one_instance(aws, offers):  # noqa: F811
    """Both `up` pass the "no instance of that name yet" check, then send RunInstances with the same ClientToken at
    the same moment: EC2 answers the second with the first's reservation, so one instance. The emulator used to look
    the token up for both before either had launched, and moto launched twice."""
    spec = t4_spec(offers[0])
    results = _together([spec, spec], offers[0])
    assert not any(isinstance(r, Exception) for r in results), results
    assert len(aws.faults.calls("RunInstances")) == 2  # both were sent
    [inst] = _running(aws, "us-east-1")
    assert {r.cloud_id for r in results} == {inst["InstanceId"]}  # type: ignore[union-attr]


def _signed_apart(offer, monkeypatch) -> list:
    """The LaunchSpecs of two `up`s of the T4 example a second apart: each stages the payload and presigns its own
    GET URL for it (botocore's SigV4 clock, X-Amz-Date, set one second apart), as `up` does."""
    import botocore.auth

    from provisioner.profile import load_profile
    from provisioner.providers.aws.provider import AwsProvider
    from provisioner.provision.launch import launch_spec, stage
    from provisioner.render.script import render_for_offer
    from tests.aws.conftest import T4

    loaded, specs, clock = load_profile(T4), [], botocore.auth.get_current_datetime
    for second in (0, 1):
        monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda s=second: datetime(2026, 11, 22, 12, 0, s))
        rendered = render_for_offer(loaded, offer)
        ref = stage(rendered, offer, AwsProvider())
        specs.append(launch_spec(loaded, offer, rendered=rendered, ref=ref))
    monkeypatch.setattr(botocore.auth, "get_current_datetime", clock)
    a, b = specs
    assert a.payload and b.payload and a.payload.signed_url != b.payload.signed_url and a.user_data != b.user_data
    assert a.payload.signed_url in str(a.user_data)  # Ubuntu 22.04: render/bootstrap.needs_signed_url
    return specs


def test_two_ups_of_one_profile_whose_payload_urls_differ_make_one_instance(aws, offers, monkeypatch):  # noqa: F811
    """Issue 36 item 4: two `up`s a second apart send user data that differ in the payload URL each presigned. The
    ClientToken used to hash the whole body, user data included: two tokens, two instances. Now both send one token
    (from stable inputs only); EC2 refuses the second, whose parameters differ, with IdempotentParameterMismatch,
    and that `up` adopts the first's instance."""
    results = _together(_signed_apart(offers[0], monkeypatch), offers[0])
    assert not any(isinstance(r, Exception) for r in results), results  # before: two instances
    [inst] = _running(aws, "us-east-1")
    assert {r.cloud_id for r in results} == {inst["InstanceId"]}  # type: ignore[union-attr]
    assert len({c.params["ClientToken"] for c in aws.faults.calls("RunInstances")}) == 1
    assert not aws.faults.calls("TerminateInstances")  # the second `up` never cleaned up the first's instance


def test_a_token_whose_instance_is_gone_gives_way_to_the_next_one(aws, offers, monkeypatch):  # noqa: F811
    """The same token, refused because an earlier `up` launched with it (another payload URL) and that instance is
    terminated since: no instance shows, so the next token (derived from that one) launches."""
    from provisioner.providers.aws.provider import AwsProvider

    a, b = _signed_apart(offers[0], monkeypatch)
    first = AwsProvider(op_timeout=2).create(a, offers[0])
    aws.client("ec2").terminate_instances(InstanceIds=[first.cloud_id])  # not `down`: the security group stays
    second = AwsProvider(op_timeout=2).create(b, offers[0])
    [inst] = _running(aws, "us-east-1")
    assert second.cloud_id == inst["InstanceId"] != first.cloud_id
    calls = aws.faults.calls("RunInstances")
    assert [c.status for c in calls] == [200, 400, 200]  # the second's first answer: IdempotentParameterMismatch
    t0, t1, t2 = (c.params["ClientToken"] for c in calls)
    assert t0 == t1 != t2


def test_two_cluster_ups_whose_payload_urls_differ_make_one_cluster(aws, offers, monkeypatch):  # noqa: F811
    """The same for a cluster of 2: the second `up` takes the first's nodes once they carry their ranks (the first
    `up` tags them after the launch) and never terminates them."""
    from dataclasses import replace

    specs = [replace(s, nodes=2, compact=False) for s in _signed_apart(offers[0], monkeypatch)]
    results = _together(specs, offers[0])
    assert not any(isinstance(r, Exception) for r in results), results
    nodes = _running(aws, "us-east-1")
    assert len(nodes) == 2 and {r.cloud_id for r in results} <= {i["InstanceId"] for i in nodes}  # type: ignore[union-attr]
    assert len({c.params["ClientToken"] for c in aws.faults.calls("RunInstances")}) == 1
    assert not aws.faults.calls("TerminateInstances")
