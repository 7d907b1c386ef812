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

Faults (``fail``): the next requests of a method whose path contains a text are answered with an HTTP error in
Google's JSON error shape, and nothing is stored (``lost=False``); or they are served (an upload is stored) and
their answer is lost: the connection closes with no response (``lost=True``).
"""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any

#: Google's JSON API error body; reasons per status as cloud.google.com/storage/docs/json_api/v1/status-codes lists
#: them (500 backendError "We encountered an internal error. Please try again.", 503 backendError "Service
#: Unavailable"), and each is retryable (cloud.google.com/storage/docs/retry-strategy: 408, 429 and 5xx)
FAULT_REASONS = {500: ("backendError", "We encountered an internal error. Please try again."),
                 503: ("backendError", "Service Unavailable")}


@dataclass
class Fault:
    method: str  # GET, POST...
    path: str  # a text the request's path (with its query) contains, e.g. "/upload/storage/v1/"
    status: int = 503
    times: int = 1  # how many matching requests (-1: all)
    skip: int = 0  # matching requests served normally first
    lost: bool = False  # served, then the connection closed unanswered

    def take(self, method: str, path: str) -> bool:
        if method != self.method or self.path not in path or self.times == 0:
            return False
        if self.skip > 0:
            self.skip -= 1
            return False
        if self.times > 0:
            self.times -= 1
        return True


class GcsEmulator:
    """start()/stop() or a context manager; ``url`` is ``http://127.0.0.1:PORT``; ``wipe()`` forgets everything."""

    def __init__(self) -> None:
        self._server: Any = None
        self.url = ""
        self.faults: list[Fault] = []
        self.faulted: list[tuple[str, str, int]] = []  # (method, path, status or 0 for a lost answer)
        self._lock = threading.Lock()

    def start(self) -> GcsEmulator:
        from gcp_storage_emulator.server import create_server

        logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
        logging.getLogger("api.bucket").setLevel(logging.WARNING)
        logging.getLogger("api.object").setLevel(logging.WARNING)
        self._server = create_server("127.0.0.1", 0, in_memory=True)
        self._server.start()  # the HTTP server is bound (port 0: a free one) before start() returns
        httpd = self._server._api._httpd
        host, port = httpd.server_address[:2]
        self.url = f"http://{host}:{port}"
        httpd.RequestHandlerClass = partial(_faulty_handler(), self, self._server._api._storage)
        return self

    def fail(self, method: str, path: str, *, status: int = 503, times: int = 1, skip: int = 0,
             lost: bool = False) -> None:
        """Answer matching requests with ``status`` (nothing done), or serve them and lose the answer (``lost``)."""
        with self._lock:
            self.faults.append(Fault(method, path, status, times, skip, lost))

    def fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            fault = next((f for f in self.faults if f.take(method, path)), None)
            if fault is not None:
                self.faulted.append((method, path, 0 if fault.lost else fault.status))
            return fault

    def wipe(self) -> None:
        with self._lock:
            self.faults.clear()
            self.faulted.clear()
        self._server.wipe()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> GcsEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _faulty_handler() -> type:
    """gcp-storage-emulator's request handler with the emulator's faults in front of every method."""
    import io

    from gcp_storage_emulator.server import RequestHandler

    class Faulty(RequestHandler):  # type: ignore[misc, valid-type]
        def __init__(self, emu: GcsEmulator, storage: Any, *args: Any) -> None:
            self.emu = emu
            super().__init__(storage, *args)

        def _fault(self, served: Any) -> None:
            fault = self.emu.fault_for(self.command, self.path)
            if fault is None:
                return served(self)
            if fault.lost:  # served into a buffer nobody reads: the client gets no answer
                wfile, self.wfile = self.wfile, io.BytesIO()
                try:
                    served(self)
                finally:
                    self.wfile = wfile
                self.close_connection = True
                return None
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            reason, message = FAULT_REASONS.get(fault.status, ("backendError", "Backend Error"))
            body = json.dumps({"error": {"code": fault.status, "message": message,
                                         "errors": [{"message": message, "domain": "global", "reason": reason}]}}).encode()
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return None

        def do_GET(self) -> None:  # noqa: N802
            self._fault(RequestHandler.do_GET)

        def do_POST(self) -> None:  # noqa: N802
            self._fault(RequestHandler.do_POST)

        def do_PUT(self) -> None:  # noqa: N802
            self._fault(RequestHandler.do_PUT)

        def do_PATCH(self) -> None:  # noqa: N802
            self._fault(RequestHandler.do_PATCH)

        def do_DELETE(self) -> None:  # noqa: N802
            self._fault(RequestHandler.do_DELETE)

    return Faulty


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
