"""Fixtures of the render tests. The stub harness (tests/stubharness/harness.py) and the shared
helpers (support.py) are loaded by path and registered as modules, because the test suite runs
with --import-mode=importlib (no package imports between test folders)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _register(name: str, path: Path):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


harness_module = _register("trainvm_stubharness", HERE.parent / "stubharness" / "harness.py")
support = _register("trainvm_render_support", HERE / "support.py")


@pytest.fixture
def make_harness(tmp_path):
    """make_harness(script_text, cloud=..., os_name=..., nvme_disks=..., **STUB_knobs) -> Harness."""
    if not harness_module.Harness.available():
        pytest.skip("bash/flock/coreutils needed for the stub harness")

    def make(script: str, **kw):
        return harness_module.Harness(tmp_path, script, **kw)

    return make
