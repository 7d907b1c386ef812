"""Nothing a test run starts outlives it: processes left behind by this run (issue 36 item 25: a passing `make test`
left two ``azurite-blob`` processes, one per xdist worker, running).

``mark_run()`` (pytest_configure) puts a run id in the environment, which the xdist
workers and every process a test starts inherit (Azurite's ``Popen`` passes ``os.environ`` on). At the end of the
run, ``leftovers()`` lists the live processes that carry this run's id and run something under this repository's
``tests/`` (an emulator: Azurite's node runs tests/emulators/azurite/node_modules/.bin/azurite-blob); tests/conftest.py
stops the shared emulators, then fails the run if any is left, naming it, and ends it. Linux (/proc) only; elsewhere
nothing is listed.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

RUN_ENV = "PYTEST_TRAINVM_RUN"  # not a TRAINVM_* setting (docs/settings.md lists those)
TESTS = str(Path(__file__).resolve().parents[1]) + os.sep


def mark_run(worker: bool) -> None:
    """A new run id in the process that runs the session (a pytest started by a test gets its own); an xdist worker
    keeps the one it inherited."""
    if not worker or RUN_ENV not in os.environ:
        os.environ[RUN_ENV] = uuid.uuid4().hex


def leftovers() -> list[tuple[int, str]]:
    """(pid, command line) of every live process of this run running something under tests/, but this one."""
    run = os.environ.get(RUN_ENV)
    proc = Path("/proc")
    if not run or not proc.is_dir():
        return []
    marker = f"{RUN_ENV}={run}".encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile, or another user's
            continue
        if state != "Z" and TESTS in cmdline:
            found.append((int(entry.name), cmdline))
    return sorted(found)


def end(pids: list[int], grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL what is still there after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p in dict(leftovers()) for p in pids):
            time.sleep(0.1)
