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


BUILT = """
import sys
sys.argv = ['trainvm', 'plan', sys.argv[1]]
from provisioner.cli import main
try:
    main()
except SystemExit:
    pass
from pydantic import BaseModel
def subclasses(c):
    for s in c.__subclasses__():
        yield s
        yield from subclasses(s)
built = sorted({f'{c.__module__}.{c.__name__}' for c in subclasses(BaseModel) if c.__pydantic_complete__})
sys.stderr.write('BUILT ' + ' '.join(built) + '\\n')
"""


def test_plan_builds_only_the_validators_it_uses() -> None:
    """`plan` of a profile without team sources or a container image validates the profile only: the models of
    the sources file and of image facts are defined with ``defer_build`` and built on their first use."""
    from tests.helpers import EXAMPLES

    env = {**__import__("os").environ, "TRAINVM_TODAY": "2026-11-22"}
    # the first `plan` of a session with a cold cache parses and validates the compatibility facts (their pydantic
    # models are built then) and caches them; every later `plan` reads the cache: that warm run is the one measured
    # (alone, this test used to fail whenever no earlier test had warmed the session's cache)
    warm = subprocess.run([sys.executable, "-c", BUILT, str(EXAMPLES[0])], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=120)
    assert "BUILT " in warm.stderr, warm.stderr[-2000:]
    out = subprocess.run([sys.executable, "-c", BUILT, str(EXAMPLES[0])], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=120)
    built = [ln for ln in out.stderr.splitlines() if ln.startswith("BUILT ")][-1].split()[1:]
    assert built and all(name.startswith("provisioner.profile.model.") for name in built), built
