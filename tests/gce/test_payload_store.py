"""GcsPayloadStore (providers/gcp/store.py) through the real google-cloud-storage SDK against gcp-storage-emulator
on loopback (tests/emulators/gcs.py).

The emulator does NOT model: authentication (no token is checked), IAM enforcement (a policy is stored as sent and
never applied: that the VM's account can read the object is not shown here), scopes, org policies, a bucket
insert's metadata (dropped: the store's convergence PATCH is what puts labels, lifecycle and access settings on
the emulator's bucket; the insert body itself is asserted from the wire), bucket location (always ``US``),
lifecycle execution and IAM etag preconditions. Refusals the emulator cannot make (403, 503) come from a small
loopback server that answers with Google's JSON error shape.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
import urllib.request
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from provisioner.providers.base import AuthError, ConflictError, InvalidRequestError, RetryExhaustedError
from provisioner.providers.gcp.store import READER_ROLE, bucket_name, lifecycle_rule
from provisioner.providers.store import EXPIRE_DAYS, REFRESH_DAYS, payload_key

PROJECT, REGION = "test-proj", "us-central1"
BUCKET = f"trainvm-{PROJECT}-{REGION}"
READER = "123456789-compute@developer.gserviceaccount.com"


def payload(text: str = "echo hello") -> tuple[bytes, str]:
    """A small tar.gz (startup.sh) and its sha256."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = f"#!/bin/bash\n{text}\n".encode()
        info = tarfile.TarInfo("startup.sh")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return raw, hashlib.sha256(raw).hexdigest()


def uploads(sent) -> list[str]:
    return [url for method, url, _ in sent if method == "POST" and "/upload/" in url]


# ------------------------------------------------------------------ naming (pure)
def test_bucket_name_rule():
    assert bucket_name("my-proj", "us-central1") == "trainvm-my-proj-us-central1"
    hashed = {bucket_name(p, "northamerica-northeast1") for p in (
        "a-thirty-character-project-id1",  # 8 + 30 + 1 + 23 = 62: fits
        "example.com:proj",  # a domain-scoped id: ':' is not allowed in a bucket name
        "my-google-proj",  # "google" is not allowed anywhere in a bucket name
        "team-g00gle-ml")}
    assert "trainvm-a-thirty-character-project-id1-northamerica-northeast1" in hashed
    for name in hashed:
        assert len(name) <= 63 and name.startswith("trainvm-") and "google" not in name and ":" not in name
    assert bucket_name("example.com:proj", "us-east1") == bucket_name("example.com:proj", "us-east1")  # deterministic
    assert bucket_name("example.com:proj", "us-east1") != bucket_name("example.com:proj2", "us-east1")
    long, region = "a" * 30, "northamerica-northeast12"
    assert bucket_name(long, region) == f"trainvm-{long}-{region}"  # 63
    assert bucket_name(long, region + "3") == f"trainvm-{hashlib.sha256(long.encode()).hexdigest()[:16]}-{region}3"  # 64


