"""Issue 38: the local VM's endpoint (providers/local/endpoint.py) serves a VM the objects its own record names and
nothing else, and keeps what its startup script publishes; one request per run, over an in-memory connection."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from pathlib import Path

from provisioner.providers.local.endpoint import serve
from provisioner.providers.store import payload_key

BODY = b"\x1f\x8b payload"
KEY = payload_key(hashlib.sha256(BODY).hexdigest())
OTHER = payload_key("0" * 64)
REPO = Path(__file__).resolve().parents[2]


def _vm(tmp_path: Path, name: str, objects: list[str]) -> Path:
    store = tmp_path / "store" / "payloads"
    store.mkdir(parents=True, exist_ok=True)
    (tmp_path / "store" / KEY).write_bytes(BODY)
    (tmp_path / "store" / OTHER).write_bytes(b"someone else's")
    vm = tmp_path / name
    vm.mkdir()
    (vm / "objects").write_text("".join(f"{k}\n" for k in objects))
    return vm


def ask(vm: Path, raw: bytes) -> tuple[int, bytes]:
    out = io.BytesIO()
    code = serve(vm, io.BytesIO(raw), out)
    head, _, body = out.getvalue().partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {code} ".encode())
    return code, body


def test_a_vm_reads_its_own_payload_and_nothing_else(tmp_path: Path) -> None:
    vm = _vm(tmp_path, "a", [KEY])
    assert ask(vm, f"GET /{KEY} HTTP/1.1\r\nHost: 10.0.2.100\r\n\r\n".encode()) == (200, BODY)
    # another VM's object exists in the store but this VM's record does not name it
    assert ask(vm, f"GET /{OTHER} HTTP/1.1\r\n\r\n".encode())[0] == 403
    # a VM without a record reads nothing
    assert ask(_vm(tmp_path, "b", []), f"GET /{KEY} HTTP/1.1\r\n\r\n".encode())[0] == 403
    # no path outside the store's key form: never a file of the host
    assert ask(vm, b"GET /../a/objects HTTP/1.1\r\n\r\n")[0] == 403
    assert ask(vm, b"GET /payloads/../../etc/passwd HTTP/1.1\r\n\r\n")[0] == 403


def test_a_named_object_missing_from_the_store_is_404(tmp_path: Path) -> None:
    missing = payload_key("1" * 64)
    vm = _vm(tmp_path, "a", [missing])
    assert ask(vm, f"GET /{missing} HTTP/1.1\r\n\r\n".encode())[0] == 404


def test_the_startup_script_publishes_its_status(tmp_path: Path) -> None:
    vm = _vm(tmp_path, "a", [KEY])
    assert ask(vm, b"PUT /status/status HTTP/1.1\r\nContent-Length: 5\r\n\r\nready")[0] == 204
    assert (vm / "status" / "status").read_bytes() == b"ready"
    assert ask(vm, b"PUT /status/../objects HTTP/1.1\r\nContent-Length: 1\r\n\r\nx")[0] == 404
    assert ask(vm, b"PUT /status/big HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n")[0] == 413
    assert ask(vm, b"DELETE /status/status HTTP/1.1\r\n\r\n")[0] == 405
    assert ask(vm, b"garbage\r\n\r\n")[0] == 400
    assert (vm / "objects").read_text() == f"{KEY}\n"  # nothing the VM sends changes what it may read


def test_qemu_runs_it_as_a_command_on_the_connection(tmp_path: Path) -> None:
    vm = _vm(tmp_path, "a", [KEY])
    out = subprocess.run([sys.executable, "-m", "provisioner.providers.local.endpoint", str(vm)],
                         input=f"GET /{KEY} HTTP/1.1\r\n\r\n".encode(), capture_output=True, cwd=REPO, check=True)
    assert out.stdout.startswith(b"HTTP/1.1 200 OK\r\n") and out.stdout.endswith(BODY)


def test_every_request_is_a_line_of_the_vm_s_access_log(tmp_path: Path) -> None:
    """What the VM read, as a cloud's storage access log says it: after a start the log shows no second GET of the
    payload (tests/vm/locallane.py reads it so)."""
    vm = _vm(tmp_path, "a", [KEY])
    ask(vm, f"GET /{KEY} HTTP/1.1\r\n\r\n".encode())
    ask(vm, f"GET /{OTHER} HTTP/1.1\r\n\r\n".encode())
    ask(vm, b"PUT /status/status HTTP/1.1\r\nContent-Length: 5\r\n\r\nready")
    ask(vm, b"garbage\r\n\r\n")
    lines = [line.split(" ", 1)[1] for line in (vm / "access.log").read_text().splitlines()]
    assert lines == [f"GET /{KEY} 200 {len(BODY)}", f"GET /{OTHER} 403 0", "PUT /status/status 204 5", "- /- 400 0"]
