"""provisioner/providers/poll.py: the one wait/retry helper every provider uses (tenacity), on a fake clock."""

from __future__ import annotations

import pytest

from provisioner.providers.poll import poll
from tests.fakes import Clock


class Busy(Exception):
    pass


def scripted(*answers):
    """A fetch that answers (or raises) each item in turn and counts its calls."""
    it = iter(answers)
    calls = []

    def fetch():
        calls.append(1)
        item = next(it)
        if isinstance(item, BaseException):
            raise item
        return item
    return fetch, calls


def test_polls_until_ready_sleeping_the_interval():
    clock, slept = Clock(), []
    fetch, calls = scripted("RUNNING", "RUNNING", "DONE")
    got = poll(fetch, ready=lambda s: s == "DONE", deadline=clock() + 60, interval=5, clock=clock, sleep=slept.append,
               timed_out=lambda last: AssertionError(last))
    assert got == "DONE" and len(calls) == 3 and slept == [5, 5]


def test_deadline_raises_timed_out_with_the_last_answer():
    clock = Clock()

    def sleep(s):
        clock.advance(s)
    fetch, calls = scripted(*["RUNNING"] * 10)
    with pytest.raises(TimeoutError, match="still RUNNING"):
        poll(fetch, ready=lambda s: s == "DONE", deadline=clock() + 25, interval=10, clock=clock, sleep=sleep,
             timed_out=lambda last: TimeoutError(f"still {last}"))
    assert len(calls) == 4  # t=0, 10, 20 and a last look at t=25 (the sleep is capped at the 5 s left)


def test_transient_errors_are_retried_with_backoff_then_reraised():
    clock, slept = Clock(), []
    fetch, calls = scripted(Busy(), Busy(), Busy(), "never")
    with pytest.raises(Busy):
        poll(fetch, deadline=clock() + 600, transient=lambda e: isinstance(e, Busy), tries=3, backoff=1.0, clock=clock,
             sleep=slept.append, timed_out=lambda last: AssertionError(last))
    assert len(calls) == 3 and len(slept) == 2
    assert 0.5 <= slept[0] <= 1.0 and 1.0 <= slept[1] <= 2.0  # exponential, equal jitter


def test_a_success_resets_the_failure_count_and_other_errors_propagate_at_once():
    clock = Clock()
    fetch, calls = scripted(Busy(), "RUNNING", Busy(), "DONE")
    assert poll(fetch, ready=lambda s: s == "DONE", deadline=clock() + 60, transient=lambda e: isinstance(e, Busy),
                tries=2, clock=clock, sleep=lambda s: None, timed_out=AssertionError) == "DONE"
    fetch, calls = scripted(KeyError("no"), "DONE")
    with pytest.raises(KeyError):
        poll(fetch, deadline=clock() + 60, transient=lambda e: isinstance(e, Busy), tries=5, clock=clock,
             sleep=lambda s: None, timed_out=AssertionError)
    assert len(calls) == 1


def test_transient_error_at_the_deadline_is_timed_out_from_it():
    clock = Clock()

    def sleep(s):
        clock.advance(s)
    fetch, _ = scripted(*[Busy()] * 10)
    with pytest.raises(TimeoutError) as err:
        poll(fetch, deadline=clock() + 3, transient=lambda e: isinstance(e, Busy), tries=100, backoff=2.0, clock=clock,
             sleep=sleep, timed_out=lambda last: TimeoutError("gave up"))
    assert isinstance(err.value.__cause__, Busy)


def test_tries_none_retries_transient_errors_until_the_deadline_only():
    clock = Clock()

    def sleep(s):
        clock.advance(s)
    fetch, calls = scripted(*[Busy()] * 50)
    t0 = clock()
    with pytest.raises(TimeoutError) as err:
        poll(fetch, deadline=t0 + 100, transient=lambda e: isinstance(e, Busy), tries=None, backoff=1.0,
             clock=clock, sleep=sleep, timed_out=lambda last: TimeoutError("gave up"))
    assert isinstance(err.value.__cause__, Busy) and clock() == t0 + 100
    assert 6 <= len(calls) <= 12  # 1, 2, 4, 8, 16, 30, 30... s (halved at most by the jitter) within 100 s


def test_no_module_outside_poll_runs_its_own_api_core_retry_loop():
    """The one-retry-library rule of poll.py's docstring: ``google.api_core.retry`` appears only as the ``retry=``
    argument an SDK method takes (gcp_store.py), never as a loop around trainvm's own code (issue 26: the AWS
    RunInstances IAM-lag retry, the placement group InUse retry and Azure's PrincipalNotFound retry are ``poll``
    now; tests/aws/test_retry_deadline.py and tests/azure/test_role_retry.py prove what reaches the user)."""
    import re
    from pathlib import Path

    root = Path(__file__).parents[2] / "provisioner"
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if re.search(r"api_core\.retry import|api_core import retry", p.read_text(encoding="utf-8")))
    assert users == ["providers/gcp/store.py"]