# ------------------------------------------------------------------ stage
def test_stage_creates_the_bucket_uploads_once_and_serves_the_url(make_store, recorder, sdk):
    store = make_store()
    sent = recorder(store)
    data, sha = payload()
    ref = store.stage(REGION, data, sha)
    assert (ref.cloud, ref.region, ref.store, ref.key, ref.sha256, ref.size) == ("gcp", REGION, BUCKET, payload_key(sha), sha, len(data))
    assert ref.uploaded and len(uploads(sent)) == 1
    assert ref.url == f"{store.endpoint}/storage/v1/b/{BUCKET}/o/payloads%2F{sha}.tar.gz?alt=media"
    assert READER in ref.access and READER_ROLE in ref.access
    with urllib.request.urlopen(ref.url) as r:  # what the VM GETs (without the token the emulator ignores)
        assert r.read() == data
    # the create request carries every setting (real GCS keeps them; the emulator drops them, see the docstring)
    insert = [json.loads(b) for m, u, b in sent if m == "POST" and u.split("?")[0].endswith("/storage/v1/b")]
    assert len(insert) == 1
    assert insert[0]["name"] == BUCKET and insert[0]["location"] == REGION
    assert insert[0]["labels"] == {"trainvm-managed": "true"}
    assert insert[0]["lifecycle"] == {"rule": [lifecycle_rule()]}
    assert insert[0]["iamConfiguration"]["uniformBucketLevelAccess"] == {"enabled": True}
    assert insert[0]["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    # and what the bucket holds afterwards, read back through the SDK
    b = sdk.get_bucket(BUCKET)
    assert b.labels == {"trainvm-managed": "true"}
    assert [dict(r) for r in b.lifecycle_rules] == [
        {"action": {"type": "Delete"}, "condition": {"age": EXPIRE_DAYS, "matchesPrefix": ["payloads/"]}}]
    assert b.iam_configuration.uniform_bucket_level_access_enabled is True
    assert b.iam_configuration.public_access_prevention == "enforced"
    viewers = [x for x in b.get_iam_policy(requested_policy_version=3).bindings if x["role"] == READER_ROLE]
    assert [set(x["members"]) for x in viewers] == [{f"serviceAccount:{READER}"}]
    # the policy on the wire (the emulator stores it and enforces nothing): the read policy's etag, our binding
    put = [json.loads(b) for m, u, b in sent if m == "PUT" and u.split("?")[0].endswith(f"/b/{BUCKET}/iam")]
    assert len(put) == 1 and put[0]["etag"]
    assert put[0]["bindings"] == [{"role": READER_ROLE, "members": [f"serviceAccount:{READER}"]}]

    again = store.stage(REGION, data, sha)  # the same store: nothing sent but the object's read
    assert not again.uploaded and again == ref.__class__(**{**ref.__dict__, "uploaded": False})
    assert len(uploads(sent)) == 1


def test_a_second_store_converges_nothing_and_grants_nothing_again(make_store, recorder, sdk):
    data, sha = payload()
    make_store().stage(REGION, data, sha)
    policy_before = sdk.get_bucket(BUCKET).get_iam_policy(requested_policy_version=3).bindings
    store = make_store()  # another `up`: no cache
    sent = recorder(store)
    ref = store.stage(REGION, data, sha)
    assert not ref.uploaded
    assert [m for m, _, _ in sent] == ["GET", "GET", "GET"]  # bucket, IAM policy, object: no PATCH, no PUT, no POST
    assert sdk.get_bucket(BUCKET).get_iam_policy(requested_policy_version=3).bindings == policy_before


def test_another_size_or_an_old_object_is_uploaded_again(make_store, recorder, sdk):
    data, sha = payload()
    store = make_store()
    store.stage(REGION, data, sha)
    blob = sdk.bucket(BUCKET).blob(payload_key(sha))
    blob.upload_from_string(data[:-10])  # truncated (an interrupted upload by another tool, a bad copy)
    sent = recorder(store)
    ref = store.stage(REGION, data, sha)
    assert ref.uploaded and ref.refreshed and len(uploads(sent)) == 1  # it was there: a refresh
    assert sdk.bucket(BUCKET).blob(payload_key(sha)).download_as_bytes() == data

    gen = sdk.bucket(BUCKET).get_blob(payload_key(sha)).generation
    young = make_store(now=lambda: datetime.now(UTC) + timedelta(days=REFRESH_DAYS - 1))
    assert not young.stage(REGION, data, sha).uploaded
    old = make_store(now=lambda: datetime.now(UTC) + timedelta(days=REFRESH_DAYS, minutes=1))
    sent = recorder(old)
    again = old.stage(REGION, data, sha)
    assert again.uploaded and again.refreshed and len(uploads(sent)) == 1  # a refresh, not a new object
    assert sdk.bucket(BUCKET).get_blob(payload_key(sha)).generation != gen  # a new object: its age starts again


def test_same_size_other_content_is_uploaded_again(make_store, sdk):
    data, sha = payload()
    store = make_store()
    store.stage(REGION, data, sha)
    sdk.bucket(BUCKET).blob(payload_key(sha)).upload_from_string(bytes(reversed(data)))  # same size, other MD5
    assert store.stage(REGION, data, sha).uploaded
    assert sdk.bucket(BUCKET).blob(payload_key(sha)).download_as_bytes() == data


def test_an_existing_trainvm_bucket_is_converged_and_keeps_other_grants(make_store, sdk):
    b = sdk.bucket(BUCKET)
    b.labels = {"trainvm-managed": "true", "team": "ml"}
    sdk.create_bucket(b, location=REGION)
    b = sdk.get_bucket(BUCKET)
    b.labels = {"trainvm-managed": "true", "team": "ml"}
    b.add_lifecycle_delete_rule(age=90)  # someone's own rule stays
    b.patch()
    policy = b.get_iam_policy(requested_policy_version=3)
    policy.bindings.append({"role": "roles/storage.admin", "members": {"user:admin@example.com"}})
    b.set_iam_policy(policy)

    data, sha = payload()
    make_store().stage(REGION, data, sha)
    b = sdk.get_bucket(BUCKET)
    assert b.labels == {"trainvm-managed": "true", "team": "ml"}
    assert [dict(r) for r in b.lifecycle_rules] == [{"action": {"type": "Delete"}, "condition": {"age": 90}}, lifecycle_rule()]
    assert b.iam_configuration.uniform_bucket_level_access_enabled and b.iam_configuration.public_access_prevention == "enforced"
    roles = {x["role"]: set(x["members"]) for x in b.get_iam_policy(requested_policy_version=3).bindings}
    assert roles == {"roles/storage.admin": {"user:admin@example.com"}, READER_ROLE: {f"serviceAccount:{READER}"}}


def test_a_bucket_of_that_name_that_is_not_trainvms_is_refused(make_store, sdk):
    sdk.create_bucket(BUCKET, location=REGION)  # no trainvm-managed label
    data, sha = payload()
    with pytest.raises(ConflictError, match=f"gs://{BUCKET} exists and is not trainvm's") as e:
        make_store().stage(REGION, data, sha)
    assert "--update-labels=trainvm-managed=true" in (e.value.hint or "")
    assert list(sdk.list_blobs(BUCKET)) == []


def test_bad_input_is_refused_before_any_request(make_store, recorder):
    store = make_store()
    sent = recorder(store)
    data, sha = payload()
    with pytest.raises(InvalidRequestError, match="does not have the sha256"):
        store.stage(REGION, data + b"x", sha)
    with pytest.raises(InvalidRequestError, match="not a GCE region"):
        store.stage("us-central1-a/../x", data, sha)
    with pytest.raises(InvalidRequestError, match="not a sha256"):
        store.release(REGION, "ABC")
    assert sent == []


def test_a_project_without_a_default_service_account(make_store):
    data, sha = payload()
    with pytest.raises(InvalidRequestError, match="no default compute service account") as e:
        make_store(service_account=lambda: None).stage(REGION, data, sha)
    assert e.value.code == "NO_DEFAULT_SERVICE_ACCOUNT"


# ------------------------------------------------------------------ release / stored
def test_release_and_stored(make_store, sdk):
    store = make_store()
    assert store.stored(REGION) == [] and store.release(REGION, "0" * 64) is False  # no bucket yet
    (d1, s1), (d2, s2) = payload("one"), payload("two")
    store.stage(REGION, d1, s1)
    store.stage(REGION, d2, s2)
    sdk.bucket(BUCKET).blob("payloads/notes.txt").upload_from_string(b"x")  # not a payload key: never listed
    sdk.bucket(BUCKET).blob("other/thing").upload_from_string(b"x")
    assert store.stored(REGION) == sorted([s1, s2])
    assert store.release(REGION, s1) is True
    assert sdk.bucket(BUCKET).get_blob(payload_key(s1)) is None
    assert store.release(REGION, s1) is False
    assert store.stored(REGION) == [s2]
    assert sdk.lookup_bucket(BUCKET) is not None  # the bucket stays (shared by the region's VMs)


# ------------------------------------------------------------------ the provider
def test_provider_store_grants_the_projects_default_service_account(make_provider, gcs, sdk, monkeypatch):
    """GcpProvider.payload_store(): the reader is projects.get's defaultServiceAccount (GCE emulator)."""
    monkeypatch.setenv("TRAINVM_GCS_ENDPOINT", gcs.url)
    provider = make_provider(project=PROJECT)
    store = provider.payload_store()
    data, sha = payload()
    ref = store.stage(REGION, data, sha)
    email = provider.api().projects.get(project=PROJECT).default_service_account
    assert email.endswith("-compute@developer.gserviceaccount.com") and email in ref.access
    members = {m for x in sdk.get_bucket(BUCKET).get_iam_policy(requested_policy_version=3).bindings
               if x["role"] == READER_ROLE for m in x["members"]}
    assert members == {f"serviceAccount:{email}"}


def test_provider_store_without_default_service_account(make_provider, gce, gcs, monkeypatch):
    monkeypatch.setenv("TRAINVM_GCS_ENDPOINT", gcs.url)
    gce.no_default_sa.add(PROJECT)
    data, sha = payload()
    with pytest.raises(InvalidRequestError, match=f"project {PROJECT} has no default compute service account"):
        make_provider(project=PROJECT).payload_store().stage(REGION, data, sha)


def test_records_carry_the_payload_label(make_provider, spec, offer):
    s = spec()
    s = spec(labels={**s.labels, "trainvm-payload": "0123456789abcdef"})
    rec = make_provider().create(s, offer())
    assert rec.payload == "0123456789abcdef"
    assert make_provider().find(s.name).payload == "0123456789abcdef"


# ------------------------------------------------------------------ refusals and an endpoint that does not answer
class _Refusing(BaseHTTPRequestHandler):
    """Answers every request with ``status`` in Google's JSON error shape (what GCS sends for 403 / 503)."""

    protocol_version = "HTTP/1.1"
    status, reason, message = 403, "forbidden", "x@y.iam.gserviceaccount.com does not have storage.buckets.get access"
    count = 0

    def _answer(self):
        type(self).count += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"error": {"code": self.status, "message": self.message,
                                     "errors": [{"message": self.message, "domain": "global", "reason": self.reason}]}}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def refusing():
    def start(status: int, reason: str, message: str):
        handler = type("H", (_Refusing,), {"status": status, "reason": reason, "message": message, "count": 0})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}", handler

    servers: list = []
    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_403_is_an_auth_error_naming_the_bucket(make_store, refusing):
    url, handler = refusing(403, "forbidden", "x@y.iam.gserviceaccount.com does not have storage.buckets.get access")
    data, sha = payload()
    with pytest.raises(AuthError, match=f"GCS: reading bucket gs://{BUCKET}: .*does not have storage.buckets.get") as e:
        make_store(endpoint=url).stage(REGION, data, sha)
    assert "another project" in e.value.hint and "roles/storage.admin" in e.value.hint
    assert handler.count == 1  # never retried


