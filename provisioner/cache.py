"""A small content-addressed cache for parsed data files (compatibility facts, the catalog).

Parsing YAML/CSV costs tens of milliseconds per CLI run; unpickling the result costs about one.
The key is the sha256 of the source files' bytes, of the module that defines the builder, and of
the trainvm version, so editing a data file or the parsing code simply misses the cache. Failures to read or write the cache are ignored:
the cache can only make things faster, never different. ``TRAINVM_NO_CACHE=1`` disables it."""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from provisioner import settings

T = TypeVar("T")
FORMAT = "1"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trainvm"


def cached(namespace: str, sources: Sequence[Path], build: Callable[[], T]) -> T:
    if settings.is_set("TRAINVM_NO_CACHE"):
        return build()
    from provisioner import __version__

    digest = hashlib.sha256(f"{FORMAT}:{__version__}:{namespace}".encode())
    module = sys.modules.get(build.__module__)
    code_file = getattr(module, "__file__", None)
    try:
        for src in [*sources, *([Path(code_file)] if code_file else [])]:
            digest.update(str(src.name).encode())
            digest.update(src.read_bytes())
    except OSError:
        return build()  # let the builder raise its own, better error
    path = cache_dir() / f"{namespace}-{digest.hexdigest()[:32]}.pickle"
    try:
        with path.open("rb") as fh:
            return pickle.load(fh)
    except Exception:  # noqa: BLE001 - missing, truncated or from another Python: rebuild
        pass
    value = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{namespace}-")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - read-only home, full disk: just don't cache
        pass
    return value
