"""``GceApi``: the compute_v1 clients of one project and every SDK call through them, shared by ``gcp.py``,
``gcp_firewall.py``, ``gcp_report.py`` and ``gcp_power.py``. It holds settings and clients, never the state of
one call or one create attempt, so one instance serves creates running in parallel threads.

- ``call``: one SDK call, retried through ``poll.poll`` while ``gcp_errors.is_retryable`` (429, 5xx that are
  not stock-outs, connection errors), up to ``tries`` times with exponential backoff and equal jitter (base
  ``TRAINVM_RETRY_BASE_DELAY``), all within ``call_timeout`` seconds (``TRAINVM_API_TIMEOUT``, default 30;
  each HTTP request gets at most half of it), so an endpoint that never answers fails in about that time.
  404/409 map to the caller's ``missing``/``exists`` value, except a 404 on the project itself
  (``errs.missing_project``), which is an AuthError naming the project: a wrong project is never "not found".
- ``wait``: ``zoneOperations.wait`` / ``globalOperations.wait`` (a server long-poll of at most ~2 min) until
  DONE or the deadline (``TRAINVM_GCE_OP_TIMEOUT``). A finished operation's ``error.errors`` is the caller's to
  inspect: ``ExtendedOperation.result()`` is never used (cloud-sdks.md G1, G2).
- ``aggregated`` / ``find_any``: ``aggregatedList``. compute v1 (discovery revision 20261106) and
  google-cloud-compute 1.57 have no ``returnPartialSuccess`` on it (``unreachables`` exists only in the answer),
  so one unreachable zone fails the whole call (503). Then the listing goes zone by zone (``zones.list``, then
  ``instances.list`` per zone with the same filter): a zone that still fails is skipped and named in
  ``unreachable`` (and warned about), never kept on the object. ``returnPartialSuccess`` is still sent
  where an SDK has the field.
- ``clock`` and ``sleep`` are injectable: tests move time forward deterministically.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from functools import partial
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple, NotRequired, TypedDict, TypeVar

from provisioner.output import escape, notice
from provisioner.providers.base import AuthError, RetryExhaustedError
from provisioner.providers.gcp import errors as errs
from provisioner.providers.poll import poll

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

    from provisioner.providers.gcp.sdk_types import Instance, Operation

WAIT_HTTP_TIMEOUT = 150.0  # zoneOperations.wait answers within ~2 min
HTTP_TIMEOUT = 60.0
T = TypeVar("T")
U = TypeVar("U")


class Unset:
    """The default of ``call``'s ``missing`` / ``exists``: no value given (None is a value)."""


MISSING = Unset()


class ClientKwargs(TypedDict):
    """What every compute_v1 client of the project is built with."""

    credentials: Credentials
    client_options: NotRequired[dict[str, str]]


