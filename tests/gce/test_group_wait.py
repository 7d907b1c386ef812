"""The group engine's operation wait (providers/gcp/group.py ``_wait``, through providers/poll.py): it polls
``zoneOperations.wait`` until DONE and gives up at ``op_timeout`` with OPERATION_TIMEOUT. The emulator's
operations finish at once, so an operations client that reports RUNNING for a while (as GCE's long-poll does
when its 2-minute wait ends first) stands in for it here; a failure of the wait call itself is not retried."""

from __future__ import annotations

import time

import pytest

from provisioner.providers.base import ProviderError
from provisioner.providers.gcp.group import GceGroup, GroupClients


class SlowOps:
    def __init__(self, running_for: int, fail: Exception | None = None) -> None:
        self.running_for, self.fail, self.calls = running_for, fail, 0

    def wait(self, *, project: str, operation: str, zone: str | None = None, region: str | None = None):
        from google.cloud import compute_v1

        self.calls += 1
        if self.fail is not None:
            raise self.fail
        status = compute_v1.Operation.Status.DONE if self.calls > self.running_for else compute_v1.Operation.Status.RUNNING
        return compute_v1.Operation(name=operation, status=status)


def engine(ops: SlowOps, op_timeout: float) -> GceGroup:
    return GceGroup(GroupClients(None, ops, None, ops), "p", op_timeout=op_timeout, poll=0.01)


def running():
    from google.cloud import compute_v1

    return compute_v1.Operation(name="op-1", status=compute_v1.Operation.Status.RUNNING)


def test_an_operation_is_polled_until_done() -> None:
    ops = SlowOps(running_for=3)
    assert engine(ops, 5)._wait(running(), zone="us-central1-a").status.name == "DONE"
    assert ops.calls == 4


def test_an_operation_that_never_finishes_times_out() -> None:
    ops = SlowOps(running_for=10**9)
    t0 = time.monotonic()
    with pytest.raises(ProviderError, match="operation op-1 did not finish within 0.3 s") as e:
        engine(ops, 0.3)._wait(running(), region="us-central1")
    assert e.value.code == "OPERATION_TIMEOUT" and ops.calls > 3 and time.monotonic() - t0 < 2


def test_a_failing_wait_call_is_not_retried() -> None:
    from google.api_core.exceptions import Forbidden

    ops = SlowOps(running_for=0, fail=Forbidden("no"))
    with pytest.raises(Forbidden):
        engine(ops, 5)._wait(running(), zone="us-central1-a")
    assert ops.calls == 1
