"""Issue 26: what the console script does for start-up speed must not change what a command does."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO

PROBE = """
import gc, os, sys, time
import provisioner.cli
from provisioner import console

console.GC_PAUSE_SECONDS = 0.2
def command():  # stands in for cli.entry: a command that runs longer than the pause
    before = gc.isenabled()
    time.sleep(1.0)
    sys.stdout.write(f"before={before} after={gc.isenabled()}\\n")
    sys.stdout.flush()
    os._exit(0)
provisioner.cli.entry = command
console.entry()
"""


def test_console_script_collects_garbage_again_after_the_start_up_pause() -> None:
    """The collector is off while the command starts and on again for a command that runs longer (`up`)."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "before=False after=True"
