"""The GCE payload store (providers/store.py): one private GCS bucket per project and region, through
google-cloud-storage (imported on first use: ``trainvm --help`` and ``plan`` never import it).

- Bucket name (``bucket_name``): ``trainvm-<project>-<region>`` when that is a valid bucket name, else
  ``trainvm-<first 16 hex of sha256(project)>-<region>``. GCS bucket names are 3-63 characters of
  ``[a-z0-9-_.]``, start and end with a letter or digit, never begin with ``goog`` and never contain
  ``google`` or a close misspelling such as ``g00gle`` (cloud.google.com/storage/docs/buckets#naming). Project
  ids are 6-30 characters of ``[a-z0-9-]``, but a legacy domain-scoped id (``example.com:proj``) has ``:`` and
  ``.``, a long project id with a long region passes 63, and an id may contain ``google``: those take the hashed
  form. Bucket names are global: the name is deterministic, so one project and region always find the same one.
- The bucket: ``location`` = the region (set at creation; GCS cannot move a bucket, so an existing bucket's
  location is not checked), uniform bucket-level access, public access prevention ``enforced``, label
  ``trainvm-managed=true`` and a lifecycle rule deleting objects under ``payloads/`` ``EXPIRE_DAYS`` after their
  creation (GCS's ``age`` condition counts from the object's creation time, which a re-upload resets). An
  existing bucket with the label is converged (a missing rule, label or setting is patched in); one without it is
  not trainvm's: ConflictError.
- Read access: the VM runs as the project's default compute service account (the create request sends
  ``serviceAccounts: [{"email": "default"}]``; its email is ``projects.get`` ``defaultServiceAccount``, looked up
  by the provider). That account gets ``roles/storage.objectViewer`` (``storage.objects.get``) on the bucket
  through the bucket's IAM policy, added only when missing (read-modify-write with the policy's etag; a concurrent
  change is re-read). The default account's project Editor grant is not relied on: orgs may disable it
  (``iam.automaticIamGrantsForDefaultServiceAccounts``), and the bucket-level grant is the documented route
  (cloud.google.com/storage/docs/downloading-objects). The VM also needs the ``devstorage.read_only`` scope
  (gcp_request.scopes_for). Setting a bucket's IAM policy needs ``storage.buckets.setIamPolicy`` (Storage Admin
  on the bucket or project) from the user running trainvm.
- Objects: ``payload_key(sha256)``, uploaded in one request (a multipart upload; above 8 MiB the SDK's resumable
  upload, which commits the object only when complete), checksummed by the SDK. An object already there is
  reused when it has the payload's size and MD5 and is younger than ``REFRESH_DAYS``. An upload that failed
  after its retries is checked: the object there (an answer lost after GCS stored it) is used; none there, the
  error says nothing was left; the check failing too, the error names the object as possibly left behind.
- The URL the VM GETs is the JSON API media URL ``{endpoint}/storage/v1/b/{bucket}/o/{quoted key}?alt=media``
  (endpoint ``https://storage.googleapis.com``; ``TRAINVM_GCS_ENDPOINT`` for an emulator, reached with anonymous
  credentials: no token leaves for a non-Google endpoint). The VM's side is templates/bootstrap/fetch-gcp.sh.
- Calls: each SDK call gets ``retry=`` a ``google.api_core.retry.Retry`` (429, 5xx and connection errors, as
  ``gcp_errors.is_retryable``, also the upload's answers, which the SDK's media layer raises as its own
  ``InvalidResponse``; exponential backoff from ``TRAINVM_RETRY_BASE_DELAY``, within
  ``TRAINVM_API_TIMEOUT`` seconds) and each HTTP request at most half that: the SDK's own retry, configured
  (providers/poll.py states the rule). trainvm's own loop, the IAM read-modify-write redone on an etag
  conflict, runs through ``poll`` (tenacity) within the same ``TRAINVM_API_TIMEOUT``. Failures become the ``ProviderError``
  family through ``gcp_errors`` (401/403: AuthError; retries exhausted: RetryExhaustedError).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple, TypeVar
from urllib.parse import quote

from provisioner.providers.base import AuthError, ConflictError, InvalidRequestError, ProviderError
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.api import MISSING, Unset
from provisioner.providers.gcp.storage_types import LifecycleRule
from provisioner.providers.poll import poll
from provisioner.providers.store import EXPIRE_DAYS, PAYLOAD_PREFIX, REFRESH_DAYS, PayloadRef, payload_key

if TYPE_CHECKING:
    from google.api_core.retry import Retry
    from google.auth.credentials import Credentials

    from provisioner.providers.gcp.storage_types import Blob, Bucket, Client

DEFAULT_ENDPOINT = "https://storage.googleapis.com"
#: creating buckets and setting their IAM policy needs full_control (devstorage.read_write does not cover IAM)
STORAGE_SCOPE = "https://www.googleapis.com/auth/devstorage.full_control"
READER_ROLE = "roles/storage.objectViewer"
MANAGED = ("trainvm-managed", "true")
BUCKET_MAX = 63
BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
FORBIDDEN_IN_BUCKET = re.compile(r"^goog|g[o0][o0]g[l1]e")
REGION_RE = re.compile(r"[a-z]+-[a-z]+[0-9]+")
SHA256_RE = re.compile(r"[0-9a-f]{64}")
KEY_RE = re.compile(re.escape(PAYLOAD_PREFIX) + r"([0-9a-f]{64})\.tar\.gz")
T = TypeVar("T")
U = TypeVar("U")


def bucket_name(project: str, region: str) -> str:
    """The payload bucket of ``project`` in ``region`` (the rule in the module docstring)."""
    name = f"trainvm-{project}-{region}"
    if len(name) <= BUCKET_MAX and BUCKET_RE.fullmatch(name) and not FORBIDDEN_IN_BUCKET.search(name):
        return name
    return f"trainvm-{hashlib.sha256(project.encode()).hexdigest()[:16]}-{region}"


def lifecycle_rule() -> LifecycleRule:
    """The bucket's one trainvm rule, as the JSON API stores it."""
    return {"action": {"type": "Delete"}, "condition": {"age": EXPIRE_DAYS, "matchesPrefix": [PAYLOAD_PREFIX]}}


