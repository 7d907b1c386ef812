"""A loopback HTTP server for the price-API fakes (tests/catalog/fake_*.py): each fake is a ``handle(method, path,
query, headers) -> (status, headers, body)`` function; the server records every request and can be told to answer
the next requests of a path with a canned failure (429 with Retry-After, 503)."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], bytes]
Handler = Callable[[str, dict[str, str], dict[str, str]], Answer]


@dataclass
class Request:
    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class PriceServer:
    handle: Handler
    requests: list[Request] = field(default_factory=list)
    #: path prefix -> answers to give before the handler's (consumed in order)
    failures: dict[str, list[Answer]] = field(default_factory=dict)

    def __enter__(self) -> PriceServer:
        server = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                parsed = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append(Request(parsed.path, query, headers))
                answer = None
                for prefix, queue in server.failures.items():
                    if parsed.path.startswith(prefix) and queue:
                        answer = queue.pop(0)
                        break
                status, hdrs, body = answer or server.handle(parsed.path, query, headers)
                self.send_response(status)
                for k, v in hdrs.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def paths(self, prefix: str = "") -> list[str]:
        return [r.path for r in self.requests if r.path.startswith(prefix)]
