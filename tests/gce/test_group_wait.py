"""The group engine's operation wait (providers/gcp/group.py ``_wait``, through providers/poll.py): it polls
``zoneOperations.wait`` until DONE and gives up at ``op_timeout`` with OPERATION_TIMEOUT. The emulator's
operations finish at once, so an operations client that reports RUNNING for a while (as GCE's long-poll does
when its 2-minute wait ends first) stands in for it here. The wait call goes through ``GceApi.call`` (issue 37, as a
single VM's waits): a transient failure of it (503, 403 rateLimitExceeded) is retried, another one is classified."""

from __future__ import annotations

import time

import pytest

from provisioner.providers.base import ProviderError
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.group import GceGroup, GroupClients


class SlowOps:
    def __init__(self, running_for: int, fail: Exception | None = None, failures: int | None = None) -> None:
        self.running_for, self.fail, self.failures, self.calls = running_for, fail, failures, 0

    # compute_v1's ZoneOperationsClient.wait / RegionOperationsClient.wait take ``retry`` and ``timeout`` keywords
    # besides the flattened fields (google-cloud-compute's generated clients; trainvm sends retry=None, a timeout)
    def wait(self, *, project: str, operation: str, zone: str | None = None, region: str | None = None,
             retry: object = None, timeout: float | None = None):
        from google.cloud import compute_v1

        self.calls += 1
        if self.fail is not None and (self.failures is None or self.calls <= self.failures):
            raise self.fail
        status = compute_v1.Operation.Status.DONE if self.calls > self.running_for else compute_v1.Operation.Status.RUNNING
        return compute_v1.Operation(name=operation, status=status)


def engine(ops: SlowOps, op_timeout: float) -> GceGroup:
    from google.auth.credentials import AnonymousCredentials

    api = GceApi(project="p", credentials=AnonymousCredentials(), retry_base_delay=0)
    return GceGroup(GroupClients(None, ops, None, ops), "p", api=api, op_timeout=op_timeout, poll=0.01)


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


def test_a_wait_call_refused_for_good_is_not_retried_and_is_classified() -> None:
    from google.api_core.exceptions import Forbidden

    ops = SlowOps(running_for=0, fail=Forbidden("no"))
    with pytest.raises(ProviderError):
        engine(ops, 5)._wait(running(), zone="us-central1-a")
    assert ops.calls == 1


@pytest.mark.parametrize("where", [{"zone": "us-central1-a"}, {"region": "us-central1"}])
def test_a_transient_failure_of_the_wait_call_is_retried(where) -> None:
    """A 503 of ``operations.wait`` (GCE's "backendError ... Please try again") is sent again, as a single VM's wait
    is (GceApi.wait), not the end of the create."""
    from google.api_core.exceptions import ServiceUnavailable

    ops = SlowOps(running_for=0, fail=ServiceUnavailable("Internal error. Please try again"), failures=1)
    assert engine(ops, 5)._wait(running(), **where).status.name == "DONE"
    assert ops.calls == 2
