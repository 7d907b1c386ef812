"""A read-only client for the OCI distribution API (the protocol of Docker Hub, nvcr.io, GHCR,
GCR/Artifact Registry, ACR and the CNCF distribution server): manifests and the config blob,
never layers, and no docker daemon.

- ``GET /v2/REPO/manifests/REF`` with every manifest media type accepted. An OCI index or Docker
  manifest list is narrowed to its linux/amd64 entry, which is fetched by digest.
- Every manifest and blob is checked against its digest (sha256 of the bytes), so a registry or a
  proxy cannot hand back something else; a pinned digest that does not match is an error.
- Auth as registries do it: a 401 with ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``
  -> a token from the realm (anonymously, or with Basic credentials when given) -> the request again
  with ``Authorization: Bearer``. ``Basic realm=...`` challenges are answered with the credentials.
  Credentials are sent only over https, or to loopback.
- Redirects (blob storage) are followed by hand, at most 5, and the Authorization header is dropped
  when the host changes (as docker does).
- Every response is bounded: a per-request timeout, one deadline for the whole resolution (checked
  while a body is read, not only between requests; ``TRAINVM_REGISTRY_TIMEOUT``), and a byte limit per kind.

``resolve_image`` is the entry point ``trainvm lock`` and ``validate --resolve`` use.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from provisioner import settings
from provisioner.container.image import ImageFacts, entrypoint, env_facts
from provisioner.container.reference import DIGEST_RE, ImageRef, parse_image_ref
from provisioner.errors import TrainvmError

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
MAX_MANIFEST = 4 * 1024 * 1024  # the distribution server refuses manifests over 4 MiB
MAX_CONFIG = 8 * 1024 * 1024
MAX_TOKEN = 256 * 1024
MAX_ERROR = 64 * 1024
MAX_REDIRECTS = 5
PLATFORM = ("linux", "amd64")
_CHALLENGE_PARAM = re.compile(r'([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class RegistryError(TrainvmError):
    """The registry refused, timed out or answered something that is not a valid image: exit 3."""

    exit_code = 3


class ImageNotFoundError(RegistryError):
    """The repository, tag or digest does not exist (or is hidden from these credentials)."""

    exit_code = 1


@dataclass
class RegistryClient:
    timeout: float = 15.0  # per request
    deadline: float = 60.0  # whole resolution
    ssl_context: ssl.SSLContext | None = None
    credentials: tuple[str, str] | None = None  # (user, password or token) for Basic / the token realm
    scheme: str = "https"  # "http": every registry over plain http (a loopback test registry)
    insecure: tuple[str, ...] = ()  # registries (host:port) spoken to over plain http, as docker's insecure-registries
    _tokens: dict[str, str] = field(default_factory=dict)
    _started: float = 0.0

    # ---- public -----------------------------------------------------------------------------
    def resolve(self, ref: ImageRef | str) -> ImageFacts:
        """Manifest (-> linux/amd64) and config of ``ref``; digests verified, layers not pulled."""
        ref = parse_image_ref(ref) if isinstance(ref, str) else ref
        self._started = time.monotonic()
        body, media, digest = self._manifest(ref, ref.reference)
        if ref.digest and digest != ref.digest:
            raise RegistryError(f"{ref}: the registry returned content with digest {digest}, not the pinned one")
        top = digest
        doc = _json(body, f"{ref}: manifest")
        media = media or str(doc.get("mediaType") or "")
        if media in INDEX_TYPES or "manifests" in doc:
            entry = _pick_platform(doc, ref)
            body, media, digest = self._manifest(ref, entry)
            if digest != entry:
                raise RegistryError(f"{ref}: manifest {entry} came back with digest {digest}")
            doc = _json(body, f"{ref}: manifest {entry}")
        if "config" not in doc or "layers" not in doc:
            raise RegistryError(f"{ref}: unsupported manifest ({media or 'no media type'}); expected an OCI or Docker v2 image manifest")
        cfg_desc = doc["config"]
        cfg_digest = str(cfg_desc.get("digest", ""))
        if not DIGEST_RE.match(cfg_digest):
            raise RegistryError(f"{ref}: the manifest's config digest {cfg_digest!r} is not a sha256 digest")
        config = _json(self._blob(ref, cfg_digest), f"{ref}: config blob")
        layers = doc.get("layers") or []
        try:
            size = sum(int(layer["size"]) for layer in layers)
        except (KeyError, TypeError, ValueError):
            raise RegistryError(f"{ref}: a layer in the manifest has no size") from None
        return ImageFacts(
            image=str(ref.with_digest(top)),
            digest=top,
            manifest_digest=digest,
            config_digest=cfg_digest,
            os=str(config.get("os", "")),
            architecture=str(config.get("architecture", "")),
            compressed_size=size,
            env=env_facts(config),
            entrypoint=entrypoint(config),
        )

    def digest_of(self, ref: ImageRef | str) -> str:
        """The digest the tag points at now (a HEAD-equivalent GET of the manifest, verified)."""
        ref = parse_image_ref(ref) if isinstance(ref, str) else ref
        self._started = time.monotonic()
        _, _, digest = self._manifest(ref, ref.tag or "latest")
        return digest

    def tag_moved(self, ref: ImageRef | str) -> str | None:
        """For TAG@DIGEST: the digest the tag points at now when it is no longer DIGEST, else None."""
        ref = parse_image_ref(ref) if isinstance(ref, str) else ref
        if not ref.tag or not ref.digest:
            return None
        now = self.digest_of(ref)
        return None if now == ref.digest else now

    # ---- protocol ---------------------------------------------------------------------------
    def _manifest(self, ref: ImageRef, reference: str) -> tuple[bytes, str, str]:
        url = f"{self._scheme(ref)}://{ref.registry}/v2/{ref.repository}/manifests/{urllib.parse.quote(reference, safe=':')}"
        body, headers = self._get(ref, url, {"Accept": ACCEPT}, MAX_MANIFEST, what=f"manifest {reference}")
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        claimed = headers.get("Docker-Content-Digest")
        if claimed and claimed != digest:
            raise RegistryError(f"{ref}: the registry says manifest {reference} has digest {claimed} but its bytes hash to {digest}")
        media = (headers.get("Content-Type") or "").split(";")[0].strip()
        return body, media, digest

    def _scheme(self, ref: ImageRef) -> str:
        return "http" if ref.registry in self.insecure else self.scheme

    def _blob(self, ref: ImageRef, digest: str) -> bytes:
        url = f"{self._scheme(ref)}://{ref.registry}/v2/{ref.repository}/blobs/{digest}"
        body, _ = self._get(ref, url, {}, MAX_CONFIG, what=f"blob {digest}")
        got = "sha256:" + hashlib.sha256(body).hexdigest()
        if got != digest:
            raise RegistryError(f"{ref}: blob {digest} hashes to {got}")
        return body

    def _get(self, ref: ImageRef, url: str, headers: dict[str, str], limit: int, *, what: str) -> tuple[bytes, Any]:
        host = urllib.parse.urlsplit(url).netloc
        key = f"{ref.registry}/{ref.repository}"
        auth = self._tokens.get(key)
        tried_auth = False
        for _ in range(MAX_REDIRECTS + 2):
            hdrs = dict(headers)
            if auth and urllib.parse.urlsplit(url).netloc == host:
                hdrs["Authorization"] = auth
            status, resp_headers, body = self._request(url, hdrs, limit)
            if status in (301, 302, 303, 307, 308):
                location = resp_headers.get("Location")
                if not location:
                    raise RegistryError(f"{ref}: {what}: redirect without a Location")
                url = urllib.parse.urljoin(url, location)
                continue
            if status == 401 and not tried_auth and urllib.parse.urlsplit(url).netloc == host:
                tried_auth = True
                auth = self._authenticate(ref, resp_headers.get("WWW-Authenticate", ""), url)
                if auth is None:
                    raise RegistryError(f"{ref}: {what}: the registry requires credentials ({_error_text(body)})",
                                        hint="set TRAINVM_REGISTRY_USER and TRAINVM_REGISTRY_PASSWORD (nvcr.io: user $oauthtoken and an NGC API key)")
                self._tokens[key] = auth
                continue
            if status == 200:
                return body, resp_headers
            text = _error_text(body)
            if status == 404 or (status == 401 and "NAME_UNKNOWN" in text) or "MANIFEST_UNKNOWN" in text or "NAME_UNKNOWN" in text:
                raise ImageNotFoundError(f"{ref}: {what} not found in {ref.registry} ({text or status})")
            if status in (401, 403):
                raise RegistryError(f"{ref}: {what}: access denied ({status} {text})")
            raise RegistryError(f"{ref}: {what}: HTTP {status} from {ref.registry} ({text})")
        raise RegistryError(f"{ref}: {what}: more than {MAX_REDIRECTS} redirects or repeated auth challenges")

    def _authenticate(self, ref: ImageRef, challenge: str, url: str) -> str | None:
        scheme, _, params_text = challenge.strip().partition(" ")
        params = {k.lower(): (q if q is not None and v == "" else v or q) for k, q, v in _CHALLENGE_PARAM.findall(params_text)}
        params = {k: (v or "").replace('\\"', '"') for k, v in params.items()}
        if scheme.lower() == "basic":
            if self.credentials is None:
                return None
            self._check_secure(url, "Basic credentials")
            return "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
        if scheme.lower() != "bearer" or not params.get("realm"):
            raise RegistryError(f"{ref}: unsupported auth challenge {challenge[:200]!r}")
        realm = params["realm"]
        if urllib.parse.urlsplit(realm).scheme not in ("https", "http"):
            raise RegistryError(f"{ref}: token realm {realm!r} is not an http(s) URL")
        query = {k: v for k, v in (("service", params.get("service")),) if v}
        scope = params.get("scope") or f"repository:{ref.repository}:pull"
        token_url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode({**query, "scope": scope})
        hdrs = {}
        if self.credentials is not None:
            self._check_secure(token_url, "credentials")
            hdrs["Authorization"] = "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
        status, _, body = self._request(token_url, hdrs, MAX_TOKEN)
        if status != 200:
            if status in (401, 403):
                return None if self.credentials is None else _raise(RegistryError(f"{ref}: the token service at {realm} refused the credentials ({status})"))
            raise RegistryError(f"{ref}: the token service at {realm} answered HTTP {status} ({_error_text(body)})")
        doc = _json(body, f"{ref}: token response")
        token = doc.get("token") or doc.get("access_token")
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN:
            raise RegistryError(f"{ref}: the token service at {realm} returned no token")
        return f"Bearer {token}"

    def _check_secure(self, url: str, what: str) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "https" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise RegistryError(f"refusing to send {what} over plain http to {parts.netloc}")

    def _request(self, url: str, headers: dict[str, str], limit: int) -> tuple[int, Any, bytes]:
        left = self.deadline - (time.monotonic() - self._started)
        if left <= 0:
            raise RegistryError(f"registry lookup took longer than {self.deadline:g} s (at {_redact(url)})")
        req = urllib.request.Request(url, headers={"User-Agent": "trainvm", **headers}, method="GET")
        opener = urllib.request.build_opener(_NoRedirect, urllib.request.HTTPSHandler(context=self.ssl_context))
        try:
            resp = opener.open(req, timeout=min(self.timeout, left))
        except urllib.error.HTTPError as exc:
            resp = exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryError(f"cannot reach {_redact(url)}: {reason}") from None
        with resp:
            status = resp.status if hasattr(resp, "status") else resp.code
            cap = limit if status == 200 else MAX_ERROR
            length = resp.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > cap:
                raise RegistryError(f"{_redact(url)}: response of {length} bytes is over the {cap}-byte limit")
            body = self._read_body(resp, cap, url)
            if len(body) > cap:
                raise RegistryError(f"{_redact(url)}: response is over the {cap}-byte limit")
            return status, resp.headers, body


    def _read_body(self, resp: Any, cap: int, url: str) -> bytes:
        """At most ``cap + 1`` bytes, in whatever pieces the server sends, checking the overall deadline
        after each: a server that trickles its answer (a byte a second) cannot outlast the deadline by more
        than one read, and each read waits at most what is left of it."""
        sock = _socket_of(resp)
        chunks: list[bytes] = []
        got = 0
        while got <= cap:
            left = self.deadline - (time.monotonic() - self._started)
            if left <= 0:
                raise RegistryError(f"registry lookup took longer than {self.deadline:g} s (reading {_redact(url)})")
            if sock is not None:
                sock.settimeout(min(self.timeout, left))
            try:
                chunk = resp.read1(min(65536, cap + 1 - got))
            except (OSError, TimeoutError) as exc:
                if time.monotonic() - self._started >= self.deadline:
                    raise RegistryError(f"registry lookup took longer than {self.deadline:g} s (reading {_redact(url)})") from None
                raise RegistryError(f"reading {_redact(url)}: {exc}") from None
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


def _socket_of(resp: Any) -> Any:
    """The socket under an http.client response (an HTTPError wraps one), to shorten its timeout; None
    where it cannot be found (the per-request timeout then bounds each read)."""
    inner = getattr(resp, "fp", None)
    for _ in range(3):
        raw = getattr(inner, "raw", None)
        sock = getattr(raw, "_sock", None)
        if sock is not None:
            return sock
        inner = getattr(inner, "fp", None)
    return None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _raise(exc: Exception) -> Any:
    raise exc


def _redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise RegistryError(f"{what} is not JSON") from None
    if not isinstance(doc, dict):
        raise RegistryError(f"{what} is not a JSON object")
    return doc


def _error_text(body: bytes) -> str:
    try:
        doc = json.loads(body)
        errors = doc.get("errors") or []
        return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors if isinstance(e, dict))[:300]
    except (ValueError, AttributeError, UnicodeDecodeError):
        return body[:200].decode("utf-8", "replace").strip()


def _pick_platform(index: dict[str, Any], ref: ImageRef) -> str:
    seen = []
    for entry in index.get("manifests") or []:
        plat = entry.get("platform") or {}
        seen.append(f"{plat.get('os')}/{plat.get('architecture')}")
        if (plat.get("os"), plat.get("architecture")) == PLATFORM and DIGEST_RE.match(str(entry.get("digest", ""))):
            return str(entry["digest"])
    raise RegistryError(f"{ref}: the image has no linux/amd64 manifest (platforms: {', '.join(seen) or 'none'})")


def resolve_image(image: str, **client_options: Any) -> ImageFacts:
    """Tag -> digest and the image facts: the hook ``trainvm lock`` calls. Credentials come from
    TRAINVM_REGISTRY_USER / TRAINVM_REGISTRY_PASSWORD (never from the profile)."""
    return registry_client(**client_options).resolve(image)


def registry_client(**options: Any) -> RegistryClient:

    user, password = settings.text("TRAINVM_REGISTRY_USER") or None, settings.text("TRAINVM_REGISTRY_PASSWORD") or None
    if user and password and "credentials" not in options:
        options["credentials"] = (user, password)
    if "deadline" not in options:
        options["deadline"] = settings.seconds("TRAINVM_REGISTRY_TIMEOUT", 60.0)
        options.setdefault("timeout", min(15.0, options["deadline"]))
    insecure = settings.text("TRAINVM_INSECURE_REGISTRIES")
    if insecure and "insecure" not in options:
        options["insecure"] = tuple(h.strip() for h in insecure.split(",") if h.strip())
    return RegistryClient(**options)
