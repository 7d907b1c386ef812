"""GCE SDK calls with bounded retries, and bounded waits on operations (mixed into ``GcpProvider``).

- ``_call``: one SDK call through ``google.api_core.retry.retry_target``: 429, 5xx (not stock-outs) and
  connection errors are retried up to ``tries`` times with exponential backoff and equal jitter, all within
  ``call_timeout`` seconds (``TRAINVM_API_TIMEOUT``, default 30; each HTTP request gets at most half of it),
  so an endpoint that never answers fails in about that time instead of minutes. 404/409 map to the
  caller's ``missing``/``exists`` value, except a 404 on the project itself (``errs.missing_project``),
  which is an AuthError naming the project: a wrong project is never "not found".
- ``_wait``: ``zoneOperations.wait`` / ``globalOperations.wait`` until DONE or the operation deadline.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from provisioner.providers import gcp_errors as errs
from provisioner.providers.base import AuthError, RetryExhaustedError

WAIT_HTTP_TIMEOUT = 150.0  # zoneOperations.wait answers within ~2 min
MISSING = object()


class _Transient(Exception):
    """A retryable failure inside ``_call`` (never leaves it)."""

    def __init__(self, failure: errs.Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _stderr_warning(text: str) -> None:
    from provisioner.output import escape, notice

    notice("warning", escape(text))


class GceCalls:
    """Needs: api(), tries, retry_base_delay, call_timeout, http_timeout, op_timeout, poll_interval, _sleep, _rng."""

    if TYPE_CHECKING:  # provided by GcpProvider (declared so that mypy checks this mixin)
        tries: int
        retry_base_delay: float
        call_timeout: float
        http_timeout: float
        op_timeout: float
        poll_interval: float
        _sleep: Callable[[float], None]
        _rng: Any

        def api(self) -> Any: ...

    def _backoff(self, attempt: int, budget: float = 30.0) -> None:
        delay = min(30.0, budget, self.retry_base_delay * 2 ** (attempt - 1))
        self._sleep(delay / 2 + self._rng.uniform(0, delay / 2))  # "equal jitter"

    def _sleeps(self, deadline: float) -> Iterator[float]:
        """api_core's sleep generator; the (injectable) sleep happens here, capped by the call's deadline."""
        for attempt in itertools.count(1):
            self._backoff(attempt, max(0.0, deadline - time.monotonic()))
            yield 0.0

    def _call(self, fn: Callable[[], Any], *, missing: Any = MISSING, exists: Any = MISSING) -> Any:
        """Run one SDK call with bounded retries (count and ``call_timeout``); 404 -> ``missing`` and 409 ->
        ``exists`` when given (a 404 on the project itself is never "missing")."""
        from google.api_core.retry import retry_target

        tries = 0

        def target() -> Any:
            nonlocal tries
            tries += 1
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - classified below
                f = errs.from_exception(exc)
                if f.kind == "other":  # not a cloud answer: a bug, shown as such
                    raise
                project = errs.missing_project(f)
                if project is not None:
                    raise AuthError(f"GCE project {project!r} does not exist or these credentials cannot see it "
                                    f"({errs.short(f.message)})", code="PROJECT_NOT_FOUND",
                                    hint="check GOOGLE_CLOUD_PROJECT (the project id, not its name or number) and "
                                         "that the account has roles/compute.instanceAdmin.v1 on it") from exc
                if f.status == 404 and missing is not MISSING:
                    return missing
                if f.status == 409 and exists is not MISSING:
                    return exists
                if errs.is_retryable(f) and tries < self.tries:
                    raise _Transient(f) from exc
                raise errs.classify(f, retried=tries if errs.is_retryable(f) else 0) from exc

        def give_up(excs: list[Exception], reason: Any, timeout: float | None) -> tuple[Exception, Exception | None]:
            last = excs[-1]
            cause = last.__cause__ if isinstance(last.__cause__, Exception) else None
            if isinstance(last, _Transient):  # the call's time budget ran out between tries
                err = errs.classify(last.failure, retried=tries)
                err.args = (f"{err} (gave up after {self.call_timeout:g} s: TRAINVM_API_TIMEOUT)",)
                return err, cause
            return last, cause

        deadline = time.monotonic() + self.call_timeout
        return retry_target(target, lambda e: isinstance(e, _Transient), self._sleeps(deadline),
                            timeout=self.call_timeout, exception_factory=give_up)

    def _wait(self, zone: str | None, op: Any, deadline: float) -> Any:
        """Wait until ``op`` (zonal, or global when ``zone`` is None) is DONE (bounded); the caller inspects
        ``op.error.errors``."""
        api, failures = self.api(), 0
        done = api.v1.Operation.Status.DONE
        scope = {"zone": zone} if zone else {}
        waiter = api.zone_ops.wait if zone else api.global_ops.wait
        while op.status != done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RetryExhaustedError(f"operation {op.name} in {zone or 'global'} did not finish within "
                                          f"{self.op_timeout:g} s (TRAINVM_GCE_OP_TIMEOUT)", code="OPERATION_TIMEOUT")
            started = time.monotonic()
            try:
                op = waiter(project=api.project, operation=op.name, retry=None,
                            timeout=max(1.0, min(WAIT_HTTP_TIMEOUT, remaining + 5)), **scope)
            except Exception as exc:  # noqa: BLE001
                f, failures = errs.from_exception(exc), failures + 1
                if not errs.is_retryable(f) or failures >= self.tries:
                    raise errs.classify(f, retried=failures) from exc
                self._backoff(failures)
                continue
            if op.status != done and time.monotonic() - started < 1.0:  # the server did not long-poll
                self._sleep(max(0.0, min(self.poll_interval, deadline - time.monotonic())))
        return op
