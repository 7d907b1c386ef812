"""The one way providers wait and retry: ``poll`` (tenacity), bounded by a deadline and, for transient errors,
by a number of tries in a row.

- Waiting for a state (an operation DONE, a VM out of PROVISIONING, a group gone): ``ready(result)`` says
  when to stop; between calls ``interval`` seconds (capped by what is left of the deadline).
- Retrying a call: ``ready`` defaults to "any answer"; an exception for which ``transient(exc)`` is true is
  retried with exponential backoff and equal jitter (``backoff`` * 2**(n-1), at most 30 s, half of it random)
  while fewer than ``tries`` calls in a row failed; any other exception propagates at once. Where the server said
  how long to wait (an HTTP ``Retry-After``), ``retry_after(exc)`` returns it and that is the wait instead (at most
  MAX_RETRY_AFTER; never past the deadline).
- The deadline is checked against ``clock`` (injectable, like ``sleep``, so that tests are deterministic and
  never depend on the machine's speed). Past it, ``timed_out(last)`` is raised, ``last`` being the last result or
  exception; a transient exception after ``tries`` failures in a row is re-raised as it is.

The error classifiers (``gcp.errors.is_retryable``, Azure's conflict check) are the ``transient`` predicates;
nothing here knows a cloud. ``tries=None``: only the deadline bounds the retries.

The rule (one retry library): every retry or wait loop trainvm runs itself (a poll of an operation, a
read-modify-write redone on a conflict, an HTTP GET retried on 5xx) goes through ``poll``, hence tenacity;
``google.api_core.retry`` is not used for them. The one exception is an SDK's *own* retry of its own calls:
google-cloud-storage and google-cloud-compute methods take a ``retry=`` argument that must be an api_core
``Retry`` object (e.g. ``bucket.get_blob(..., retry=...)`` in gcp/store.py), and botocore/azure-core configure
theirs in the client; passing that argument is configuring the SDK, not a second retry mechanism. A
``Retry(...)(fn)()`` that wraps trainvm's own function, or ``retry_target``, is a project-level loop and is not
allowed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 60.0


def transient_http_status(code: int) -> bool:
    """The HTTP statuses every trainvm HTTP client retries: 408 Request Timeout (RFC 9110 section 15.5.9),
    429 Too Many Requests (RFC 6585 section 4) and 5xx."""
    return code in (408, 429) or code >= 500


def retry_after_seconds(headers: Any) -> float | None:
    """A response's ``Retry-After`` in seconds (0..MAX_RETRY_AFTER), or None when absent or an HTTP date."""
    raw = headers.get("Retry-After") if headers is not None else None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(raw))) if raw is not None else None
    except ValueError:  # an HTTP date: not worth parsing, back off instead
        return None


def backoff_delay(base: float, failures: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random."""
    delay = min(MAX_BACKOFF, base * 2.0 ** (failures - 1))
    uniform = rng.uniform if rng is not None else random.uniform
    return delay / 2 + uniform(0, delay / 2)


def poll(fetch: Callable[[], T], *, deadline: float, timed_out: Callable[[Any], BaseException],
         ready: Callable[[T], bool] = lambda _: True, interval: float | Callable[[], float] = 0.0,
         transient: Callable[[BaseException], bool] | None = None, tries: int | None = 1, backoff: float = 0.0,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
         rng: random.Random | None = None, retry_after: Callable[[BaseException], float | None] | None = None) -> T:
    """``fetch()`` until ``ready(result)``, within ``deadline`` (a ``clock()`` value). See the module doc."""
    from tenacity import RetryCallState, Retrying

    failures = 0

    def again(rs: RetryCallState) -> bool:
        nonlocal failures
        assert rs.outcome is not None
        if rs.outcome.failed:
            exc = rs.outcome.exception()
            failures += 1
            return bool(transient is not None and exc is not None and transient(exc))
        failures = 0
        return not ready(rs.outcome.result())

    def stop(rs: RetryCallState) -> bool:
        assert rs.outcome is not None
        return (rs.outcome.failed and tries is not None and failures >= tries) or clock() >= deadline

    def wait(rs: RetryCallState) -> float:
        assert rs.outcome is not None
        if rs.outcome.failed:
            exc = rs.outcome.exception()
            asked = retry_after(exc) if retry_after is not None and exc is not None else None
            delay = min(MAX_RETRY_AFTER, asked) if asked is not None else backoff_delay(backoff, failures, rng)
        else:
            delay = interval() if callable(interval) else interval
        return max(0.0, min(delay, deadline - clock()))

    def give_up(rs: RetryCallState) -> Any:
        assert rs.outcome is not None
        if rs.outcome.failed:
            exc = rs.outcome.exception()
            assert isinstance(exc, BaseException)
            if (tries is not None and failures >= tries) or clock() < deadline:
                raise exc
            err = timed_out(exc)
            if err is exc:
                raise exc
            raise err from exc
        raise timed_out(rs.outcome.result())

    return Retrying(retry=again, stop=stop, wait=wait, sleep=sleep, retry_error_callback=give_up)(fetch)
