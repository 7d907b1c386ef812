"""The ARM emulator stops even while a client holds a connection that never starts its TLS handshake.

Seen in a CI run: an interrupted `trainvm bake` (SIGTERM mid-connect) left such a connection, the emulator's
serving thread sat in ``do_handshake`` inside ``accept()`` forever, and the fixture's ``stop()`` (``shutdown()``
waits for that thread) hung the whole test run."""

from __future__ import annotations

import socket
import threading
import urllib.parse

from tests.emulators.arm import ArmEmulator


def test_stop_returns_while_a_connection_never_handshakes() -> None:
    emu = ArmEmulator().start()
    port = urllib.parse.urlsplit(emu.url).port
    silent = socket.create_connection(("127.0.0.1", port))  # TCP only: no ClientHello ever
    try:
        stopper = threading.Thread(target=emu.stop, daemon=True)
        stopper.start()
        stopper.join(10)
        assert not stopper.is_alive(), "stop() hung behind a connection that never handshakes"
    finally:
        silent.close()
