"""A real GCS emulator on loopback for the payload-store and fetch tests: gcp-storage-emulator (PyPI, pure Python,
in-process, plain http on 127.0.0.1, a free port). The real google-cloud-storage SDK talks to it through
``client_options={"api_endpoint": emu.url}``; curl GETs its JSON API media URLs.

What it models: the JSON API for buckets (insert, get, patch, delete, 409 for an existing name), objects
(multipart and resumable uploads, get, ``alt=media`` downloads, list with a prefix, delete, generations, MD5 and
CRC32C), and the bucket IAM policy (get/set, stored as sent).

What it does NOT model (so no test here can show it; the real service must):
- authentication and authorization: no token is checked (any or no ``Authorization`` header is served), IAM
  policies are stored but never enforced, no scopes, no org policies (public access prevention, uniform access);
- a bucket insert's metadata: it drops ``location``, ``labels``, ``lifecycle`` and ``iamConfiguration`` from the
  insert body and answers location ``US`` (real GCS stores them); a PATCH keeps them, so the store's convergence
  patch is what puts them there here;
- lifecycle rules are stored, never run; an IAM policy's ``etag`` is not checked (no 412 on a stale policy);
- global bucket names: a name is only taken inside this emulator.
"""
from __future__ import annotations

import logging


class GcsEmulator:
    """start()/stop() or a context manager; ``url`` is ``http://127.0.0.1:PORT``; ``wipe()`` forgets everything."""

    def __init__(self) -> None:
        self._server = None
        self.url = ""

    def start(self) -> GcsEmulator:
        from gcp_storage_emulator.server import create_server

        logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
        logging.getLogger("api.bucket").setLevel(logging.WARNING)
        logging.getLogger("api.object").setLevel(logging.WARNING)
        self._server = create_server("127.0.0.1", 0, in_memory=True)
        self._server.start()  # the HTTP server is bound (port 0: a free one) before start() returns
        host, port = self._server._api._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"
        return self

    def wipe(self) -> None:
        self._server.wipe()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> GcsEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_SHARED: GcsEmulator | None = None


def shared() -> GcsEmulator:
    """One emulator per test process, started on first use and wiped by each user (the CLI end-to-end tests:
    ``up`` stages its payload in GCS)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = GcsEmulator().start()
    _SHARED.wipe()
    return _SHARED


def stop_shared() -> None:
    """Stop the per-process emulator (its server thread is not a daemon: left running, it holds the interpreter at
    exit, so a plain `pytest FILE` finished its tests and then never returned)."""
    global _SHARED
    if _SHARED is not None:
        _SHARED.stop()
        _SHARED = None
