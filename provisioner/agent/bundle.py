"""The files the VM needs to run the agent: ``bundle_files()`` -> {relative path: content}.

``provisioner/__init__.py``, ``provisioner/agent/*.py``, ``provisioner/secrets.py`` (the one redactor: the
helper's console filter imports it from here) and ``packaging`` (every file of the installed
distribution's ``packaging/`` package, and its licence files beside them), in sorted order: the same
installation gives the same bytes. The payload puts them under ``agent/``; the VM runs
``PYTHONPATH=<that folder> python3 -m provisioner.agent ...``.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Dict

HERE = Path(__file__).resolve().parent


def _packaging_files() -> Dict[str, bytes]:
    dist = metadata.distribution("packaging")
    out: Dict[str, bytes] = {}
    for f in dist.files or ():
        parts = Path(str(f)).parts
        if "__pycache__" in parts or str(f).endswith(".pyc"):
            continue
        if parts[0] == "packaging":
            out["/".join(parts)] = Path(str(dist.locate_file(f))).read_bytes()
        elif parts[0].endswith(".dist-info") and parts[-1].startswith(("LICENSE", "COPYING")):
            out["packaging/" + parts[-1]] = Path(str(dist.locate_file(f))).read_bytes()  # its licence travels with it
    if "packaging/__init__.py" not in out:
        raise RuntimeError("the installed packaging distribution lists no packaging/__init__.py; cannot bundle the agent")
    return out


def bundle_files() -> Dict[str, bytes]:
    """Relative path -> content of every file the agent needs on the VM (sorted, deterministic)."""
    files = {"provisioner/__init__.py": (HERE.parent / "__init__.py").read_bytes()}
    files.update({"provisioner/agent/%s" % p.name: p.read_bytes() for p in sorted(HERE.glob("*.py"))})
    files["provisioner/secrets.py"] = (HERE.parent / "secrets.py").read_bytes()  # stdlib only, Python >= 3.8
    files.update(_packaging_files())
    return dict(sorted(files.items()))
