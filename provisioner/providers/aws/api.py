"""The AWS API client that ``AwsProvider`` composes (and hands to its parts): clients per (service, region), the
retried ``call``, the regions to list, AZ ID -> AZ name, and the waiters. The per-VM resources around an instance
(AMI, security group, key pair, instance profile) are ``aws_resources``' on top of it.

boto3 is imported on first use. Every call goes through ``call``: one time budget for every cloud, as GCE's
``gcp_api.call``: botocore itself sends each request once (its retries are off, each HTTP request may take half of
``TRAINVM_API_TIMEOUT``), and ``call`` retries what is transient (throttling such as ``RequestLimitExceeded``, 5xx,
connection errors and timeouts) through ``poll.poll`` with exponential backoff and equal jitter (base
``TRAINVM_RETRY_BASE_DELAY``), at most ``tries`` times and within ``TRAINVM_API_TIMEOUT`` seconds (default 30), so a
throttling storm or an endpoint that accepts connections and never answers fails in about that time (never
botocore's adaptive mode, whose client-side rate limiter and backoff kept one call busy for minutes). What is left is
classified by ``aws_errors``. The waiters (``wait``) are the one exception: their client keeps botocore's standard
retries (``tries`` attempts per poll; a throttled poll would otherwise end the waiter), bounded by ``op_timeout``.
``TRAINVM_AWS_ENDPOINT`` sends every client (EC2, SSM, IAM, STS, S3: path-style) to another base URL (moto's server in tests) with fixed dummy credentials, so that real AWS keys never leave for a
non-AWS endpoint. ``TRAINVM_AWS_REGIONS`` (comma-separated) limits the regions ``list``/``find`` look at; by
default they are the account's enabled regions among the candidates the provider's maker passes
(``candidate_regions``: the layer above gives the catalog's AWS regions, commands/clouds.py), or every enabled region
when it passes none. The provider reads no catalog itself (a provider imports nothing above it).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar, cast, overload

from provisioner import settings
from provisioner.errors import CredentialsError
from provisioner.providers.aws import errors as errs
from provisioner.providers.aws.sdk import S3, Session, Sts
from provisioner.providers.base import CapacityError, ProviderError
from provisioner.providers.host import probe_metadata
from provisioner.providers.poll import poll
from provisioner.settings import env_seconds

if TYPE_CHECKING:
    from provisioner.providers.aws.clients import Ec2, Iam, ServiceQuotas, Ssm, WaiterName

T = TypeVar("T")
M = TypeVar("M")
TEST_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
LIST_THREADS = 32  # every region at once (23 in the catalog): a region that never answers costs one time budget, not one per round


class AwsCredentialsError(CredentialsError):
    """No usable AWS credentials (exit 3)."""


def _stderr_warning(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


class AwsApi:
    """The API client an ``AwsProvider`` (and its parts: resources, group, power, store, quota, baker) calls
    through: its sessions and clients per (service, region), the retried ``call``, the regions and AZs, the waiters."""

    def __init__(self, *, endpoint: str | None = None, regions: list[str] | None = None,
                 candidate_regions: Callable[[], Iterable[str]] | None = None, tries: int = 4,
                 op_timeout: float | None = None, poll_interval: float | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.endpoint = (endpoint if endpoint is not None else settings.text("TRAINVM_AWS_ENDPOINT")).rstrip("/")
        env_regions = [r.strip() for r in settings.text("TRAINVM_AWS_REGIONS").split(",") if r.strip()]
        self._regions = regions or env_regions or None
        self._candidates = candidate_regions  # asked once, the first time the regions are needed
        self.tries = max(1, tries)
        self.op_timeout = op_timeout if op_timeout is not None else env_seconds("TRAINVM_AWS_OP_TIMEOUT", 600.0)
        base = env_seconds("TRAINVM_RETRY_BASE_DELAY", 1.0)
        self.poll_interval = poll_interval if poll_interval is not None else min(5.0, 5 * base)
        self.call_timeout = env_seconds("TRAINVM_API_TIMEOUT", 30.0)
        self.retry_base_delay = base
        self._warn = warn or _stderr_warning
        self._clients: dict[tuple[str, str, int], object] = {}  # boto3's clients: untyped (typed by the accessors below)
        self._zones: dict[str, dict[str, str]] = {}
        self.unreachable: list[str] = []
        self.unreachable_why = ""  # the first unreachable region's failure
        self._session = self._auth()

    # ------------------------------------------------------------------ clients
    def _auth(self) -> Session:
        from botocore.exceptions import ProfileNotFound

        try:
            session = _shared_session()
            credentials = None if self.endpoint else session.get_credentials()
        except ProfileNotFound as exc:  # AWS_PROFILE (or AWS_DEFAULT_PROFILE) names a profile that is not configured
            raise AwsCredentialsError(f"AWS_PROFILE names the config profile {exc.kwargs.get('profile')!r}, which is not "
                                      "in ~/.aws/config or ~/.aws/credentials",
                                      hint="`aws configure list-profiles` shows the profiles there; set AWS_PROFILE to "
                                           "one of them, or unset it") from None
        if not self.endpoint and credentials is None:
            raise AwsCredentialsError("no AWS credentials found",
                                      hint="run `aws configure` (or `aws sso login`), or set AWS_ACCESS_KEY_ID / "
                                           "AWS_SECRET_ACCESS_KEY / AWS_PROFILE")
        return session

    def access_key_id(self) -> str:
        """The access key id of the credentials (the quota cache key's account part; only its hash is written)."""
        if self.endpoint:  # the emulator's fixed dummy credentials
            return "testing"
        try:
            creds = self._session.get_credentials()
            return str(creds.access_key) if creds is not None else "-"
        except Exception:  # noqa: BLE001 - a key that cannot be read only costs cache hits
            return "-"

    def client(self, service: str, region: str, *, attempts: int = 1) -> object:
        """The (cached) client of ``service`` in ``region``, untyped; botocore sends each request ``attempts`` times
        at most (1: ``call`` does the retrying, within the time budget). The provider calls a client through the
        typed accessors below (``ec2``, ``iam``, ``ssm``, ``service_quotas``, ``s3``, ``sts``: the Protocols of
        aws/clients.py and aws/sdk.py), the one place each untyped client is cast."""
        key = (service, region if service != "iam" else "us-east-1", attempts)
        with _LOCK:  # boto3 sessions are not thread-safe while they build clients (each_region runs in threads)
            if key not in self._clients:
                http = max(0.5, self.call_timeout / 2)  # each HTTP request: half the call's budget (as GCE's)
                cfg = errs.botocore_config(max_attempts=attempts, connect_timeout=min(http, 10.0), read_timeout=http)
                if service == "s3":  # SigV4 everywhere, presigned URLs included (SigV2 is refused in newer regions)
                    from botocore.config import Config

                    cfg = cfg.merge(Config(signature_version="s3v4"))
                kw: dict[str, object] = {"region_name": key[1], "config": cfg}
                if self.endpoint:
                    kw.update(endpoint_url=self.endpoint, **TEST_CREDENTIALS)
                    if service == "s3":  # the emulator is one host: path-style <endpoint>/<bucket>/<key>
                        from botocore.config import Config

                        kw["config"] = cfg.merge(Config(s3={"addressing_style": "path"}))
                self._clients[key] = self._session.client(service, **kw)
            return self._clients[key]

    def ec2(self, region: str, *, attempts: int = 1) -> Ec2:
        return cast("Ec2", self.client("ec2", region, attempts=attempts))

    def iam(self) -> Iam:
        return cast("Iam", self.client("iam", "us-east-1"))  # IAM is global: one client

    def ssm(self, region: str) -> Ssm:
        return cast("Ssm", self.client("ssm", region))

    def service_quotas(self, region: str) -> ServiceQuotas:
        return cast("ServiceQuotas", self.client("service-quotas", region))

    def s3(self, region: str) -> S3:
        return cast(S3, self.client("s3", region))

    def sts(self) -> Sts:
        return cast(Sts, self.client("sts", "us-east-1"))

    @overload
    def call(self, fn: Callable[[], T]) -> T: ...
    @overload
    def call(self, fn: Callable[[], T], *, missing: M) -> T | M: ...
    @overload
    def call(self, fn: Callable[[], T], *, exists: M) -> T | M: ...

    def call(self, fn: Callable[[], T], *, missing: object = ..., exists: object = ...) -> object:
        """``fn()``, retried while transient within the time budget (see the module doc); an AWS failure becomes
        a classified ``ProviderError`` (``missing``/``exists``: the value returned for a not-found /
        already-exists answer instead)."""
        sent = 0

        def target() -> object:
            nonlocal sent
            sent += 1
            try:
                return fn()
            except ProviderError:
                raise
            except Exception as exc:  # noqa: BLE001 - botocore's exceptions are classified by code
                code = errs.error_code(exc) or ""
                if missing is not ... and errs.is_not_found(exc):
                    return missing
                if exists is not ... and (code.endswith(".Duplicate") or code == "EntityAlreadyExists"):
                    return exists
                if errs.is_transient(exc):
                    raise _Transient(exc) from exc
                if type(exc).__module__.startswith(("botocore", "boto3", "urllib3")) or code:
                    raise errs.classify(exc) from exc
                raise

        try:
            return poll(target, deadline=time.monotonic() + self.call_timeout, timed_out=_OutOfTime,
                        transient=lambda e: isinstance(e, _Transient), tries=self.tries, backoff=self.retry_base_delay)
        except _Transient as last:
            raise errs.classify(last.cause, attempts=sent) from last.cause
        except _OutOfTime as out:  # the budget ran out between tries
            assert isinstance(out.last, _Transient)
            err = errs.classify(out.last.cause, attempts=sent)
            err.args = (f"{err} (gave up after {self.call_timeout:g} s: TRAINVM_API_TIMEOUT)",)
            raise err from out.last.cause

    # ------------------------------------------------------------------ regions and zones
    def regions(self) -> list[str]:
        """The regions ``list``/``find`` look at: ``regions`` / ``TRAINVM_AWS_REGIONS`` as given, else the account's
        enabled regions, among ``candidate_regions`` when the maker passed them (see the module docstring)."""
        if self._regions is None:
            got = self.call(lambda: self.ec2("us-east-1").describe_regions(AllRegions=False))["Regions"]
            enabled = {str(r["RegionName"]) for r in got}
            self._regions = sorted(enabled if self._candidates is None else enabled & set(self._candidates()))
        return list(self._regions)

    def each_region(self, fn: Callable[[str], list[T]]) -> list[T]:
        """``fn(region)`` for every region, concurrently; a region that fails is skipped with a warning."""
        regions, self.unreachable, self.unreachable_why = self.regions(), [], ""
        out: list[T] = []
        with ThreadPoolExecutor(max_workers=max(1, min(LIST_THREADS, len(regions)))) as pool:
            futures = {r: pool.submit(fn, r) for r in regions}
            for region, fut in futures.items():
                try:
                    out.extend(fut.result())
                except ProviderError as exc:
                    if exc.outcome == "auth" and exc.code != "OptInRequired":
                        raise
                    self.unreachable.append(region)
                    self.unreachable_why = self.unreachable_why or (f"{exc.code}: {exc}" if exc.code else str(exc))
                    self._warn(f"AWS could not list {region} ({exc}); instances there are not shown")
        return out

    def zone_name(self, region: str, zone_id: str) -> str:
        """This account's AZ name for the catalog's AZ ID (names are shuffled per account; IDs are not)."""
        if region not in self._zones:
            got = self.call(lambda: self.ec2(region).describe_availability_zones(AllAvailabilityZones=False))
            self._zones[region] = {z["ZoneId"]: z["ZoneName"] for z in got["AvailabilityZones"]
                                   if z.get("State", "available") == "available"}
        name = self._zones[region].get(zone_id)
        if name is None:
            raise CapacityError(f"AZ {zone_id} is not available to this account in {region}", code="ZoneNotAvailable")
        return name

    # ------------------------------------------------------------------ waiting
    def wait(self, region: str, waiter: WaiterName, instance_id: str | list[str]) -> None:
        """A botocore waiter, bounded by ``op_timeout`` (attempts = timeout / poll interval), on a client that
        retries each poll (``tries``): a throttled poll does not end the wait."""
        attempts = max(2, math.ceil(self.op_timeout / max(self.poll_interval, 1.0)))
        w = self.ec2(region, attempts=self.tries).get_waiter(waiter)
        ids = [instance_id] if isinstance(instance_id, str) else instance_id
        self.call(lambda: w.wait(InstanceIds=ids, WaiterConfig={"Delay": self.poll_interval, "MaxAttempts": attempts}))


class _Transient(Exception):
    """A retryable AWS failure inside ``call`` (never leaves it)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _OutOfTime(Exception):
    def __init__(self, last: BaseException) -> None:
        super().__init__(str(last))
        self.last = last


_LOCK = threading.RLock()
_SESSION: list[Session] = []


def _shared_session() -> Session:
    """One boto3 session per process: its loader parses each service model (EC2's is large) once."""
    with _LOCK:
        if not _SESSION:
            import boto3
            import botocore.session

            core = botocore.session.get_session()
            if not probe_metadata("aws"):  # off EC2, the instance-metadata provider only costs time (host.py)
                core.get_component("credential_provider").remove("iam-role")
            _SESSION.append(boto3.session.Session(botocore_session=core))
        return _SESSION[0]
