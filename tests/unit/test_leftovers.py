"""Nothing a test run starts outlives it (issue 36 item 25: a passing `make test` left two `azurite-blob` processes,
the shared Azurite of each xdist worker, running): tests/emulators/leftovers.py and tests/conftest.py's
pytest_sessionfinish."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.emulators import azurite_server
from tests.emulators.leftovers import RUN_ENV, TESTS, end, leftovers
from tests.helpers import REPO

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)", f"{TESTS}emulators/a-fake-emulator"]


def test_a_process_of_this_run_under_tests_is_listed_and_ended():
    mine = subprocess.Popen(SLEEPER)
    other_run = subprocess.Popen(SLEEPER, env={**os.environ, RUN_ENV: "another-run"})
    elsewhere = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        pids = [pid for pid, _ in leftovers()]
        assert mine.pid in pids and other_run.pid not in pids and elsewhere.pid not in pids
        end([mine.pid])
        assert mine.wait(30) is not None and mine.pid not in [pid for pid, _ in leftovers()]
    finally:
        for p in (mine, other_run, elsewhere):
            p.kill()
            p.wait(30)


def test_the_shared_azurite_is_stopped_at_the_end_of_the_session():
    if not azurite_server.BIN.exists():
        pytest.skip(f"{azurite_server.BIN} is missing: make install-dev")
    az = azurite_server.shared()
    proc = az.proc
    assert proc is not None and proc.pid in [pid for pid, _ in leftovers()]  # Azurite carries the run's id
    azurite_server.stop_shared()
    assert proc.poll() is not None and proc.pid not in [pid for pid, _ in leftovers()]
    assert azurite_server.shared().proc is not proc  # a later user gets a new one (stopped at the session's end)


def test_a_run_that_leaves_an_emulator_running_fails_naming_it(tmp_path):
    test = tmp_path / "test_leaks.py"
    test.write_text(textwrap.dedent(f"""
        import subprocess
        def test_leaks():
            subprocess.Popen({SLEEPER!r}, start_new_session=True)
        """))
    env = {k: v for k, v in os.environ.items() if k != RUN_ENV and not k.startswith("PYTEST_XDIST")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:randomly",
                          "-p", "no:cacheprovider", "-n", "0", str(test)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 passed" in run.stdout and "left running by this test run (now ended): pid" in run.stdout
    assert "a-fake-emulator" in run.stdout
    pid = int(run.stdout.split("left running by this test run (now ended): pid ")[1].split(":")[0])
    assert not running(pid)


def running(pid: int) -> bool:
    """Alive and not a zombie (an ended process whose parent is gone waits there for init to reap it)."""
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except FileNotFoundError:
        return False
