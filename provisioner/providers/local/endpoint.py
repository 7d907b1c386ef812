"""The local cloud's payload and status endpoint, one HTTP request per run: QEMU's user network starts
``python -m provisioner.providers.local.endpoint VMDIR`` for each connection the guest opens to 10.0.2.100:80
(``guestfwd=...-cmd:``, providers/local/request.py), with the connection as its stdin and stdout. No daemon stays.

Who may read what: the channel is the VM's identity. Only the QEMU of the VM whose folder is VMDIR spawns an
endpoint bound to VMDIR (as only a GCE VM reaches its own metadata server), so the endpoint serves the objects that
VM's record names (``VMDIR/objects``, one key a line, written by ``up``) and nothing else (403), from the
content-addressed store next to the VMs' folders (``VMDIR/../store/KEY``). No token exists, so none travels in user
data; a tampered payload is refused by the bootstrap's sha256 check, as on every cloud.

``PUT /status/KEY`` keeps the body (at most ``MAX_PUT`` bytes) as ``VMDIR/status/KEY``: what the startup script
publishes (``tv_publish``: status, report), read by ``status`` / ``up --wait-ready`` like GCE's guest attributes.

Every request answered is one line of ``VMDIR/access.log`` (UTC time, method, path, status, bytes sent or kept), as
a cloud's storage access log says what a VM read: after ``start`` or a reboot it shows that the payload was not
fetched again. Stdlib only: it runs once per connection."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import BinaryIO

MAX_PUT = 4 * 1024 * 1024
MAX_HEAD = 16 * 1024
STATUS_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
OBJECT_KEY = re.compile(r"payloads/[0-9a-f]{64}\.tar\.gz")
REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 413: "Payload Too Large"}


def allowed(vmdir: Path) -> frozenset[str]:
    """The object keys this VM's record names (``VMDIR/objects``); none when the file is missing."""
    try:
        text = (vmdir / "objects").read_text()
    except OSError:
        return frozenset()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def _answer(out: BinaryIO, code: int, body: bytes = b"", ctype: str = "text/plain") -> None:
    head = (f"HTTP/1.1 {code} {REASONS[code]}\r\nContent-Length: {len(body)}\r\nContent-Type: {ctype}\r\n"
            "Connection: close\r\n\r\n")
    out.write(head.encode() + body)
    out.flush()


def _read_head(rfile: BinaryIO) -> tuple[str, str, dict[str, str]] | None:
    lines: list[str] = []
    size = 0
    while True:
        raw = rfile.readline(MAX_HEAD + 1)
        size += len(raw)
        if not raw or size > MAX_HEAD:
            return None
        line = raw.decode("latin-1").rstrip("\r\n")
        if not line:
            break
        lines.append(line)
    if not lines:
        return None
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers = {}
    for h in lines[1:]:
        k, sep, v = h.partition(":")
        if sep:
            headers[k.strip().lower()] = v.strip()
    return parts[0], parts[1], headers


def serve(vmdir: Path, rfile: BinaryIO, wfile: BinaryIO) -> int:
    """Answer one request read from ``rfile`` on ``wfile`` and log it (``VMDIR/access.log``); the HTTP status
    answered."""
    head = _read_head(rfile)
    method, path = (head[0], head[1].split("?", 1)[0].lstrip("/")) if head else ("-", "-")
    code, size = _serve(vmdir, method, path, head[2], rfile, wfile) if head else _bad(wfile)
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {method} /{path} {code} {size}\n"
    try:
        with (vmdir / "access.log").open("a", encoding="ascii", errors="replace") as log:
            log.write(line)
    except OSError:
        pass  # the VM's folder is being removed (down): nothing to keep the line in
    return code


def _bad(wfile: BinaryIO) -> tuple[int, int]:
    _answer(wfile, 400)
    return 400, 0


def _serve(vmdir: Path, method: str, path: str, headers: dict[str, str], rfile: BinaryIO,
           wfile: BinaryIO) -> tuple[int, int]:
    """(status, bytes sent or kept) of one request for ``path`` (its target without the query and leading /)."""
    if method == "GET" and OBJECT_KEY.fullmatch(path):
        if path not in allowed(vmdir):
            code = 403  # another VM's object, or none this VM's record names: never served, never said to exist
        else:
            try:
                body = (vmdir.parent / "store" / path).read_bytes()
            except OSError:
                code = 404
            else:
                _answer(wfile, 200, body, "application/gzip")
                return 200, len(body)
        _answer(wfile, code)
        return code, 0
    if method == "PUT" and path.startswith("status/") and STATUS_KEY.fullmatch(path[len("status/"):]):
        length = headers.get("content-length", "")
        if not length.isdigit():
            _answer(wfile, 400)
            return 400, 0
        if int(length) > MAX_PUT:
            _answer(wfile, 413)
            return 413, 0
        body = rfile.read(int(length))
        folder = vmdir / "status"
        folder.mkdir(exist_ok=True)
        tmp = folder / f".{path[len('status/'):]}.tmp"
        tmp.write_bytes(body)
        os.replace(tmp, folder / path[len("status/"):])
        _answer(wfile, 204)
        return 204, len(body)
    code = 405 if method not in ("GET", "PUT") else 403 if method == "GET" else 404
    _answer(wfile, code)
    return code, 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m provisioner.providers.local.endpoint VMDIR", file=sys.stderr)
        return 2
    serve(Path(argv[0]), sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