def media_url(endpoint: str, bucket: str, key: str) -> str:
    """The JSON API download URL of ``bucket``/``key`` (the key's ``/`` quoted: it is one path segment)."""
    return f"{endpoint.rstrip('/')}/storage/v1/b/{bucket}/o/{quote(key, safe='')}?alt=media"


class _Ready(NamedTuple):
    bucket: str
    reader: str  # the service account email granted READER_ROLE


def _utcnow() -> datetime:
    return datetime.now(UTC)


class GcsPayloadStore:
    """``PayloadStore`` on GCS for one project. ``service_account`` returns the email of the identity trainvm's
    VMs run as (called once, on the first ``stage``); ``now`` is injectable for the ``REFRESH_DAYS`` rule."""

    CLOUD = "gcp"

    def __init__(self, *, project: str, credentials: Credentials | None, service_account: Callable[[], str | None],
                 endpoint: str = "", call_timeout: float = 30.0, retry_base_delay: float = 1.0,
                 now: Callable[[], datetime] = _utcnow) -> None:
        self.project, self._credentials, self._lookup_reader = project, credentials, service_account
        self.endpoint = endpoint.rstrip("/")
        self.call_timeout, self.now = call_timeout, now
        self.http_timeout = max(0.5, min(60.0, call_timeout / 2))
        self.retry_initial = max(0.05, retry_base_delay)
        self._client: Client | None = None
        self._reader: str | None = None
        self._ready: dict[str, _Ready] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ SDK plumbing
    def client(self) -> Client:
        """The storage client (built once; the SDK is imported here)."""
        with self._lock:
            if self._client is None:
                # google-cloud-storage 3.x (3.17.1 here) starts a background thread that GETs a bucket's metadata for
                # OpenTelemetry span attributes on any call naming a bucket it has not cached, OpenTelemetry
                # installed or not: requests trainvm did not make, still running after the call. Its own switch:
                os.environ.setdefault("DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA", "true")
                import google.cloud.storage as storage

                if self.endpoint:
                    from google.auth.credentials import AnonymousCredentials

                    self._client = storage.Client(project=self.project, credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                                                  client_options={"api_endpoint": self.endpoint})
                else:
                    from google.auth.credentials import with_scopes_if_required

                    creds = (with_scopes_if_required(self._credentials, [STORAGE_SCOPE])  # type: ignore[no-untyped-call]
                             if self._credentials else None)
                    try:  # without credentials the SDK looks for them (google.auth.default) here
                        self._client = storage.Client(project=self.project, credentials=creds)
                    except Exception as exc:  # noqa: BLE001 - google.auth's failures, classified
                        f = errs.from_exception(exc)
                        if f.kind != "auth":
                            raise
                        raise errs.classify(f) from None
            return self._client

    def retry(self, predicate: Callable[[BaseException], bool] | None = None) -> Retry:
        """A ``google.api_core.retry.Retry`` bounded by ``call_timeout`` (default: what gcp_errors retries)."""
        from google.api_core.retry import Retry

        return Retry(predicate=predicate or _retryable, initial=self.retry_initial, maximum=max(1.0, 8 * self.retry_initial),
                     multiplier=2.0, timeout=self.call_timeout)

    def _call(self, what: str, fn: Callable[[], T], *, missing: U | Unset = MISSING, exists: U | Unset = MISSING) -> T | U:
        """Run ``fn`` (one SDK call carrying ``retry=``/``timeout=``); 404 -> ``missing`` and 409 -> ``exists``
        when given; any other failure -> a ProviderError saying ``what`` failed."""
        try:
            return fn()
        except ProviderError:
            raise  # classified already (the client's credentials)
        except Exception as exc:  # noqa: BLE001 - classified below
            from google.api_core.exceptions import RetryError

            gave_up = isinstance(exc, (RetryError, _GaveUp))
            cause = (getattr(exc, "cause", None) or exc) if gave_up else exc
            if type(cause).__module__ == "builtins" and not isinstance(cause, (ConnectionError, TimeoutError)):
                raise  # not a cloud answer: a bug, shown as such
            f = errs.from_exception(cause)
            if f.status == 404 and not isinstance(missing, Unset):
                return missing
            if f.status == 409 and not isinstance(exists, Unset):
                return exists
            err = errs.classify(f) if f.kind != "other" else ProviderError(f.message, code=f.code)
            tail = f" (gave up after {self.call_timeout:g} s: TRAINVM_API_TIMEOUT)" if gave_up else ""
            err.args = (f"GCS: {what}: {err}{tail}",)
            if isinstance(err, AuthError) and err.hint is None:
                err.hint = (f"the account running trainvm needs roles/storage.admin on project {self.project} (it "
                            "creates the payload bucket and grants the VMs' service account read access)")
            raise err from None

    # ------------------------------------------------------------------ the contract
    def stage(self, region: str, data: bytes, sha256: str) -> PayloadRef:
        _check(region, sha256)
        if hashlib.sha256(data).hexdigest() != sha256:
            raise InvalidRequestError(f"the payload does not have the sha256 it is staged under ({sha256[:16]}...)",
                                      code="PAYLOAD_SHA256")
        ready = self._bucket(region)
        key, where = payload_key(sha256), f"gs://{ready.bucket}/{payload_key(sha256)}"
        bucket = self.client().bucket(ready.bucket)
        found = self._call(f"reading {where}", lambda: bucket.get_blob(key, retry=self.retry(), timeout=self.http_timeout),
                           missing=None)
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        fresh = self._holds(found, data, md5)
        if not fresh:
            blob = bucket.blob(key)
            try:
                self._call(f"uploading {where}", lambda: blob.upload_from_string(
                    data, content_type="application/gzip", retry=self.retry(), timeout=self.http_timeout))
            except ProviderError as exc:
                self._after_failed_upload(bucket, key, where, data, md5, exc)
        return PayloadRef(cloud=self.CLOUD, region=region, store=ready.bucket, key=key,
                          url=media_url(self.endpoint or DEFAULT_ENDPOINT, ready.bucket, key), sha256=sha256,
                          size=len(data), access=f"{READER_ROLE} on gs://{ready.bucket} for serviceAccount:{ready.reader}",
                          uploaded=not fresh, refreshed=found is not None and not fresh)

    def _holds(self, found: Blob | None, data: bytes, md5: str) -> bool:
        """``found`` (a blob, or None) is the payload, stored less than ``REFRESH_DAYS`` ago."""
        return (found is not None and found.size == len(data) and found.md5_hash in (None, md5)
                and found.time_created is not None and self.now() - found.time_created < timedelta(days=REFRESH_DAYS))

    def _after_failed_upload(self, bucket: Bucket, key: str, where: str, data: bytes, md5: str, exc: ProviderError) -> None:
        """The upload failed after its retries; one of them may still have stored the object (an answer lost on the
        way back). GCS commits an object only whole and checked, so the payload found there (its size and MD5) is
        the upload done: returns, and the stage uses it. Nothing there: nothing was left (``exc`` verified) and
        ``exc`` is raised. The read fails as well: ``exc`` names the object as possibly left behind."""
        try:
            found = self._call(f"reading {where}", lambda: bucket.get_blob(key, retry=self.retry(),
                                                                             timeout=self.http_timeout), missing=None)
        except ProviderError as check:
            exc.leaves(where)
            exc.args = (f"{exc}; whether {where} was stored could not be checked ({check})",)
            raise exc from None
        if self._holds(found, data, md5):
            return
        raise exc.verified()

    def release(self, region: str, sha256: str) -> bool:
        _check(region, sha256)
        name, key = bucket_name(self.project, region), payload_key(sha256)
        where = f"gs://{name}/{key}"
        blob = self._call(f"reading {where}", lambda: self.client().bucket(name).get_blob(
            key, retry=self.retry(), timeout=self.http_timeout), missing=None)
        if blob is None:
            return False
        # the generation just read: an object re-uploaded meanwhile (a concurrent ``stage``) is a new generation
        # and stays; GCS then answers 404 for the old one
        def delete() -> bool:
            blob.delete(retry=self.retry(), timeout=self.http_timeout)
            return True

        return bool(self._call(f"deleting {where}", delete, missing=False))

    def stored(self, region: str) -> list[str]:
        _check(region)
        name = bucket_name(self.project, region)
        blobs = self._call(f"listing gs://{name}/{PAYLOAD_PREFIX}", lambda: list(self.client().list_blobs(
            name, prefix=PAYLOAD_PREFIX, retry=self.retry(), timeout=self.http_timeout)), missing=[])
        return sorted(m.group(1) for b in blobs if (m := KEY_RE.fullmatch(b.name)))

    # ------------------------------------------------------------------ the bucket
    def _bucket(self, region: str) -> _Ready:
        """Create or converge the region's bucket and its read grant (once per store and region)."""
        with self._lock:
            if region in self._ready:
                return self._ready[region]
        name, client = bucket_name(self.project, region), self.client()
        try:
            bucket = self._call(f"reading bucket gs://{name}", lambda: client.lookup_bucket(
                name, retry=self.retry(), timeout=self.http_timeout))
        except AuthError as exc:  # bucket names are global: another project may own this one
            exc.hint = (f"gs://{name} may belong to another project (bucket names are global), or the account "
                        f"running trainvm lacks roles/storage.admin on project {self.project}")
            raise
        if bucket is None:
            bucket = self._create(name, region)
        elif dict(bucket.labels).get(MANAGED[0]) != MANAGED[1]:
            raise ConflictError(f"the GCS bucket gs://{name} exists and is not trainvm's (no {MANAGED[0]}={MANAGED[1]} "
                                "label); trainvm keeps its payloads in that bucket, so it cannot stage one",
                                code="BUCKET_NOT_MANAGED",
                                hint=f"add the label (gcloud storage buckets update gs://{name} "
                                     f"--update-labels={MANAGED[0]}={MANAGED[1]}) if it is meant for trainvm")
        self._converge(bucket)
        ready = _Ready(name, self._grant(bucket))
        with self._lock:
            self._ready[region] = ready
        return ready

    def _create(self, name: str, region: str) -> Bucket:
        client = self.client()
        new = client.bucket(name)
        new.labels = dict([MANAGED])
        new.lifecycle_rules = [lifecycle_rule()]
        new.iam_configuration.uniform_bucket_level_access_enabled = True
        new.iam_configuration.public_access_prevention = "enforced"
        made = self._call(f"creating bucket gs://{name} in {region}", lambda: client.create_bucket(
            new, project=self.project, location=region, retry=self.retry(), timeout=self.http_timeout), exists=None)
        if made is None:  # 409: made meanwhile by a concurrent trainvm (or the name is taken: the lookup says which)
            made = self._call(f"reading bucket gs://{name}", lambda: client.get_bucket(
                name, retry=self.retry(), timeout=self.http_timeout))
        return made

    def _converge(self, bucket: Bucket) -> None:
        """Patch in whatever of trainvm's settings the bucket lacks (none on a bucket trainvm just created)."""
        changed = False
        if dict(bucket.labels).get(MANAGED[0]) != MANAGED[1]:
            bucket.labels = {**dict(bucket.labels), MANAGED[0]: MANAGED[1]}
            changed = True
        rules = [LifecycleRule(**r) for r in bucket.lifecycle_rules]  # plain dicts (the SDK's are dict subclasses)
        if lifecycle_rule() not in rules:
            def ours(r: LifecycleRule) -> bool:
                return (r.get("action", {}).get("type") == "Delete"
                        and r.get("condition", {}).get("matchesPrefix") == [PAYLOAD_PREFIX])

            bucket.lifecycle_rules = [r for r in rules if not ours(r)] + [lifecycle_rule()]
            changed = True
        iam = bucket.iam_configuration
        if not iam.uniform_bucket_level_access_enabled:
            iam.uniform_bucket_level_access_enabled = True
            changed = True
        if iam.public_access_prevention != "enforced":
            iam.public_access_prevention = "enforced"
            changed = True
        if changed:
            self._call(f"updating the settings of bucket gs://{bucket.name}", lambda: bucket.patch(
                retry=self.retry(), timeout=self.http_timeout))

    def _grant(self, bucket: Bucket) -> str:
        """Give the VMs' service account READER_ROLE on ``bucket`` unless its policy already does; its email."""
        reader = self._reader_email()
        member = f"serviceAccount:{reader}"

        def grant() -> None:
            policy = bucket.get_iam_policy(requested_policy_version=3, retry=self.retry(), timeout=self.http_timeout)
            if any(b.get("role") == READER_ROLE and not b.get("condition") and member in b.get("members", ())
                   for b in policy.bindings):
                return
            policy.bindings.append({"role": READER_ROLE, "members": {member}})
            bucket.set_iam_policy(policy, retry=self.retry(), timeout=self.http_timeout)

        # the policy carries its etag: a concurrent change answers 412 (or 409), and the whole read-modify-write
        # is done again on the new policy
        def redone_on_conflict() -> None:
            poll(grant, deadline=time.monotonic() + self.call_timeout, timed_out=_GaveUp, transient=_etag_conflict,
                 tries=None, backoff=self.retry_initial)

        self._call(f"granting {READER_ROLE} on gs://{bucket.name} to {member}", redone_on_conflict)
        return reader

    def _reader_email(self) -> str:
        if self._reader is None:
            email = self._lookup_reader()
            if not email:
                raise InvalidRequestError(
                    f"GCE project {self.project} has no default compute service account, which trainvm's VMs run "
                    "as and read their payload with", code="NO_DEFAULT_SERVICE_ACCOUNT",
                    hint="restore it (gcloud beta iam service-accounts undelete) or recreate the project's Compute "
                         "Engine default service account")
            self._reader = email
        return self._reader


def _check(region: str, sha256: str | None = None) -> None:
    if not REGION_RE.fullmatch(region or ""):
        raise InvalidRequestError(f"{region!r} is not a GCE region (e.g. us-central1)", code="REGION")
    if sha256 is not None and not SHA256_RE.fullmatch(sha256 or ""):
        raise InvalidRequestError(f"{sha256!r} is not a sha256 (64 lower-case hex digits)", code="PAYLOAD_SHA256")


def _retryable(exc: BaseException) -> bool:
    return errs.is_retryable(errs.from_exception(exc))


class _GaveUp(Exception):
    """trainvm's own retry (``poll``) ran out of time; ``cause`` is the last failure (as api_core's RetryError)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _etag_conflict(exc: BaseException) -> bool:
    return getattr(exc, "code", None) in (409, 412) and type(exc).__module__.startswith("google.api_core")
