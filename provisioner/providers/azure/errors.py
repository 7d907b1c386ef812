"""Azure failures -> trainvm's ``ProviderError`` classes, in one place.

Classified by the ARM error *code*, never by exception class or HTTP status: azure-mgmt maps every 409
to ``ResourceExistsError`` (SkuNotAvailable and quota included, trap A3), and a failed long-running
operation raises ``HttpResponseError`` with status 200 (the poll's status, trap A4). When a failed
operation carries no code (``provisioningState`` polling), the provider reads it from the VM's instance
view (``code_from_statuses``). Throttling and 5xx reach here only after azure-core's RetryPolicy gave up.
Duck-typed over the exceptions: importing this module imports no cloud SDK.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal, Protocol

from provisioner.providers.azure.arm import Status
from provisioner.providers.base import (
    AuthError,
    CapacityError,
    InvalidRequestError,
    ProviderError,
    QuotaError,
    RetryExhaustedError,
)

CAPACITY_CODES = frozenset({"SkuNotAvailable", "AllocationFailed", "ZonalAllocationFailed",
                            "OverconstrainedAllocationRequest", "OverconstrainedZonalAllocationRequest"})
QUOTA_CODES = frozenset({"QuotaExceeded", "OperationNotAllowed"})  # OperationNotAllowed only with a quota message
AUTH_CODES = frozenset({"AuthorizationFailed", "InvalidAuthenticationToken", "InvalidAuthenticationTokenTenant",
                        "AuthenticationFailed", "ExpiredAuthenticationToken", "LinkedAuthorizationFailed",
                        "SubscriptionNotFound", "InvalidSubscriptionId", "DisallowedOperation"})
RETRY_CODES = frozenset({"SubscriptionRequestsThrottled", "TooManyRequests", "ServiceUnavailable",
                         "InternalServerError", "RetryableError", "GatewayTimeout", "OperationTimeout"})
#: Failures that say nothing about other offers: try the next one (outcome "error"), do not stop.
NEXT_OFFER_CODES = frozenset({"RequestDisallowedByPolicy", "InternalExecutionError", "OSProvisioningTimedOut",
                              "VMStartTimedOut", "OperationPreempted", "Canceled"})
FAILED_STATUS = re.compile(r"^ProvisioningState/failed/(\w+)", re.I)


FailureKind = Literal["api", "auth", "network", "other"]


@dataclass(frozen=True)
class Failure:
    status: int | None  # HTTP status (200 for a failed long-running operation)
    code: str | None  # the ARM error code
    message: str
    kind: FailureKind = "api"


def is_sdk_error(exc: BaseException) -> bool:
    """An azure-core exception (``AzureError`` and subclasses), without importing azure.core."""
    return any(c.__name__ == "AzureError" and c.__module__.startswith("azure.") for c in type(exc).__mro__)


def _names(exc: BaseException) -> set[str]:
    return {c.__name__ for c in type(exc).__mro__}


def from_exception(exc: BaseException) -> Failure:
    names = _names(exc)
    status = getattr(exc, "status_code", None)
    err = getattr(exc, "error", None)
    # Blob Storage answers XML errors: azure-core leaves ``error`` None and puts the code in ``error_code``
    code = getattr(err, "code", None) or getattr(exc, "error_code", None) or None
    message = str(getattr(err, "message", None) or getattr(exc, "message", None) or exc)
    if code is None:  # the body was not an ARM error document the SDK understood: try it ourselves
        code, message = _from_body(getattr(exc, "response", None), message)
    if "ClientAuthenticationError" in names:
        return Failure(status, code or "ClientAuthenticationError", message, kind="auth")
    if names & {"ServiceRequestError", "ServiceResponseError", "ServiceRequestTimeoutError",
                "ServiceResponseTimeoutError", "IncompleteReadError"}:
        return Failure(None, type(exc).__name__, message, kind="network")
    if "HttpResponseError" in names:
        return Failure(status, code, message)
    return Failure(status, code or type(exc).__name__, message, kind="other")


class _Response(Protocol):
    """What ``_from_body`` reads of an azure-core ``HttpResponse``: its body as text."""

    def text(self) -> str: ...


def _from_body(response: _Response | None, message: str) -> tuple[str | None, str]:
    if response is None:
        return None, message
    try:
        body = json.loads(response.text())
        err = body.get("error") or {}
        return err.get("code") or None, err.get("message") or message
    except Exception:  # noqa: BLE001 - no response, not JSON, not an error document
        return None, message


def code_from_statuses(statuses: list[Status] | None) -> tuple[str | None, str]:
    """(code, message) of a ``ProvisioningState/failed/<Code>`` instance-view status."""
    for st in statuses or []:
        m = FAILED_STATUS.match(st.get("code") or "")
        if m:
            return m.group(1), st.get("message") or st.get("displayStatus") or m.group(1)
    return None, ""


def _short(message: str) -> str:
    text = " ".join(message.split())
    text = re.sub(r"^\((\w+)\) ", "", text)
    text = re.sub(r" Code: \w+ Message: .*$", "", text)
    text = re.sub(r"/subscriptions/[^\s']+/providers/[^\s']+/([^/\s']+)", r"\1", text)  # resource ids -> names
    return text if len(text) <= 400 else text[:397] + "..."


def is_quota(f: Failure) -> bool:
    return f.code == "QuotaExceeded" or (f.code in QUOTA_CODES and "quota" in f.message.lower())


def is_retryable(f: Failure) -> bool:
    return f.kind == "network" or f.code in RETRY_CODES or f.status == 429 or (f.status is not None and f.status >= 500)


def classify(f: Failure) -> ProviderError:
    """The ``ProviderError`` for a failure (the SDK's own retries are already spent)."""
    message = _short(f.message)
    if f.code in ("SubscriptionNotFound", "InvalidSubscriptionId"):
        return AuthError(f"Azure subscription not usable: {message} (it does not exist, or these credentials cannot "
                         "see it)", code=f.code,
                         hint="check AZURE_SUBSCRIPTION_ID against `az account list -o table` (the id, not the name)")
    if f.kind == "auth" or f.code in AUTH_CODES or (f.status in (401, 403) and f.code not in NEXT_OFFER_CODES):
        return AuthError(f"Azure refused the credentials or the permission: {message}", code=f.code or str(f.status),
                         hint="run `az login` (or set TRAINVM_AZURE_ACCESS_TOKEN) and check AZURE_SUBSCRIPTION_ID and "
                              "your role on the subscription")
    if f.code in CAPACITY_CODES:
        return CapacityError(message, code=f.code)
    if is_quota(f):
        return QuotaError(message, code=f.code, scope="region")
    if is_retryable(f):
        what = (f"HTTP {f.status}" if f.status and f.status != 200
                else "network error" if f.kind == "network" else (f.code or "network error"))  # no Python type name
        return RetryExhaustedError(f"{what} after the SDK's retries: {message}", code=f.code or str(f.status))
    if f.code == "MissingSubscriptionRegistration":
        return InvalidRequestError(f"{message} (register it once with `az provider register --namespace "
                                   "Microsoft.Compute` / `Microsoft.Network`)", code=f.code,
                                   hint="trainvm does not register resource providers itself")
    if f.code in NEXT_OFFER_CODES:
        return ProviderError(message, code=f.code)
    if f.status in (400, 404, 409) or (f.code and f.code.startswith("Invalid")):
        return InvalidRequestError(message, code=f.code or str(f.status))
    return ProviderError(message, code=f.code or (str(f.status) if f.status else None))
