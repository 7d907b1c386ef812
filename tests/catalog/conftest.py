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
