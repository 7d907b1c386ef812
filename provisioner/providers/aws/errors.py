"""EC2/IAM/SSM failures -> trainvm's ``ProviderError`` classes, in one place.

botocore raises ``ClientError`` with ``response["Error"]["Code"]`` (the EC2 query protocol's
``<Errors><Error><Code>``). ``is_transient`` says which failures ``AwsApi.call`` retries (throttling codes, 5xx,
429, connection errors and timeouts: what botocore's own retry modes retry); a throttling or 5xx code that reaches
``classify`` has exhausted those retries (or the call's time budget).
Duck-typed over the exceptions: importing this module imports no cloud SDK.

- capacity (next AZ): ``InsufficientInstanceCapacity`` and friends, ``Unsupported`` (the type is not offered
  in that AZ), a spot ``MaxPrice`` under the current spot price;
- quota (next region): ``VcpuLimitExceeded``, ``MaxSpotInstanceCountExceeded``, ``InstanceLimitExceeded``;
- retry-exhausted: ``RequestLimitExceeded``/throttling, 5xx, connection errors;
- auth (stop): ``UnauthorizedOperation``, ``AuthFailure``, bad/expired keys, an opt-in region;
- invalid (stop): parameter errors, a missing AMI, an idempotency-token mismatch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provisioner.providers.aws.sdk import BotoConfig

from provisioner.providers.base import (
    AuthError,
    CapacityError,
    InvalidRequestError,
    ProviderError,
    QuotaError,
    RetryExhaustedError,
)

CAPACITY_CODES = frozenset({"InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientCapacity",
                            "InsufficientReservedInstanceCapacity", "Unsupported", "SpotMaxPriceTooLow",
                            "InsufficientFreeAddressesInSubnet"})
QUOTA_CODES = frozenset({"VcpuLimitExceeded", "MaxSpotInstanceCountExceeded", "InstanceLimitExceeded",
                         "PendingVerification", "ResourceLimitExceeded"})
RETRY_CODES = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException",
                         "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable",
                         "RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete",
                         "SlowDown", "OperationAborted"})  # S3: throttling; a conflicting operation on the bucket
AUTH_CODES = frozenset({"UnauthorizedOperation", "AuthFailure", "InvalidClientTokenId", "SignatureDoesNotMatch",
                        "ExpiredToken", "OptInRequired", "Blocked", "AccessDenied", "AccessDeniedException",
                        "UnrecognizedClientException", "IncompleteSignature",
                        "InvalidAccessKeyId", "AllAccessDisabled", "RequestTimeTooSkewed",
                        "403"})  # S3: HEAD answers carry no body, botocore's code is the HTTP status
NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidGroup.NotFound", "NoSuchEntity",
                             "InvalidKeyPair.NotFound", "ParameterNotFound", "InvalidAMIID.NotFound",
                             "InvalidPlacementGroup.Unknown", "NoSuchKey", "NoSuchBucket",
                             "404"})  # S3 HEAD: the status as the code


def error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return (response.get("Error") or {}).get("Code")
    return None


def error_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        msg = (response.get("Error") or {}).get("Message")
        if msg:
            return str(msg)
    return str(exc)


def http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return None


def is_not_found(exc: BaseException) -> bool:
    code = error_code(exc) or ""
    return code in NOT_FOUND_CODES or code.endswith(".NotFound") or code.endswith(".Malformed") and "ID" in code


def is_transient(exc: BaseException) -> bool:
    """A failure worth sending again: a throttling or transient code, a 5xx or 429 answer, or no answer at all
    (botocore's ``HTTPClientError`` and ``ConnectionError`` families: refused, closed, connect and read timeouts)."""
    code = error_code(exc)
    if code is None:
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import HTTPClientError

        return isinstance(exc, (HTTPClientError, BotoConnectionError, ConnectionError))
    status = http_status(exc) or 0
    return code in RETRY_CODES or status >= 500 or status == 429


def classify(exc: BaseException, *, attempts: int | None = None) -> ProviderError:
    """The ``ProviderError`` for a botocore exception (``ClientError`` or a connection error); ``attempts``: how
    many times the request was sent (said in the message of a retried failure)."""
    if isinstance(exc, ProviderError):
        return exc
    code = error_code(exc)
    message = error_message(exc)
    if code is None:  # not an API answer: EndpointConnectionError, ConnectTimeout, ReadTimeout, NoCredentialsError...
        name = type(exc).__name__
        if name in ("NoCredentialsError", "PartialCredentialsError", "NoRegionError"):
            return AuthError(f"AWS credentials: {message}", code=name)
        tail = f" (after {attempts} attempts)" if attempts and attempts > 1 else ""
        return RetryExhaustedError(f"AWS did not answer ({message}){tail}", code=name)  # the type name: JSON's code only
    retries = ((getattr(exc, "response", None) or {}).get("ResponseMetadata") or {}).get("RetryAttempts")
    if attempts is not None:
        retries = attempts - 1
    if code in CAPACITY_CODES:
        return CapacityError(message, code=code)
    if code in QUOTA_CODES:
        return QuotaError(message, code=code, scope="region")
    if code in AUTH_CODES:
        return AuthError(message, code=code)
    status = http_status(exc) or 0
    if code in RETRY_CODES or status >= 500 or status == 429:
        tail = f" (after {int(retries) + 1} attempts)" if retries is not None else ""
        return RetryExhaustedError(f"{message}{tail}", code=code)
    if code.startswith("Invalid") or code.startswith("Missing") or code in ("IdempotentParameterMismatch",
                                                                              "ValidationError", "MalformedPolicyDocument"):
        return InvalidRequestError(message, code=code)
    return ProviderError(message, code=code)


def botocore_config(*, max_attempts: int, connect_timeout: float, read_timeout: float) -> BotoConfig:
    """botocore's client config: standard retry mode (throttling codes, 5xx, connection errors) with
    ``max_attempts`` in all (1: no retry, ``AwsApi.call`` retries within its time budget), and bounded timeouts.
    Never the adaptive mode: its client-side rate limiter sleeps outside any budget."""
    from botocore.config import Config

    config: BotoConfig = Config(retries={"mode": "standard", "total_max_attempts": max(1, max_attempts)},
                                connect_timeout=connect_timeout, read_timeout=read_timeout,
                                user_agent_extra="trainvm")
    return config
