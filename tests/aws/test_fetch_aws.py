"""templates/bootstrap/fetch-aws.sh: ``tv_fetch URL OUT`` run by real bash with real curl against moto's server
with its SigV4 signature and IAM policy checks on (``moto_auth``), the payload staged by S3PayloadStore and read
with temporary credentials that moto's STS issued for a role holding exactly ``aws_request.role_policy`` of a VM
with that payload. The instance metadata service is a loopback http.server (IMDSv2: a PUT for the token, the
token required on every GET, 401 without it).

What this does not model: IMDS's hop limit and token TTL, credential rotation, IAM propagation delays after the
role is created (the bootstrap's retries of rc 3 are for that), TLS (plain HTTP to moto), S3's 403 for a missing
key when the role lacks s3:ListBucket (moto answers 404 when the policy allows the key: the 404 case below is the
kinder answer), and S3's insistence that every x-amz-* header be signed (moto recomputes the signature over the
headers the request says it signed, so an old curl that leaves x-amz-security-token unsigned would pass here)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from provisioner.providers.aws import request as R
from tests.aws.conftest import role_credentials, t4_offers, t4_spec
from tests.helpers import REPO

FETCH = REPO / "templates" / "bootstrap" / "fetch-aws.sh"
DATA = b"\x1f\x8b the payload"
SHA = hashlib.sha256(DATA).hexdigest()
IMDS_TOKEN = "AQAEAimdsv2-session-token=="


class Imds:
    """IMDSv2 on loopback: ``role`` None answers 404 on security-credentials/ (a VM without instance profile)."""

    def __init__(self) -> None:
        self.role: str | None = "trainvm-vm"
        self.credentials: dict[str, str] = {}
        self.seen: list[tuple[str, str]] = []
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self, status: int, body: str = "") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:  # noqa: N802
                imds.seen.append(("PUT", self.path))
                if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self.answer(400)
                self.answer(200, IMDS_TOKEN)

            def do_GET(self) -> None:  # noqa: N802
                imds.seen.append(("GET", self.path))
                if self.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
                    return self.answer(401)
                base = "/latest/meta-data/iam/security-credentials/"
                if imds.role is None or not self.path.startswith(base):
                    return self.answer(404)
                rest = self.path[len(base):]
                if rest == "":
                    return self.answer(200, imds.role)
                if rest == imds.role:
                    return self.answer(200, json.dumps(imds.credentials, indent=2))
                self.answer(404)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def vm(aws, moto_auth, monkeypatch, tmp_path):
    """The payload staged in us-east-1, the VM role's credentials in the IMDS stub, then moto's auth on."""
    monkeypatch.setenv("TRAINVM_AWS_ENDPOINT", aws.moto_url)
    from provisioner.providers.aws.provider import AwsProvider

    store = AwsProvider().payload_store()
    ref = store.stage("us-east-1", DATA, SHA)
    spec = t4_spec(t4_offers()[0], idle_shutdown_minutes=None, max_run_hours=None, payload=ref)
    imds = Imds()
    imds.credentials = role_credentials(aws, "trainvm-vm", R.role_policy(spec, "us-east-1"))
    other = b"another VM's payload"
    other_ref = store.stage("us-east-1", other, hashlib.sha256(other).hexdigest())
    moto_auth.on()
    # curl's argv, logged by a wrapper first on PATH (the secret must never be there)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = subprocess.run(["bash", "-c", "command -v curl"], capture_output=True, text=True, check=True).stdout.strip()
    (bin_dir / "curl").write_text(f'#!/bin/bash\nprintf "%s\\n" "$*" >> {tmp_path}/argv.log\nexec {real} "$@"\n')
    (bin_dir / "curl").chmod(0o755)
    yield {"ref": ref, "other": other_ref, "imds": imds, "store": store, "tmp": tmp_path, "path": bin_dir}
    imds.close()


def tv_fetch(vm, url: str, region: str = "us-east-1") -> tuple[int, Path, str, str]:
    out = vm["tmp"] / "payload.tar.gz"
    env = {"PATH": f"{vm['path']}:{os.environ['PATH']}", "TV_MD": vm["imds"].url, "TV_REGION": region,
           "LC_ALL": "C"}
    r = subprocess.run(["bash", "-c", 'set -euo pipefail; source "$1"; rc=0; tv_fetch "$2" "$3" || rc=$?; exit "$rc"',
                        "fetch", str(FETCH), url, str(out)], env=env, capture_output=True, text=True, timeout=120)
    return r.returncode, out, r.stdout, r.stderr


def assert_no_secret(vm, *texts: str) -> None:
    creds = vm["imds"].credentials
    argv = (vm["tmp"] / "argv.log").read_text()
    for secret in (creds["SecretAccessKey"], creds["Token"], IMDS_TOKEN):
        assert all(secret not in t for t in (argv, *texts))
    leftovers = [p for p in vm["tmp"].rglob("*") if p.is_file() and p.name not in ("argv.log", "curl", "payload.tar.gz")]
    assert leftovers == []


def test_the_vm_reads_its_payload_with_its_instance_profile(vm):
    rc, out, stdout, stderr = tv_fetch(vm, vm["ref"].url)
    assert (rc, stderr) == (0, "") and stdout == ""
    assert hashlib.sha256(out.read_bytes()).hexdigest() == SHA
    assert vm["imds"].seen[0] == ("PUT", "/latest/api/token")
    assert "--aws-sigv4 aws:amz:us-east-1:s3" in (vm["tmp"] / "argv.log").read_text()
    assert_no_secret(vm, stdout, stderr)


def test_moto_really_checks_the_signature_and_the_policy(vm):
    """The checks the other cases rely on: unsigned, the request is refused; signed, another VM's payload (not
    in this role's policy) is refused."""
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", vm["ref"].url], capture_output=True,
                       text=True, timeout=60)
    assert r.stdout == "403"
    rc, out, stdout, stderr = tv_fetch(vm, vm["other"].url)
    assert rc == 3 and not out.exists() and "HTTP 403 AccessDenied" in stderr
    assert_no_secret(vm, stdout, stderr)


