"""Compute Engine failures -> trainvm's ``ProviderError`` classes, in one place.

GCE reports a failure in two forms (cloud-sdks.md G3): a finished operation whose ``error.errors[]``
carry a GCE code (``ZONE_RESOURCE_POOL_EXHAUSTED``, ``QUOTA_EXCEEDED``...), and a synchronous HTTP
error whose ``errors[]`` are dicts with a ``reason`` (``quotaExceeded``, ``rateLimitExceeded``...).
Both are normalised into a ``Failure`` and classified by ``classify``; ``is_retryable`` tells the
insert/wait loops which ones to retry (429, 5xx that are not stock-outs, connection errors).
Duck-typed over the exceptions: importing this module imports no cloud SDK.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal, Protocol

from provisioner.providers.base import (
    AuthError,
    CapacityError,
    InvalidRequestError,
    ProviderError,
    QuotaError,
    RetryExhaustedError,
)

#: insufficientCapacity: the reason of bulkInsert's up-front refusal, an HTTP 503 on the request itself ("Insufficient
#: capacity", https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-bulk-vm-creation): the next zone,
#: never a retry of the same request like another 503
CAPACITY_CODES = frozenset({"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                            "RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "insufficientCapacity"})
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "quotaExceeded", "QUOTA_LIMIT_EXCEEDED"})
RATE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RESOURCE_OPERATION_RATE_EXCEEDED"})
AUTH_REASONS = frozenset({"required", "authError", "forbidden", "accessNotConfigured", "insufficientPermissions",
                          "PERMISSION_DENIED", "UNAUTHENTICATED", "SERVICE_DISABLED"})
CAPACITY_TEXT = re.compile(r"does not have enough resources|resource pool exhausted", re.I)
QUOTA_METRIC = re.compile(r"Quota '([A-Za-z0-9_]+)' exceeded")
#: GCE's answer for a project that does not exist or that the caller cannot see (404 notFound on the project
#: itself, or 403 "Project P is not found and cannot be used for API calls").
PROJECT_404 = re.compile(r"The resource 'projects/([^'/]+)' was not found")
PROJECT_403 = re.compile(r"Project (\S+) is not found and cannot be used for API calls")


FailureKind = Literal["api", "auth", "network", "other"]


@dataclass(frozen=True)
class Failure:
    """One failure, whatever form it came in."""

    status: int | None  # HTTP status (or the operation's httpErrorStatusCode)
    code: str | None  # GCE operation error code, or the HTTP error reason
    message: str
    metrics: tuple[str, ...] = ()  # quota metric names (errorDetails.quotaInfo / the message)
    kind: FailureKind = "api"

    def quota_metrics(self) -> tuple[str, ...]:
        found = tuple(m.rsplit("/", 1)[-1].upper() for m in self.metrics)
        return found + tuple(QUOTA_METRIC.findall(self.message))


class HttpResponse(Protocol):
    """The ``requests`` response a storage media error carries."""

    status_code: int
    text: str


def _item_fields(item: object) -> tuple[str | None, str, tuple[str, ...]]:
    """(code or reason, message, quota metrics) of one errors[] entry: dict (HTTP) or compute_v1.Errors."""
    if isinstance(item, dict):
        return item.get("reason") or item.get("code"), str(item.get("message") or ""), ()
    metrics = []
    for detail in getattr(item, "error_details", None) or ():
        info = getattr(detail, "quota_info", None)
        if info is not None and getattr(info, "metric_name", None):
            metrics.append(info.metric_name)
    return getattr(item, "code", None) or None, str(getattr(item, "message", "") or ""), tuple(metrics)


def from_operation(op: object) -> Failure | None:
    """The failure a finished operation carries in ``error.errors`` (G2: never trust ``result()``)."""
    errors = list(getattr(getattr(op, "error", None), "errors", None) or ())
    if not errors:
        return None
    fields = [_item_fields(e) for e in errors]
    code = next((c for c, _, _ in fields if c in CAPACITY_CODES or c in QUOTA_CODES), fields[0][0])
    message = "; ".join(m for _, m, _ in fields if m) or str(code)
    metrics = tuple(m for _, _, ms in fields for m in ms)
    return Failure(getattr(op, "http_error_status_code", None) or None, code, message, metrics)


def from_exception(exc: BaseException) -> Failure:
    """Normalise an exception raised by an SDK call."""
    module = type(exc).__module__
    if module.startswith("google.auth"):
        return Failure(None, type(exc).__name__, str(exc) or type(exc).__name__, kind="auth")
    status = getattr(exc, "code", None)
    if module.startswith("google.api_core") and isinstance(status, int):
        items = list(getattr(exc, "errors", None) or ())
        fields = [_item_fields(e) for e in items]
        code = next((c for c, _, _ in fields if c), None)
        message = getattr(exc, "message", None) or str(exc)
        details = "; ".join(m for _, m, _ in fields if m and m not in message)
        metrics = tuple(m for _, _, ms in fields for m in ms)
        return Failure(status, code, f"{message}{'; ' + details if details else ''}", metrics)
    response = getattr(exc, "response", None)
    if response is not None and module.startswith(("google.cloud.storage", "google.resumable_media")) and isinstance(
            getattr(response, "status_code", None), int):
        return _media_failure(response)
    if module.startswith(("requests", "urllib3")) or isinstance(exc, (ConnectionError, TimeoutError)):
        return Failure(None, type(exc).__name__, str(exc), kind="network")
    return Failure(None, type(exc).__name__, str(exc) or type(exc).__name__, kind="other")


def _media_failure(response: HttpResponse) -> Failure:
    """An answer of the storage SDK's media layer (uploads, downloads: ``google.cloud.storage.exceptions.InvalidResponse``
    carries the ``requests`` response), whose body is Google's JSON error (``{"error": {"code", "message",
    "errors": [{"reason"}]}}``, cloud.google.com/storage/docs/json_api/v1/status-codes) when the service sent one."""
    status = int(response.status_code)
    try:
        error = json.loads(response.text).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    items = [e for e in error.get("errors") or () if isinstance(e, dict)] if isinstance(error, dict) else []
    code = next((str(e["reason"]) for e in items if e.get("reason")), None)
    message = str(error.get("message") or "") if isinstance(error, dict) else ""
    return Failure(status, code, message or f"HTTP {status} {getattr(response, 'reason', '') or ''}".strip())


def missing_project(f: Failure) -> str | None:
    """The project named by a "project not found" answer (never the same thing as "instance not found")."""
    m = (PROJECT_404.search(f.message) if f.status == 404 else None) or (
        PROJECT_403.search(f.message) if f.status == 403 else None)
    return m.group(1) if m else None


def short(message: str) -> str:
    return _short(message)


def _short(message: str) -> str:
    # "POST http://host/compute/v1/projects/...: Quota ..." -> "Quota ..."
    text = re.sub(r"^(GET|POST|DELETE|PUT|PATCH) \S+: ", "", message.strip())
    return text if len(text) <= 400 else text[:397] + "..."


def is_capacity(f: Failure) -> bool:
    return f.code in CAPACITY_CODES or bool(CAPACITY_TEXT.search(f.message))


def is_quota(f: Failure) -> bool:
    return f.code in QUOTA_CODES or bool(QUOTA_METRIC.search(f.message))


def is_retryable(f: Failure) -> bool:
    """Worth sending again (same requestId): rate limits, 5xx that are not stock-outs, network errors."""
    if f.kind == "network":
        return True
    if f.kind != "api" or is_capacity(f) or is_quota(f):
        return False
    return f.status == 429 or f.code in RATE_REASONS or (f.status is not None and f.status >= 500)


def classify(f: Failure, *, retried: int = 0) -> ProviderError:
    """The ``ProviderError`` for a failure that will not be retried (any more)."""
    message = _short(f.message)
    if f.kind == "auth":
        return AuthError(f"GCE credentials were refused or could not be obtained: {message}", code=f.code)
    if is_capacity(f):
        return CapacityError(message, code=f.code if f.code in CAPACITY_CODES else "ZONE_RESOURCE_POOL_EXHAUSTED")
    if is_quota(f):
        metrics = f.quota_metrics()
        scope: Literal["region", "cloud"] = "cloud" if any("ALL_REGIONS" in m for m in metrics) or "globally" in f.message else "region"
        code = "QUOTA_EXCEEDED" if not metrics else f"QUOTA_EXCEEDED:{metrics[0]}"
        return QuotaError(message, code=code, scope=scope)
    if is_retryable(f):
        what = f"HTTP {f.status}" if f.status else ("network error" if f.kind == "network" else f.code or "error")  # no type name
        tail = f" after {retried} tries" if retried else ""
        return RetryExhaustedError(f"{what}{tail}: {message}", code=str(f.status or f.code))
    if f.status == 401 or f.code in AUTH_REASONS or (f.status == 403 and f.code not in RATE_REASONS):
        return AuthError(message, code=f.code or str(f.status))
    if f.status in (400, 404, 409, 412) or (f.code and ("INVALID" in f.code or "NOT_FOUND" in f.code)):
        return InvalidRequestError(message, code=f.code or str(f.status))
    return ProviderError(message, code=f.code or (str(f.status) if f.status else None))
