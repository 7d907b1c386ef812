"""A ThreadingHTTPServer over TLS whose handshake runs in the request's own thread, and whose refused handshakes are
recorded instead of printed.

The listening socket is wrapped with ``do_handshake_on_connect=False`` (a client that connects and never handshakes
would otherwise block the serving thread in ``accept()``, and ``stop()`` with it). The handshake then happens in
the request thread; when it fails (a client that does not trust the test CA sends ``unknown ca``: a test that proves
the client checks certificates; a client interrupted mid-connect), socketserver's ``handle_error`` printed a
traceback to stderr in the middle of a passing ``make test``. Here ``finish_request`` completes the handshake first:
a refused one is recorded in ``handshake_failures`` (tests may assert on it) and the connection closed; everything
after the handshake (the handler itself) still reaches ``handle_error``, so a real failure still prints.
"""

from __future__ import annotations

import ssl
import threading
from http.server import ThreadingHTTPServer
from typing import Any


class TlsThreadingHTTPServer(ThreadingHTTPServer):
    def __init__(self, address: tuple[str, int], handler: Any, context: ssl.SSLContext) -> None:
        super().__init__(address, handler)
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self.handshake_failures: list[str] = []
        self.handshake_failed = threading.Event()

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.do_handshake()
        except OSError as exc:  # ssl.SSLError is an OSError, as is a client resetting the connection mid-handshake
            self.handshake_failures.append(f"{client_address[0]}:{client_address[1]}: {exc}")
            self.handshake_failed.set()
            return
        super().finish_request(request, client_address)