def test_wrong_keys_are_refused(vm):
    vm["imds"].credentials["SecretAccessKey"] = "x" * 40
    rc, out, stdout, stderr = tv_fetch(vm, vm["ref"].url)
    assert rc == 3 and not out.exists()
    assert "S3 refused the instance profile trainvm-vm (HTTP 403 SignatureDoesNotMatch; curl " in stderr
    assert_no_secret(vm, stdout, stderr)


def test_a_missing_object_is_4(vm, moto_auth):
    """The payload released while the VM still points at it. moto answers 404 because the role may read that key;
    S3 without s3:ListBucket answers 403 (rc 3): the kinder answer here."""
    moto_auth.off()
    assert vm["store"].release("us-east-1", SHA) is True
    moto_auth.on()
    rc, out, stdout, stderr = tv_fetch(vm, vm["ref"].url)
    assert rc == 4 and not out.exists() and "no such payload object (HTTP 404 NoSuchKey)" in stderr
    assert_no_secret(vm, stdout, stderr)


def test_a_vm_without_instance_profile_is_3(vm):
    vm["imds"].role = None
    rc, out, stdout, stderr = tv_fetch(vm, vm["ref"].url)
    assert rc == 3 and not out.exists() and "security-credentials/ (HTTP 404): no instance profile?" in stderr
    assert ("GET", "/latest/meta-data/iam/security-credentials/") in vm["imds"].seen


def test_credentials_that_are_not_credentials_are_3(vm):
    vm["imds"].credentials = {"Code": "AssumeRoleUnauthorizedAccess", "Message": "EC2 cannot assume the role"}
    rc, out, stdout, stderr = tv_fetch(vm, vm["ref"].url)
    assert rc == 3 and "has no usable credentials" in stderr


def test_s3_down_is_2(vm):
    rc, out, stdout, stderr = tv_fetch(vm, dead_url() + "/bkt/payloads/x.tar.gz")
    assert rc == 2 and not out.exists() and "S3 did not answer the GET of the payload (curl 7, HTTP 000)" in stderr
    assert_no_secret(vm, stdout, stderr)


