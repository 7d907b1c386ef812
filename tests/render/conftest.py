"""Fixtures of the render tests. The stub harness (tests/stubharness/harness.py) and the shared
helpers (support.py) are loaded by path and registered as modules, because the test suite runs
with --import-mode=importlib (no package imports between test folders)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_by_path

HERE = Path(__file__).resolve().parent


harness_module = load_by_path("trainvm_stubharness", HERE.parent / "stubharness" / "harness.py")
support = load_by_path("trainvm_render_support", HERE / "support.py")


@pytest.fixture
def make_harness(tmp_path):
    """make_harness(script_text, cloud=..., os_name=..., nvme_disks=..., **STUB_knobs) -> Harness."""
    if not harness_module.Harness.available():
        pytest.skip("bash/flock/coreutils needed for the stub harness")

    def make(script: str, **kw):
        return harness_module.Harness(tmp_path, script, **kw)

    return make