class _Transient(Exception):
    """A retryable failure inside ``call``/``wait`` (never leaves them)."""

    def __init__(self, failure: errs.Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class _OutOfTime(Exception):
    def __init__(self, last: BaseException) -> None:
        super().__init__(str(last))
        self.last = last


class Listing(NamedTuple):
    instances: list[Instance]
    unreachable: list[str]  # zones GCE could not read (their instances are missing from ``instances``)


def stderr_warning(text: str) -> None:
    notice("warning", escape(text))


def _zone_instances(api: SimpleNamespace, zone: str, flt: str, timeout: float) -> list[Instance]:
    req = api.v1.ListInstancesRequest(project=api.project, zone=zone, filter=flt, max_results=500)
    return list(api.instances.list(request=req, retry=None, timeout=timeout))


def partial_success_field(v1: ModuleType) -> bool:
    """Whether this google-cloud-compute has ``return_partial_success`` on the aggregated instance list."""
    return "return_partial_success" in v1.AggregatedListInstancesRequest.meta.fields


class GceApi:
    def __init__(self, *, project: str, credentials: Credentials, endpoint: str = "", op_timeout: float = 600.0,
                 retry_base_delay: float = 1.0, poll_interval: float = 2.0, tries: int = 4, call_timeout: float = 30.0,
                 warn: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None) -> None:
        self.project, self.endpoint, self._credentials = project, endpoint, credentials
        self.op_timeout, self.retry_base_delay, self.poll_interval = op_timeout, retry_base_delay, poll_interval
        self.tries, self.call_timeout = max(1, tries), call_timeout
        self.http_timeout = max(0.5, min(HTTP_TIMEOUT, call_timeout / 2))
        self.warn, self.sleep, self.clock, self.rng = warn or stderr_warning, sleep, clock, rng or random.Random()
        self._clients: SimpleNamespace | None = None
        self._lock = threading.Lock()

    def clients(self) -> SimpleNamespace:
        """compute_v1 (``v1``), the project and the clients, built once on first use (compute_v1 takes ~1 s to
        import: ``get_provider("gcp")`` stays cheap until a cloud call is made)."""
        with self._lock:
            if self._clients is None:
                from google.cloud import compute_v1

                kw = self.client_kwargs()
                self._clients = SimpleNamespace(
                    v1=compute_v1, project=self.project, instances=compute_v1.InstancesClient(**kw),
                    zone_ops=compute_v1.ZoneOperationsClient(**kw), images=compute_v1.ImagesClient(**kw),
                    firewalls=compute_v1.FirewallsClient(**kw), global_ops=compute_v1.GlobalOperationsClient(**kw),
                    zones=compute_v1.ZonesClient(**kw), policies=compute_v1.ResourcePoliciesClient(**kw),
                    region_ops=compute_v1.RegionOperationsClient(**kw), projects=compute_v1.ProjectsClient(**kw))
            return self._clients

    def client_kwargs(self) -> ClientKwargs:
        """The credentials, and the endpoint (``TRAINVM_GCE_ENDPOINT``) as ``client_options`` where one is set."""
        kw: ClientKwargs = {"credentials": self._credentials}
        if self.endpoint:
            endpoint = self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}"
            kw["client_options"] = {"api_endpoint": endpoint}
        return kw

    def deadline(self) -> float:
        """The deadline of an operation started now (``op_timeout`` from now, on ``clock``)."""
        return self.clock() + self.op_timeout

    # ------------------------------------------------------------------ calls
    def call(self, fn: Callable[[], T], *, missing: U | Unset = MISSING, exists: U | Unset = MISSING) -> T | U:
        """Run one SDK call with bounded retries (count and ``call_timeout``); 404 -> ``missing`` and 409 ->
        ``exists`` when given (a 404 on the project itself is never "missing")."""
        sent = 0

        def target() -> T | U:
            nonlocal sent
            sent += 1
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
                if f.status == 404 and not isinstance(missing, Unset):
                    return missing
                if f.status == 409 and not isinstance(exists, Unset):
                    return exists
                if errs.is_retryable(f):
                    raise _Transient(f) from exc
                raise errs.classify(f) from exc

        try:
            return poll(target, deadline=self.clock() + self.call_timeout, timed_out=_OutOfTime,
                        transient=lambda e: isinstance(e, _Transient), tries=self.tries, backoff=self.retry_base_delay,
                        clock=self.clock, sleep=self.sleep, rng=self.rng)
        except _Transient as last:
            raise errs.classify(last.failure, retried=sent) from last.__cause__
        except _OutOfTime as out:  # the call's time budget ran out between tries
            assert isinstance(out.last, _Transient)
            err = errs.classify(out.last.failure, retried=sent)
            err.args = (f"{err} (gave up after {self.call_timeout:g} s: TRAINVM_API_TIMEOUT)",)
            raise err from out.last.__cause__

    def wait(self, zone: str | None, op: Operation, deadline: float) -> Operation:
        """Wait until ``op`` (zonal, or global when ``zone`` is None) is DONE, within ``deadline``; the caller
        inspects ``op.error.errors``."""
        api = self.clients()
        done = api.v1.Operation.Status.DONE
        if op.status == done:
            return op
        scope = {"zone": zone} if zone else {}
        waiter = api.zone_ops.wait if zone else api.global_ops.wait
        name, fast, failures = op.name, [False], [0]

        def fetch() -> Operation:
            started = self.clock()
            try:
                got: Operation = waiter(project=api.project, operation=name, retry=None,
                                        timeout=max(1.0, min(WAIT_HTTP_TIMEOUT, deadline - started + 5)), **scope)
            except Exception as exc:  # noqa: BLE001 - classified here
                f = errs.from_exception(exc)
                failures[0] += 1
                if errs.is_retryable(f):
                    raise _Transient(f) from exc
                raise errs.classify(f, retried=failures[0]) from exc
            fast[0] = self.clock() - started < 1.0  # the server did not long-poll: pause between polls
            return got

        def timed_out(last: object) -> RetryExhaustedError:
            return RetryExhaustedError(f"operation {op.name} in {zone or 'global'} did not finish within "
                                       f"{self.op_timeout:g} s (TRAINVM_GCE_OP_TIMEOUT)", code="OPERATION_TIMEOUT")

        try:
            return poll(fetch, ready=lambda o: o.status == done, deadline=deadline, timed_out=timed_out,
                        interval=lambda: self.poll_interval if fast[0] else 0.0,
                        transient=lambda e: isinstance(e, _Transient), tries=self.tries, backoff=self.retry_base_delay,
                        clock=self.clock, sleep=self.sleep, rng=self.rng)
        except _Transient as last:
            raise errs.classify(last.failure, retried=failures[0]) from last.__cause__

    def default_service_account(self) -> str | None:
        """The email of the project's default compute service account (``projects.get``
        ``defaultServiceAccount``: ``PROJECT_NUMBER-compute@developer.gserviceaccount.com``), the identity a VM
        created with ``serviceAccounts: [{"email": "default"}]`` runs as; None when the project has none."""
        api = self.clients()
        project = self.call(lambda: api.projects.get(project=api.project, retry=None, timeout=self.http_timeout))
        return project.default_service_account or None

    # ------------------------------------------------------------------ instances
    def get(self, zone: str, name: str) -> Instance | None:
        """The instance, or None when GCE answers that there is none of that name in ``zone``."""
        api = self.clients()
        return self.call(lambda: api.instances.get(project=api.project, zone=zone, instance=name, retry=None,
                                                   timeout=self.http_timeout), missing=None)

    def aggregated(self, flt: str) -> Listing:
        """Instances matching ``flt`` in every zone; a zone GCE reports unreachable is skipped with a warning."""
        api = self.clients()
        kw = {"return_partial_success": True} if partial_success_field(api.v1) else {}
        req = api.v1.AggregatedListInstancesRequest(project=api.project, filter=flt, max_results=500, **kw)

        def fetch() -> Listing:
            pager = api.instances.aggregated_list(request=req, retry=None, timeout=self.http_timeout)
            found: list[Instance] = []
            unreachable: list[str] = []
            for page in pager.pages:
                unreachable += [z.rsplit("/", 1)[-1] for z in page.unreachables]
                found += [i for scoped in page.items.values() for i in scoped.instances]
            return Listing(found, unreachable)

        try:
            listing: Listing = self.call(fetch)
        except RetryExhaustedError as whole:  # a 5xx after retries: one zone down fails the whole call
            if not (whole.code or "").isdigit() or int(whole.code or 0) < 500:
                raise  # a network error: the endpoint itself does not answer, zone by zone would not either
            listing = self._zone_by_zone(flt, whole)
        if listing.unreachable:
            self.warn(f"GCE could not list {', '.join(listing.unreachable)} in project {self.project}; instances "
                      "there are not shown")
        return listing

    def _zone_by_zone(self, flt: str, whole: RetryExhaustedError) -> Listing:
        """The listing one zone at a time; ``whole`` (the aggregated call's failure) when no zone answers."""
        api = self.clients()
        try:
            zones = self.call(lambda: [z.name for z in api.zones.list(project=api.project, retry=None,
                                                                       timeout=self.http_timeout)])
        except RetryExhaustedError:
            raise whole from None
        found: list[Instance] = []
        unreachable: list[str] = []
        for zone in zones:
            try:
                found += self.call(partial(_zone_instances, api, zone, flt, self.http_timeout))
            except RetryExhaustedError:
                unreachable.append(zone)
        if zones and len(unreachable) == len(zones):
            raise whole
        return Listing(found, unreachable)

    def find_any(self, name: str) -> tuple[Instance | None, list[str]]:
        """(the instance called ``name`` in any zone, a trainvm-managed one first, or None; the unreachable zones)."""
        listing = self.aggregated(f'name = "{name}"')
        found = sorted(listing.instances, key=lambda i: dict(i.labels).get("trainvm-managed") != "true")
        return (found[0] if found else None), listing.unreachable

    def delete_instance(self, zone: str, name: str, *, wait: bool) -> bool:
        """instances.delete (awaited when ``wait``); False when there was no such instance."""
        api = self.clients()
        op = self.call(lambda: api.instances.delete_unary(project=api.project, zone=zone, instance=name, retry=None,
                                                          timeout=self.http_timeout), missing=None)
        if op is None:
            return False
        if wait:
            failure = errs.from_operation(self.wait(zone, op, self.deadline()))
            if failure and failure.status != 404:
                raise errs.classify(failure)
        return True
