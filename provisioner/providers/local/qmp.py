"""QEMU's machine protocol (QMP) over a VM's unix socket: one command per connection, bounded in time.
https://www.qemu.org/docs/master/interop/qmp-spec.html: the server greets, the client sends
``qmp_capabilities`` to leave negotiation mode, then commands; asynchronous events may come between answers."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

from provisioner.errors import ProviderError


def execute(sock_path: Path, command: str, timeout: float = 5.0) -> dict[str, object]:
    """Run ``command`` (``query-status``, ``system_powerdown``, ``quit``) and return its ``return`` value."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(sock_path))
            stream = sock.makefile("rwb")
            _reply(stream)  # the greeting
            for name in ("qmp_capabilities", command):
                stream.write(json.dumps({"execute": name}).encode() + b"\n")
                stream.flush()
                answer = _reply(stream)
            return answer
    except (OSError, ValueError) as exc:
        raise ProviderError(f"QEMU's monitor {sock_path} did not answer {command}: {exc}") from None


def _reply(stream: io.BufferedRWPair) -> dict[str, object]:
    while True:
        line = stream.readline()
        if not line:
            raise ValueError("the monitor closed the connection")
        msg = json.loads(line)
        if "event" in msg:
            continue
        if "error" in msg:
            raise ValueError(str(msg["error"]))
        ret = msg.get("return", msg.get("QMP", {}))
        return ret if isinstance(ret, dict) else {}
