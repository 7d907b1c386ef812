"""HTTP for the public price APIs (``catalog refresh``): urllib, bounded, retried by the project's one retry policy
(``providers/poll.py``: ``poll``, hence tenacity; no loop of its own).

* A 408, 429 or 5xx (``poll.transient_http_status``), a connection error or a timeout is retried, at most TRIES calls
  and within ``TRAINVM_API_TIMEOUT`` (default 30 s) for the call and its retries together: the wait is the
  response's ``Retry-After`` (seconds, capped at ``poll.MAX_RETRY_AFTER``) when it sends one, else poll's
  exponential backoff with equal jitter from ``TRAINVM_RETRY_BASE_DELAY`` (default 1 s), never past the budget.
  Other 4xx are not retried.
* Every request has a timeout (half of ``TRAINVM_API_TIMEOUT``, per socket operation); a body larger than its cap is an error, never read whole.
* A final failure is a CloudError (exit 3) naming the URL without its query (no key is ever in a URL: the GCP
  key travels in the ``x-goog-api-key`` header).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from provisioner import settings
from provisioner.errors import CloudError
from provisioner.providers.poll import poll, retry_after_seconds, transient_http_status

TRIES = 5
JSON_CAP = 64 * 2**20  # one JSON page
USER_AGENT = "trainvm-catalog-refresh"

#: injectable for tests (they record the waits instead of sleeping, on a clock of their own)
sleep: Callable[[float], None] = time.sleep
clock: Callable[[], float] = time.monotonic


class Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _short(url: str) -> str:
    return url.split("?", 1)[0]


def _open(url: str, headers: Mapping[str, str] | None) -> Any:
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
    try:
        # TRAINVM_API_TIMEOUT covers a call with its retries; each request gets half of it
        return urllib.request.urlopen(req, timeout=settings.seconds("TRAINVM_API_TIMEOUT", 30.0) / 2)  # noqa: S310
    except urllib.error.HTTPError as e:
        body = e.read(300).decode("utf-8", "replace").strip()
        msg = f"GET {_short(url)}: HTTP {e.code}" + (f": {body}" if body else "")
        e.close()
        if transient_http_status(e.code):
            raise Transient(msg, retry_after_seconds(e.headers)) from None
        raise CloudError(msg) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        raise Transient(f"GET {_short(url)}: {getattr(e, 'reason', e)}") from None


def _retrying(fn: Callable[[], Any]) -> Any:
    tries = 0

    def counted() -> Any:
        nonlocal tries
        tries += 1
        return fn()

    def gave_up(last: Any) -> CloudError:
        return CloudError(f"{last} (after {tries} tries within TRAINVM_API_TIMEOUT)",
                          hint="the old catalog is kept; run `trainvm catalog refresh` again later")

    try:
        return poll(counted, deadline=clock() + settings.seconds("TRAINVM_API_TIMEOUT", 30.0), timed_out=gave_up,
                    transient=lambda e: isinstance(e, Transient), tries=TRIES,
                    backoff=settings.seconds("TRAINVM_RETRY_BASE_DELAY", 1.0),
                    retry_after=lambda e: e.retry_after if isinstance(e, Transient) else None,
                    clock=lambda: clock(), sleep=lambda s: sleep(s))
    except Transient as e:  # TRIES failures in a row
        raise CloudError(f"{e} (after {tries} tries)",
                         hint="the old catalog is kept; run `trainvm catalog refresh` again later") from None


def get_json(url: str, headers: Mapping[str, str] | None = None, cap: int = JSON_CAP) -> Any:
    """GET a JSON document (retried as the module says)."""
    def once() -> Any:
        with _open(url, headers) as resp:
            data = resp.read(cap + 1)
        if len(data) > cap:
            raise CloudError(f"GET {_short(url)}: response larger than {cap // 2**20} MiB")
        try:
            return json.loads(data)
        except ValueError as e:
            raise CloudError(f"GET {_short(url)}: not JSON ({e})") from None

    return _retrying(once)


@contextmanager
def stream(url: str, headers: Mapping[str, str] | None = None) -> Iterator[IO[bytes]]:
    """A GET whose body is read as it arrives (the connection is retried; the body is not re-read)."""
    resp = _retrying(lambda: _open(url, headers))
    try:
        yield resp
    finally:
        resp.close()