def test_503_is_retried_then_retry_exhausted(make_store, refusing):
    url, handler = refusing(503, "backendError", "Backend Error")
    data, sha = payload()
    with pytest.raises(RetryExhaustedError, match="GCS: listing .*HTTP 503.*TRAINVM_API_TIMEOUT"):
        make_store(endpoint=url, call_timeout=1.0).stored(REGION)
    assert handler.count >= 2


def test_unreachable_endpoint_is_retry_exhausted(make_store):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data, sha = payload()
    with pytest.raises(RetryExhaustedError, match=f"GCS: reading bucket gs://{BUCKET}: .*TRAINVM_API_TIMEOUT") as e:
        make_store(endpoint=f"http://127.0.0.1:{port}", call_timeout=1.0).stage(REGION, data, sha)
    assert "Connection" in str(e.value) or "refused" in str(e.value)


def test_a_concurrent_policy_change_is_read_again_not_overwritten(make_store, servers_iam):
    """GCS answers 412 to a setIamPolicy whose etag is stale (the emulator does not check etags: a loopback server
    plays the bucket here). The store reads the policy again and adds its binding to the new one."""
    url, seen, _ = servers_iam
    store = make_store(endpoint=url)
    assert store._grant(store.client().bucket(BUCKET)) == READER
    assert [(m, p.split("?")[0]) for m, p, _ in seen] == [("GET", f"/storage/v1/b/{BUCKET}/iam"), ("PUT", f"/storage/v1/b/{BUCKET}/iam")] * 2
    puts = [json.loads(body) for method, path, body in seen if method == "PUT"]
    assert [p["etag"] for p in puts] == ["etag-1", "etag-2"]
    assert puts[1]["bindings"] == [{"role": "roles/storage.admin", "members": ["user:other@example.com"]},
                                   {"role": READER_ROLE, "members": [f"serviceAccount:{READER}"]}]


