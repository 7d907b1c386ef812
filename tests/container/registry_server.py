"""The real CNCF distribution server (Debian's ``docker-registry`` package) on 127.0.0.1, started
with a temporary config, plus what the tests need around it:

- ``ensure_registry_binary``: installs the package with apt-get when it is missing and we are root;
  otherwise skips, except under CI=true where a missing registry fails the run loudly.
- ``TokenServer``: a bearer-token realm over https (trustme certificate) that signs RS256 JWTs the
  way the distribution server's ``auth: token`` verifies them (x5c chain against rootcertbundle,
  iss/aud/exp/access claims). It hands pull(+push) tokens to the right Basic credentials and, for
  repositories under ``public/``, pull tokens to anonymous callers (as Docker Hub does).
  Not modelled: refresh tokens / OAuth2 POST flow, token expiry inside a run, nvcr.io's
  ``$oauthtoken`` user convention beyond plain Basic credentials.
- ``push_image``: builds small images (tiny layer blobs, an OCI config whose Env carries the
  NGC-style variables, an OCI manifest, optionally an OCI index) and pushes them through the
  registry's HTTP API (monolithic blob upload, manifest PUT).
"""

from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.emulators.tls_server import TlsThreadingHTTPServer

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
BINARY = "docker-registry"


def ensure_registry_binary() -> str:
    path = shutil.which(BINARY) or (f"/usr/bin/{BINARY}" if os.path.exists(f"/usr/bin/{BINARY}") else None)
    if path is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", "docker-registry"]
        if subprocess.run(cmd, env=env, capture_output=True, timeout=600).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
            subprocess.run(cmd, env=env, capture_output=True, timeout=600)
        path = shutil.which(BINARY)
    if path is None:
        why = "the docker-registry package (CNCF distribution server) is not installed; apt-get install -y docker-registry"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {why}", pytrace=False)
        pytest.skip(why)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Registry:
    url: str  # http://127.0.0.1:PORT
    host: str  # 127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    log: Path
    session: requests.Session

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_registry(tmp: Path, auth: dict[str, Any] | None = None, session: requests.Session | None = None) -> Registry:
    binary = ensure_registry_binary()
    port = free_port()
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(tmp / "storage")}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": "test-only-http-secret"},
    }
    if auth:
        config["auth"] = auth
    cfg = tmp / "config.yml"
    cfg.write_text(json.dumps(config))  # YAML is a superset of JSON
    log = tmp / "registry.log"
    proc = subprocess.Popen([binary, "serve", str(cfg)], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        if proc.poll() is not None:
            raise RuntimeError(f"docker-registry exited: {log.read_text()[-2000:]}")
        try:
            requests.get(url + "/v2/", timeout=1)
            break
        except requests.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError(f"docker-registry did not listen on {url}: {log.read_text()[-2000:]}")
    return Registry(url, f"127.0.0.1:{port}", proc, log, session or requests.Session())


# ---- images -------------------------------------------------------------------------------------

NGC_ENV = {
    # Keys and value shapes as NVIDIA's CUDA base images (gitlab.com/nvidia/container-images/cuda
    # Dockerfiles: CUDA_VERSION, NVIDIA_REQUIRE_CUDA, NV_CUDNN_VERSION/CUDNN_VERSION) and NGC
    # framework images (PyTorch release notes / `docker inspect`: PYTORCH_VERSION, NCCL_VERSION,
    # CUDA_DRIVER_VERSION, TORCH_CUDA_ARCH_LIST, NVIDIA_PYTORCH_VERSION) set them.
    "PATH": "/usr/local/nvm/versions/node/v16.20.2/bin:/usr/local/lib/python3.10/dist-packages/torch_tensorrt/bin:/usr/local/mpi/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "CUDA_VERSION": "12.6.0.022",
    "CUDA_DRIVER_VERSION": "560.35.03",
    "CUDNN_VERSION": "9.3.0.75",
    "NCCL_VERSION": "2.22.3",
    "PYTORCH_VERSION": "2.5.0a0+872d972",
    "NVIDIA_PYTORCH_VERSION": "24.08",
    "TORCH_CUDA_ARCH_LIST": "5.2 6.0 6.1 7.0 7.2 7.5 8.0 8.6 8.7 9.0+PTX",
    "NVIDIA_REQUIRE_CUDA": "cuda>=9.0",
    "NVIDIA_PRODUCT_NAME": "PyTorch",
    "NVIDIA_VISIBLE_DEVICES": "all",
}


def layer(seed: str, size: int = 512) -> bytes:
    raw = (seed * (size // max(1, len(seed)) + 1))[:size].encode()
    return gzip.compress(raw, mtime=0)


def image_config(env: dict[str, str], arch: str = "amd64") -> bytes:
    cfg = {
        "architecture": arch,
        "os": "linux",
        "config": {"Env": [f"{k}={v}" for k, v in env.items()], "Entrypoint": ["/opt/nvidia/nvidia_entrypoint.sh"], "WorkingDir": "/workspace"},
        "rootfs": {"type": "layers", "diff_ids": []},
        "history": [{"created_by": "test image"}],
    }
    return json.dumps(cfg, sort_keys=True).encode()


@dataclass
class Pushed:
    digest: str  # what the tag points at (index or manifest)
    manifest_digest: str  # the linux/amd64 manifest
    config_digest: str
    compressed_size: int


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def push_blob(reg: Registry, repo: str, data: bytes, token: str | None = None) -> str:
    digest = sha256(data)
    r = reg.session.post(f"{reg.url}/v2/{repo}/blobs/uploads/", headers=_headers(token), timeout=10)
    assert r.status_code == 202, (r.status_code, r.text)
    loc = urllib.parse.urljoin(reg.url, r.headers["Location"])
    sep = "&" if "?" in loc else "?"
    r = reg.session.put(f"{loc}{sep}digest={digest}", data=data, headers={**_headers(token), "Content-Type": "application/octet-stream"}, timeout=10)
    assert r.status_code == 201, (r.status_code, r.text)
    return digest


def push_manifest(reg: Registry, repo: str, ref: str, body: bytes, media: str, token: str | None = None) -> str:
    r = reg.session.put(f"{reg.url}/v2/{repo}/manifests/{ref}", data=body, headers={**_headers(token), "Content-Type": media}, timeout=10)
    assert r.status_code == 201, (r.status_code, r.text)
    return sha256(body)


def push_image(reg: Registry, repo: str, tag: str, env: dict[str, str], *, index: bool = True, seed: str = "a",
               token: str | None = None, arches: tuple[str, ...] = ("amd64", "arm64")) -> Pushed:
    """Push one image (an OCI index over one manifest per arch when ``index``) and tag it."""
    per_arch: dict[str, tuple[str, str, int, bytes]] = {}
    for arch in arches if index else ("amd64",):
        layers = [layer(f"{seed}-{arch}-{i}", 400 + 300 * i) for i in range(3)]
        layer_descs = [{"mediaType": OCI_LAYER, "digest": push_blob(reg, repo, b, token), "size": len(b)} for b in layers]
        cfg = image_config(env, arch)
        cfg_digest = push_blob(reg, repo, cfg, token)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": cfg_digest, "size": len(cfg)},
            "layers": layer_descs,
        }, sort_keys=True).encode()
        per_arch[arch] = (sha256(manifest), cfg_digest, sum(len(b) for b in layers), manifest)
    if not index:
        digest, cfg_digest, size, manifest = per_arch["amd64"]
        push_manifest(reg, repo, tag, manifest, OCI_MANIFEST, token)
        return Pushed(digest, digest, cfg_digest, size)
    entries = []
    for arch, (digest, _, _, manifest) in per_arch.items():
        push_manifest(reg, repo, digest, manifest, OCI_MANIFEST, token)
        entries.append({"mediaType": OCI_MANIFEST, "digest": digest, "size": len(manifest), "platform": {"os": "linux", "architecture": arch}})
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}, sort_keys=True).encode()
    top = push_manifest(reg, repo, tag, body, OCI_INDEX, token)
    amd = per_arch.get("amd64")
    return Pushed(top, amd[0] if amd else "", amd[1] if amd else "", amd[2] if amd else 0)


