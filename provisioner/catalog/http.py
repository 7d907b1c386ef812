"""HTTP for the public price APIs (``catalog refresh``): urllib, bounded, retried with tenacity.

* A 429 or 5xx, a connection error or a timeout is retried (at most TRIES calls): the wait is the response's
  ``Retry-After`` (seconds, capped at MAX_RETRY_AFTER) when it sends one, else exponential backoff from
  ``TRAINVM_RETRY_BASE_DELAY`` (default 1 s). Other 4xx are not retried.
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

TRIES = 5
MAX_RETRY_AFTER = 60.0
JSON_CAP = 64 * 2**20  # one JSON page
USER_AGENT = "trainvm-catalog-refresh"

#: injectable for tests (they record the waits instead of sleeping)
sleep: Callable[[float], None] = time.sleep


class Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _short(url: str) -> str:
    return url.split("?", 1)[0]


def _retry_after(headers: Any) -> float | None:
    raw = headers.get("Retry-After") if headers is not None else None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(raw))) if raw is not None else None
    except ValueError:  # an HTTP date: not worth parsing, back off instead
        return None


def _open(url: str, headers: Mapping[str, str] | None) -> Any:
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
    try:
        # TRAINVM_API_TIMEOUT covers a call with its retries; each request gets half of it
        return urllib.request.urlopen(req, timeout=settings.seconds("TRAINVM_API_TIMEOUT", 30.0) / 2)  # noqa: S310
    except urllib.error.HTTPError as e:
        body = e.read(300).decode("utf-8", "replace").strip()
        msg = f"GET {_short(url)}: HTTP {e.code}" + (f": {body}" if body else "")
        e.close()
        if e.code == 429 or e.code >= 500:
            raise Transient(msg, _retry_after(e.headers)) from None
        raise CloudError(msg) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        raise Transient(f"GET {_short(url)}: {getattr(e, 'reason', e)}") from None


def _retrying(fn: Callable[[], Any]) -> Any:
    from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

    base = settings.seconds("TRAINVM_RETRY_BASE_DELAY", 1.0)

    def wait(rs: RetryCallState) -> float:
        exc = rs.outcome.exception() if rs.outcome else None
        if isinstance(exc, Transient) and exc.retry_after is not None:
            return exc.retry_after
        return min(30.0, base * 2 ** (rs.attempt_number - 1))

    def give_up(rs: RetryCallState) -> Any:
        exc = rs.outcome.exception() if rs.outcome else None
        raise CloudError(f"{exc} (after {rs.attempt_number} tries)",
                         hint="the old catalog is kept; run `trainvm catalog refresh` again later")

    return Retrying(retry=retry_if_exception_type(Transient), stop=stop_after_attempt(TRIES), wait=wait,
                    sleep=lambda s: sleep(s), retry_error_callback=give_up)(fn)


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