@pytest.fixture
def servers_iam():
    """GET .../iam answers etag-1 (no bindings) first, then etag-2 (another user's binding, added meanwhile); a PUT
    with a stale etag is 412, the current one 200."""
    state = {"etag": "etag-1", "bindings": []}
    seen: list = []

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            seen.append(("GET", self.path, b""))
            policy = {"kind": "storage#policy", "version": 1, **state}
            if state.get("churn"):  # someone else changes the policy after every read
                state["etag"] = f"etag-{len(seen) + 1}"
            elif state["etag"] == "etag-1":  # someone else's change lands right after this read
                state.update(etag="etag-2", bindings=[{"role": "roles/storage.admin", "members": ["user:other@example.com"]}])
            self._send(200, policy)

        def do_PUT(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(("PUT", self.path, body))
            sent = json.loads(body)
            if sent.get("etag") != state["etag"]:
                return self._send(412, {"error": {"code": 412, "message": "Precondition Failed",
                                                  "errors": [{"reason": "conditionNotMet", "message": "Precondition Failed"}]}})
            state.update(etag="etag-3", bindings=sent["bindings"])
            self._send(200, {"kind": "storage#policy", "version": 1, **state})

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen, state
    httpd.shutdown()
    httpd.server_close()


def test_a_policy_that_keeps_changing_is_given_up_on_within_the_api_timeout(make_store, servers_iam):
    """Every read-modify-write meets a newer etag (412): the store redoes it (providers/poll.py, tenacity) until
    TRAINVM_API_TIMEOUT and then says so; it never overwrites the other writer's policy."""
    url, seen, state = servers_iam
    state["churn"] = True
    store = make_store(endpoint=url, call_timeout=1.0)
    with pytest.raises(Exception, match=r"GCS: granting roles/storage.objectViewer on gs://.*\(gave up after 1 s: TRAINVM_API_TIMEOUT\)"):
        store._grant(store.client().bucket(BUCKET))
    puts = [m for m, _, _ in seen if m == "PUT"]
    assert len(puts) >= 2 and state["bindings"] == []


def test_no_credentials_is_an_auth_error(make_store, monkeypatch, tmp_path):
    """Without credentials (and no emulator endpoint) the SDK's own lookup fails: AuthError, no traceback."""
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "GCE_METADATA_HOST", "GCE_METADATA_IP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud ADC file
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # no metadata server either
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    with pytest.raises(AuthError, match="GCE credentials were refused or could not be obtained"):
        make_store(endpoint="").stored(REGION)


# ------------------------------------------------------------------ issue 36 item 6: a failed payload upload
UPLOAD = "/upload/storage/v1/"


@pytest.mark.parametrize("status", [500, 503])
def test_one_5xx_on_the_upload_is_retried_in_place(make_store, gcs, sdk, recorder, status):
    """The upload's 500/503 comes from the SDK's media layer (google.cloud.storage.exceptions.InvalidResponse), which
    the store's retry predicate did not match: one answer failed the whole attempt (Azure and S3 retry in place)."""
    store = make_store()
    sent = recorder(store)
    data, sha = payload()
    gcs.fail("POST", UPLOAD, status=status, times=1)
    ref = store.stage(REGION, data, sha)  # before: RetryExhaustedError "HTTP 503" after one try
    assert ref.uploaded and gcs.faulted == [("POST", gcs.faulted[0][1], status)]
    assert len(uploads(sent)) == 2  # the refused one, then the one that stored it
    assert sdk.bucket(BUCKET).blob(payload_key(sha)).download_as_bytes() == data


def test_an_upload_whose_answers_are_lost_uses_the_object_it_stored(make_store, gcs, sdk):
    """Every upload is stored and its answer lost (the connection closes unanswered) until the retries give up: the
    object is there, complete (GCS commits an object only whole) with the payload's size and MD5, so the stage
    uses it instead of failing the attempt with the object left behind."""
    store = make_store(call_timeout=1.0)
    data, sha = payload("lost answers")
    gcs.fail("POST", UPLOAD, times=-1, lost=True)
    ref = store.stage(REGION, data, sha)  # before: RetryExhaustedError, and provision said "nothing was left behind"
    assert ref.uploaded and ref.sha256 == sha and len(gcs.faulted) >= 2
    assert sdk.bucket(BUCKET).blob(payload_key(sha)).download_as_bytes() == data


def test_an_upload_that_stored_nothing_is_a_failure_that_left_nothing(make_store, gcs, sdk):
    store = make_store(call_timeout=1.0)
    data, sha = payload("never stored")
    gcs.fail("POST", UPLOAD, times=-1)
    with pytest.raises(RetryExhaustedError, match=f"GCS: uploading gs://{BUCKET}/.*HTTP 503") as e:
        store.stage(REGION, data, sha)
    assert e.value.cleanup == "verified" and sdk.bucket(BUCKET).get_blob(payload_key(sha)) is None


def test_an_upload_whose_outcome_cannot_be_checked_names_what_it_may_have_left(make_store, gcs):
    """The upload's answers are lost and the read that would tell whether it was stored fails too: the error says
    the object may be there (``left_behind``), so `up` never reports "nothing was left behind"."""
    store = make_store(call_timeout=1.0)
    data, sha = payload("cannot tell")
    gcs.fail("POST", UPLOAD, times=-1, lost=True)
    gcs.fail("GET", f"/o/payloads%2F{sha}", times=-1, skip=1)  # the read before the upload is answered
    with pytest.raises(RetryExhaustedError) as e:
        store.stage(REGION, data, sha)
    where = f"gs://{BUCKET}/{payload_key(sha)}"
    assert e.value.cleanup == "left" and e.value.left_behind == (where,)
    assert f"whether {where} was stored could not be checked" in str(e.value)


def test_provision_never_says_nothing_was_left_when_the_upload_may_have_stored_it(make_store, gcs):
    """Through ``provision`` (up's engine): the stage of the only offer fails as above."""
    from provisioner.errors import TrainvmError
    from provisioner.provision.failover import provision
    from tests.contract.clouds_fake import gce_offer

    store = make_store(call_timeout=1.0)
    data, sha = payload("through provision")
    gcs.fail("POST", UPLOAD, times=-1, lost=True)
    gcs.fail("GET", f"/o/payloads%2F{sha}", times=-1, skip=1)

    def spec_for(offer):
        store.stage(REGION, data, sha)
        raise AssertionError("the stage was expected to fail")

    with pytest.raises(TrainvmError) as e:
        provision([gce_offer("us-central1-a")], spec_for, lambda cloud: None)  # type: ignore[arg-type,return-value]
    assert "nothing was left behind" not in str(e.value)  # before: "nothing was left behind (checked after every attempt)"
    assert "the cleanup of 1 attempt(s) (us-central1-a) could not be checked" in str(e.value)
    assert f"whether gs://{BUCKET}/{payload_key(sha)} was stored could not be checked" in str(e.value)


@pytest.mark.parametrize(("method", "path"), [("POST", UPLOAD), ("PUT", "upload_id=")])
def test_a_503_on_a_resumable_upload_is_retried_in_place(make_store, gcs, sdk, method, path):
    """Above 8 MiB the SDK uploads resumably (a POST that opens the session, then PUTs of the bytes): a 503 on
    either is retried in place too."""
    import os

    store = make_store()
    data = os.urandom(9 * 1024 * 1024)
    sha = hashlib.sha256(data).hexdigest()
    gcs.fail(method, path, status=503, times=1)
    ref = store.stage(REGION, data, sha)
    assert ref.uploaded and [(m, s) for m, _, s in gcs.faulted] == [(method, 503)]
    assert sdk.bucket(BUCKET).blob(payload_key(sha)).download_as_bytes() == data