# ---- token realm --------------------------------------------------------------------------------

def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """https://127.0.0.1:PORT/token signing distribution-compatible JWTs."""

    def __init__(self, tmp: Path, ca: Any, service: str, issuer: str, users: dict[str, str]) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        self.service, self.issuer, self.users = service, issuer, users
        self.requests: list[dict[str, Any]] = []
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trainvm-test-token-signer")])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
                     .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.bundle = tmp / "token-signer.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self._der = self.cert.public_bytes(serialization.Encoding.DER)
        server_cert = ca.issue_cert("127.0.0.1")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_cert.configure_cert(ctx)
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                owner._handle(self)

        # the handshake in the request thread; a refused one (test_token_realm_certificate_is_checked) recorded, not printed
        self.httpd = TlsThreadingHTTPServer(("127.0.0.1", 0), Handler, ctx)
        self.realm = f"https://127.0.0.1:{self.httpd.server_address[1]}/token"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def sign(self, subject: str, access: list[dict[str, Any]]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(self._der).decode()]}
        claims = {"iss": self.issuer, "sub": subject, "aud": self.service, "exp": now + 300, "nbf": now - 10, "iat": now,
                  "jti": hashlib.sha256(os.urandom(16)).hexdigest()[:16], "access": access}
        signing = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        sig = self.key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing}.{_b64url(sig)}"

    def _handle(self, req: http.server.BaseHTTPRequestHandler) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(req.path).query)
        user = None
        header = req.headers.get("Authorization", "")
        if header.startswith("Basic "):
            name, _, password = base64.b64decode(header[6:]).decode().partition(":")
            if self.users.get(name) != password:
                return self._reply(req, 401, {"details": "incorrect username or password"})
            user = name
        self.requests.append({"user": user, "service": query.get("service", [None])[0], "scope": query.get("scope", [])})
        if query.get("service", [None])[0] != self.service:
            return self._reply(req, 400, {"details": "unknown service"})
        access = []
        for scope in query.get("scope", []):
            kind, _, rest = scope.partition(":")
            repo, _, actions = rest.rpartition(":")
            wanted = [a for a in actions.split(",") if a]
            granted = wanted if user else ([a for a in wanted if a == "pull"] if repo.startswith("public/") else [])
            if granted:
                access.append({"type": kind, "name": repo, "actions": granted})
        # like Docker Hub: an anonymous caller gets a token, just without the access it asked for
        self._reply(req, 200, {"token": self.sign(user or "", access), "expires_in": 300})

    @staticmethod
    def _reply(req: http.server.BaseHTTPRequestHandler, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
