"""The tests' TLS servers (the ARM emulator, the registry's token realm) record a refused handshake instead of
printing socketserver's traceback in the middle of a passing `make test` (issue 36 item 25), and still print a real
failure of a handler (tests/emulators/tls_server.py)."""

from __future__ import annotations

import http.server
import ssl
import threading
import urllib.request

import pytest
import trustme

from tests.emulators.tls_server import TlsThreadingHTTPServer


def _distrustful_get(url: str) -> None:
    """A client with the default trust store, which does not hold the tests' trustme CA: it refuses the server."""
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(url, timeout=30, context=ssl.create_default_context())


@pytest.fixture(params=["arm-emulator", "token-realm"])
def tls_httpd(request, tmp_path):
    if request.param == "arm-emulator":
        from tests.emulators.arm import ArmEmulator

        emu = ArmEmulator(ca=trustme.CA()).start()
        yield f"{emu.url}/subscriptions", emu._httpd
        emu.stop()
    else:
        from tests.container.registry_server import TokenServer

        tokens = TokenServer(tmp_path, trustme.CA(), "registry.test", "issuer.test", {})
        yield tokens.realm, tokens.httpd
        tokens.close()


def test_a_refused_handshake_is_recorded_not_printed(tls_httpd, capfd):
    url, httpd = tls_httpd
    _distrustful_get(url)
    assert httpd.handshake_failed.wait(30), "the server never saw the refused handshake"
    assert "unknown ca" in " ".join(httpd.handshake_failures).lower()
    assert "Traceback" not in capfd.readouterr().err


def _server(ca: trustme.CA, handler: type[http.server.BaseHTTPRequestHandler]) -> TlsThreadingHTTPServer:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    httpd = TlsThreadingHTTPServer(("127.0.0.1", 0), handler, ctx)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def _trusting(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ctx


class _Ok(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


class _Broken(_Ok):
    def do_GET(self) -> None:  # noqa: N802
        raise RuntimeError("a bug in the handler")


def test_a_trusting_client_is_served():
    ca = trustme.CA()
    httpd = _server(ca, _Ok)
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{httpd.server_address[1]}/", timeout=30, context=_trusting(ca)) as r:
            assert r.read() == b"ok"
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert httpd.handshake_failures == []


def test_a_failure_after_the_handshake_still_prints_its_traceback(capfd):
    ca = trustme.CA()
    httpd = _server(ca, _Broken)
    try:
        with pytest.raises(OSError):  # the handler died: the connection closes without an answer
            urllib.request.urlopen(f"https://127.0.0.1:{httpd.server_address[1]}/", timeout=30, context=_trusting(ca))
    finally:
        httpd.shutdown()
        httpd.server_close()  # joins the request threads (non-daemon): the traceback is written by now
    err = capfd.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug in the handler" in err
    assert httpd.handshake_failures == []
