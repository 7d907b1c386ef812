import importlib.util
import sys
from pathlib import Path

# Make scripts/build_catalog.py importable as `scripts_build` (scripts/ is not a package).
_PATH = Path(__file__).resolve().parents[2] / "scripts" / "build_catalog.py"
if "scripts_build" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("scripts_build", _PATH)
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["scripts_build"] = _mod
    _spec.loader.exec_module(_mod)


import pytest  # noqa: E402


@pytest.fixture
def embedded():
    from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog

    return load_catalog(EMBEDDED_DIR)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """For `catalog refresh` tests: a cache of the test's own (the session's would carry one test's refreshed
    catalog into the next), no TRAINVM_CATALOG, no retry delays, a fixed date."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINVM_CATALOG", raising=False)
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-27")
    return tmp_path / "cache" / "trainvm" / "catalog"
