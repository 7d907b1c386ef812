"""The bootstrap (user data on every cloud) run for real: bash, curl, sha256sum and tar on this machine, against a
payload served by a loopback HTTP server. Its logic is tested here with a plain-curl ``tv_fetch`` (the cloud's own
fetch functions, with their metadata tokens and credentials, are tested against each cloud's storage emulator in
tests/{gce,aws,azure}/); what it proves: a verified payload is unpacked and its startup script runs; a tampered
object is refused and nothing runs; a restart re-hashes the copy on disk and fetches nothing, also after the
stored payload was deleted; a copy changed on disk is refused and fetched again, and what an earlier boot unpacked
is never run as it is; payload missing, identity refused and store unreachable each end with a clear
``failed:bootstrap`` status and a report that ``trainvm verify`` decodes.

Not modelled: the clouds' metadata servers and IAM (the fetch functions' tests), cloud-init/the guest agent that
starts user data (tests/realos runs it under systemd-less chroot)."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from provisioner.providers.store import PayloadRef, payload_key
from provisioner.render import bootstrap as B
from provisioner.render.payload import build_payload
from provisioner.verify.report import last_console_report

PLAIN_FETCH = """tv_fetch() {
  local code
  code=$(curl -sS -o "$2" -w '%{http_code}' --connect-timeout 5 --max-time 30 "$1") || code=000
  tv_http "$code"
}"""

STARTUP = """#!/bin/bash
set -euo pipefail
echo "startup ran from $(readlink "${TRAINVM_ROOT}/opt/trainvm/current")"
echo run >>"${TRAINVM_ROOT}/ran"
"""


class Store:
    """A loopback object store: ``objects`` path -> (status, body); counts GETs."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[int, bytes]] = {}
        self.gets = 0
        store = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                store.gets += 1
                status, body = store.objects.get(self.path, (404, b"<Error><Code>NoSuchKey</Code></Error>"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def store():
    s = Store()
    yield s
    s.close()


def _boot(monkeypatch, url: str, sha: str) -> str:
    monkeypatch.setattr(B, "fetch_code", lambda cloud: PLAIN_FETCH)
    ref = PayloadRef(cloud="aws", region="us-east-1", store="b", key=payload_key(sha), url=url, sha256=sha, size=0,
                     access="s3:GetObject on the object for the instance profile")
    return B.render_bootstrap(ref, "f" * 64, "debian-12").text


def _run(root: Path, boot: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = root.parent / "user-data.sh"
    path.write_text(boot)
    full = {**os.environ, "TRAINVM_ROOT": str(root), "TRAINVM_RETRY_SLEEP": "0", **env}
    return subprocess.run(["bash", str(path)], capture_output=True, text=True, env=full, timeout=120)


def _report(out: str):
    """The report as `trainvm verify` reads it from the console (verify/report.last_console_report)."""
    report = last_console_report(out)
    assert report is not None, out
    return report


@pytest.fixture
def payload():
    return build_payload(STARTUP, {"profile": "t"})


def test_a_verified_payload_is_unpacked_and_run_and_a_restart_fetches_nothing(tmp_path, store, payload, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    store.objects["/p.tgz"] = (200, payload.data)
    boot = _boot(monkeypatch, store.base + "/p.tgz", payload.sha256)
    r = _run(root, boot)
    assert r.returncode == 0, r.stderr
    assert f"payload {payload.sha256} fetched" in r.stderr and "startup ran from" in r.stdout
    unpacked = root / "opt/trainvm/payload" / payload.sha256
    assert (root / "opt/trainvm/current").resolve() == unpacked.resolve()
    assert (root / "usr/local/sbin/trainvm-provision").read_text() == STARTUP
    assert os.access(root / "usr/local/sbin/trainvm-provision", os.X_OK)
    assert json.loads((unpacked / "manifest.json").read_text())["files"]["startup.sh"] == hashlib.sha256(STARTUP.encode()).hexdigest()
    cached = root / "var/lib/trainvm/payload" / f"{payload.sha256}.tar.gz"
    assert cached.read_bytes() == payload.data and (cached.parent.stat().st_mode & 0o777) == 0o700
    # the stored payload is deleted (the store's lifecycle rule, or `down` of another VM): a restart still works
    del store.objects["/p.tgz"]
    gets = store.gets
    r = _run(root, boot)
    assert r.returncode == 0, r.stderr
    assert store.gets == gets and "already on disk: nothing fetched" in r.stderr
    assert (root / "ran").read_text() == "run\nrun\n"


def test_a_tampered_payload_is_refused_and_nothing_runs(tmp_path, store, payload, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    tampered = build_payload(STARTUP + "echo pwned >\"$TRAINVM_ROOT/pwned\"\n", {"profile": "t"})
    store.objects["/p.tgz"] = (200, tampered.data)
    r = _run(root, _boot(monkeypatch, store.base + "/p.tgz", payload.sha256))
    assert r.returncode == 1 and store.gets == 1  # a content-addressed object does not heal: no retry
    assert "TRAINVM_STATUS=failed:bootstrap:" in r.stdout
    report = _report(r.stdout)
    assert report.status.startswith("failed:bootstrap:") and "payload hash mismatch" in (report.error or "")
    assert tampered.sha256 in report.error and payload.sha256 in report.error
    assert not (root / "pwned").exists() and not (root / "ran").exists()
    assert not (root / "opt/trainvm/payload").exists() and not list((root / "var/lib/trainvm/payload").iterdir())


def test_a_missing_payload_fails_after_a_few_tries(tmp_path, store, payload, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    r = _run(root, _boot(monkeypatch, store.base + "/gone.tgz", payload.sha256), TRAINVM_MISSING_TRIES="3")
    assert r.returncode == 1 and store.gets == 3
    assert "payload missing" in _report(r.stdout).error


def test_an_identity_without_read_access_is_named(tmp_path, store, payload, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    store.objects["/p.tgz"] = (403, b"<Error><Code>AccessDenied</Code></Error>")
    r = _run(root, _boot(monkeypatch, store.base + "/p.tgz", payload.sha256), TRAINVM_FETCH_SECONDS="0")
    report = _report(r.stdout)
    assert r.returncode == 1 and "identity without read access" in report.error
    assert "s3:GetObject on the object for the instance profile" in report.error


def test_an_unreachable_store_is_named(tmp_path, payload, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _run(root, _boot(monkeypatch, f"http://127.0.0.1:{port}/p.tgz", payload.sha256), TRAINVM_FETCH_SECONDS="0")
    assert r.returncode == 1 and "store unreachable" in _report(r.stdout).error


def _booted(tmp_path, store, payload, monkeypatch) -> tuple[Path, str]:
    """A VM root after one good boot (payload fetched, verified, unpacked, run) and its bootstrap."""
    root = tmp_path / "root"
    root.mkdir()
    store.objects["/p.tgz"] = (200, payload.data)
    boot = _boot(monkeypatch, store.base + "/p.tgz", payload.sha256)
    r = _run(root, boot)
    assert r.returncode == 0 and (root / "ran").read_text() == "run\n", r.stderr
    return root, boot


PWNED = STARTUP + "echo pwned >\"$TRAINVM_ROOT/pwned\"\n"


def test_a_cached_payload_changed_on_disk_is_refused_and_fetched_again(tmp_path, store, payload, monkeypatch):
    """The copy on disk is re-hashed at each boot: a changed one is refused like a fetched mismatch (deleted, never
    unpacked or run) and the content-addressed object is fetched again."""
    root, boot = _booted(tmp_path, store, payload, monkeypatch)
    cached = root / "var/lib/trainvm/payload" / f"{payload.sha256}.tar.gz"
    tampered = build_payload(PWNED, {"profile": "t"})
    cached.write_bytes(tampered.data)
    gets = store.gets
    r = _run(root, boot)
    assert r.returncode == 0, r.stderr
    assert (f"payload copy on disk refused: {cached} has sha256 {tampered.sha256}, this VM expects {payload.sha256}"
            in r.stderr)
    assert store.gets == gets + 1 and f"payload {payload.sha256} fetched" in r.stderr
    assert cached.read_bytes() == payload.data and not (root / "pwned").exists()
    assert (root / "usr/local/sbin/trainvm-provision").read_text() == STARTUP
    assert (root / "ran").read_text() == "run\nrun\n"


def test_a_changed_cached_payload_with_the_stored_one_gone_fails_clearly(tmp_path, store, payload, monkeypatch):
    root, boot = _booted(tmp_path, store, payload, monkeypatch)
    cached = root / "var/lib/trainvm/payload" / f"{payload.sha256}.tar.gz"
    cached.write_bytes(build_payload(PWNED, {"profile": "t"}).data)
    del store.objects["/p.tgz"]
    r = _run(root, boot, TRAINVM_MISSING_TRIES="2")
    assert r.returncode == 1 and "payload copy on disk refused" in r.stderr
    report = _report(r.stdout)
    assert report.status.startswith("failed:bootstrap:") and "payload missing" in (report.error or "")
    assert not cached.exists() and not (root / "pwned").exists() and (root / "ran").read_text() == "run\n"


def test_files_unpacked_at_an_earlier_boot_are_not_trusted(tmp_path, store, payload, monkeypatch):
    """Only the tar.gz is hashed: each boot unpacks it afresh, so a startup script changed on disk never runs."""
    root, boot = _booted(tmp_path, store, payload, monkeypatch)
    (root / "opt/trainvm/payload" / payload.sha256 / "startup.sh").write_text(PWNED)
    (root / "usr/local/sbin/trainvm-provision").write_text(PWNED)
    r = _run(root, boot)
    assert r.returncode == 0 and "already on disk: nothing fetched" in r.stderr, r.stderr
    assert not (root / "pwned").exists() and (root / "ran").read_text() == "run\nrun\n"
    assert (root / "opt/trainvm/payload" / payload.sha256 / "startup.sh").read_text() == STARTUP