def test_s3_5xx_is_2(vm):
    """moto cannot be asked for a 5xx: a loopback server answering S3's throttling (503 SlowDown) stands in."""
    class Busy(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        rc, out, stdout, stderr = tv_fetch(vm, f"http://127.0.0.1:{httpd.server_address[1]}/b/payloads/x.tar.gz")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert rc == 2 and "(curl 0, HTTP 503 SlowDown)" in stderr


def test_imds_down_is_2(vm):
    vm["imds"].close()
    vm["imds"].url = dead_url()
    rc, out, stdout, stderr = tv_fetch(vm, vm["ref"].url)
    assert rc == 2 and "no IMDSv2 token: the instance metadata service did not answer" in stderr


def test_the_script_passes_shellcheck():
    from tests.render.support import shellcheck

    assert shellcheck([FETCH], severity="style") == {}


def _old_curl(vm, version: str = "7.81.0") -> None:
    """curl as Ubuntu 22.04 ships it, as far as the fetch can tell: ``curl --version`` says 7.81.0 (the requests
    are made by this machine's curl, which is newer: what 7.81 would send is not modelled, only the choice)."""
    wrapper = vm["path"] / "curl"
    text = wrapper.read_text()
    wrapper.write_text(text.replace('exec ', f'[ "${{1:-}}" = --version ] && {{ echo "curl {version} (x86_64-pc-linux-gnu)"; exit 0; }}\nexec ', 1))


def tv_fetch_signed(vm, url: str, signed: str) -> tuple[int, Path, str, str]:
    out = vm["tmp"] / "payload.tar.gz"
    env = {"PATH": f"{vm['path']}:{os.environ['PATH']}", "TV_MD": dead_url(), "TV_REGION": "us-east-1",
           "TV_SIGNED_URL": signed, "LC_ALL": "C"}
    r = subprocess.run(["bash", "-c", 'set -euo pipefail; source "$1"; rc=0; tv_fetch "$2" "$3" || rc=$?; exit "$rc"',
                        "fetch", str(FETCH), url, str(out)], env=env, capture_output=True, text=True, timeout=120)
    return r.returncode, out, r.stdout, r.stderr


def test_an_old_curl_fetches_through_the_presigned_url_and_keeps_it_out_of_argv(vm, moto_auth):
    """Ubuntu 22.04's curl (7.81) cannot sign the session-token header, so the VM GETs the URL `up` presigned with
    boto3 (SigV4, 6 h at most); no IMDS is asked (it is dead here), and the signature never shows in curl's argv or
    output. Not modelled: the URL's signature and expiry (moto's IAM checks cannot serve query-string auth, a
    KeyError on HTTP_AUTHORIZATION, so they are off here; off, moto checks no presigned signature)."""
    _old_curl(vm)
    moto_auth.off()
    ref = vm["ref"]
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in ref.signed_url and "X-Amz-Expires=21600" in ref.signed_url
    rc, out, stdout, stderr = tv_fetch_signed(vm, ref.url, ref.signed_url)
    assert rc == 0, stderr
    assert out.read_bytes() == DATA and vm["imds"].seen == []
    sig = ref.signed_url.split("X-Amz-Signature=")[1].split("&")[0]
    assert sig not in (vm["tmp"] / "argv.log").read_text() and sig not in stdout + stderr
    missing = ref.signed_url.replace(ref.key, "payloads/" + "0" * 64 + ".tar.gz")
    rc, _, _, stderr = tv_fetch_signed(vm, ref.url, missing)
    assert rc == 4 and "no such payload object" in stderr


def test_a_new_curl_uses_the_identity_even_with_a_signed_url(vm):
    """Where curl signs the headers (>= 7.86: Debian 12, Ubuntu 24.04) the instance profile reads the payload; a
    signed URL in the environment is not used (IMDS is dead here, so the fetch fails as 2)."""
    rc, _, _, stderr = tv_fetch_signed(vm, vm["ref"].url, vm["ref"].signed_url)
    assert rc == 2 and "instance metadata service did not answer" in stderr


def test_only_ubuntu_22_04_bootstraps_carry_the_signed_url():
    from dataclasses import replace

    from provisioner.render.bootstrap import needs_signed_url, render_bootstrap

    assert needs_signed_url("ubuntu-22.04") and not needs_signed_url("debian-12") and not needs_signed_url("ubuntu-24.04")
    ref = replace(t4_spec(t4_offers()[0]).payload or _ref(), signed_url="https://b.s3.amazonaws.com/k?X-Amz-Signature=abc")
    assert "X-Amz-Signature=abc" in render_bootstrap(ref, "f" * 64, "ubuntu-22.04").text
    for os_name in ("debian-12", "ubuntu-24.04"):
        text = render_bootstrap(ref, "f" * 64, os_name).text
        assert "X-Amz-Signature" not in text and "TV_SIGNED_URL=''" in text


def _ref():
    from provisioner.providers.store import PayloadRef, payload_key

    return PayloadRef(cloud="aws", region="us-east-1", store="b", key=payload_key(SHA), url="https://b/k", sha256=SHA, size=1)
