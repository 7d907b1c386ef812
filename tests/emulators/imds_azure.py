"""A loopback stand-in for Azure IMDS's managed-identity token endpoint (``GET /metadata/identity/oauth2/token``),
for the VM-side fetch tests (templates/bootstrap/fetch-azure.sh).

Like IMDS (Microsoft's "How to use managed identities ... to acquire an access token"): plain http; a request
without ``Metadata: true`` -> 400 ``invalid_request``; ``api-version`` and ``resource`` required; answers
``{"access_token", "expires_in", "expires_on", "not_before", "resource", "token_type": "Bearer", ...}``.
The token is JWT-shaped (header.claims.signature, base64url) with the claims Azurite's ``--oauth basic`` checks:
``aud`` (the requested resource), ``iss`` ``https://sts.windows.net/<tenant>/``, ``nbf``/``exp``. Its signature is
random bytes: nothing downstream checks signatures.
``mode``: "ok"; "expired" (exp in the past); "audience" (the token is for ARM, not storage); "no_identity" (400
``invalid_request`` "Identity not found", what IMDS answers on a VM without a managed identity); "busy" (500).
``identities``: the VM's managed identities, {"system": bool, "user": [ARM ids of user-assigned ones]} (default: a
system-assigned one only). A token request names one with ``msi_res_id`` (``client_id``/``object_id``
are not modelled); without a selector IMDS uses the system-assigned identity, else the only user-assigned one, else answers 400 (Microsoft: the
selector is "required, if your VM has multiple user-assigned managed identities"). A named identity the VM does not
carry: 400 "Identity not found". The token's ``xms_mirid`` claim is the identity's id (``tokens_for`` records it).
``tags``: the VM's tags, served at ``/metadata/instance/compute/tagsList`` ([{name, value}], as IMDS 2021-02-01).
Not modelled: rate limits, the token cache, object_id selection, client_id values.
"""
from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TENANT = "72f988bf-0000-4000-8000-000000000001"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(claims: dict) -> str:
    return ".".join((_b64(json.dumps({"typ": "JWT", "alg": "RS256"}).encode()), _b64(json.dumps(claims).encode()),
                     _b64(os.urandom(64))))


class _Handler(BaseHTTPRequestHandler):
    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        imds = self.server.imds
        parts = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        imds.requests.append((self.path, dict(self.headers)))
        if parts.path == "/metadata/instance/compute/tagsList":
            if self.headers.get("Metadata") != "true":
                return self._send(400, {"error": "Bad request. Required metadata header not specified"})
            return self._send(200, [{"name": k, "value": v} for k, v in imds.tags.items()])
        if parts.path == "/metadata/instance/compute/resourceId":  # format=text
            data = imds.resource_id.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        if parts.path != "/metadata/identity/oauth2/token":
            return self._send(404, {"error": "Not found"})
        if self.headers.get("Metadata") != "true":
            return self._send(400, {"error": "invalid_request", "error_description": "Required metadata header not specified"})
        if not q.get("api-version") or not q.get("resource"):
            return self._send(400, {"error": "invalid_request", "error_description": "Required query variable 'resource' or 'api-version' is missing"})
        if imds.mode == "no_identity":
            return self._send(400, {"error": "invalid_request", "error_description": "Identity not found"})
        if imds.mode == "busy":
            return self._send(500, {"error": "unknown_error", "error_description": "Internal error"})
        users, wanted = imds.identities.get("user") or [], q.get("msi_res_id") or q.get("mi_res_id")
        if wanted is not None:
            if wanted.lower() not in [u.lower() for u in users]:
                return self._send(400, {"error": "invalid_request", "error_description": "Identity not found"})
            chosen = wanted
        elif imds.identities.get("system"):
            chosen = "system"
        elif len(users) == 1:
            chosen = users[0]
        else:
            return self._send(400, {"error": "invalid_request", "error_description": "Multiple user assigned "
                                    "identities exist, please specify the clientId / resourceId of the identity in "
                                    "the token request" if users else "Identity not found"})
        now = int(time.time())
        resource = q["resource"]
        aud = "https://management.azure.com/" if imds.mode == "audience" else resource.rstrip("/")
        exp = now - 600 if imds.mode == "expired" else now + 3600
        token = jwt({"aud": aud, "iss": f"https://sts.windows.net/{TENANT}/", "iat": now - 900, "nbf": now - 900,
                     "exp": exp, "oid": imds.marker, "sub": imds.marker, "tid": TENANT, "xms_mirid": chosen})
        imds.tokens.append(token)
        imds.tokens_for.append(chosen)
        self._send(200, {"access_token": token, "client_id": "00000000-0000-0000-0000-0000000000c1",
                         "expires_in": str(exp - now), "expires_on": str(exp), "ext_expires_in": str(exp - now),
                         "not_before": str(now - 900), "resource": resource, "token_type": "Bearer"})


class Imds:
    """``with Imds() as md: md.url`` (``http://127.0.0.1:PORT``, what ``$TV_MD`` names on the VM)."""

    def __init__(self, mode="ok", *, identities=None, tags=None):
        self.mode, self.requests, self.tokens, self.tokens_for = mode, [], [], []
        self.identities = identities if identities is not None else {"system": True, "user": []}
        self.tags = dict(tags or {})
        self.resource_id = ""  # instance/compute/resourceId (format=text)
        self.marker = _b64(os.urandom(12))  # in every token's claims: grep for it where the token must not be
        self._httpd = self._thread = None
        self.url = ""

    def __enter__(self):
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.imds = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
