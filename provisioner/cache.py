"""A small content-addressed cache for parsed data files (compatibility facts, the catalog, profile YAML).

Parsing YAML/CSV costs tens of milliseconds per CLI run; unpickling the result costs about one.
The key is the sha256 of the source files' bytes, of the module that defines the builder, and of
the trainvm version, so editing a data file or the parsing code simply misses the cache. Failures to read or write the cache are ignored:
the cache can only make things faster, never different. ``TRAINVM_NO_CACHE=1`` disables it.
Only values are cached: a builder that raises leaves nothing behind, so an error is found again each run."""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from provisioner import __version__, settings

T = TypeVar("T")
FORMAT = "1"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trainvm"


def _digest(namespace: str, build: Callable[[], object]) -> hashlib._Hash | None:
    """The key's start: format, trainvm version, namespace and the builder's module source (None: unreadable)."""
    digest = hashlib.sha256(f"{FORMAT}:{__version__}:{namespace}".encode())
    module = sys.modules.get(build.__module__)
    code_file = getattr(module, "__file__", None)
    if code_file:
        try:
            digest.update(Path(code_file).read_bytes())
        except OSError:
            return None
    return digest


def cached(namespace: str, sources: Sequence[Path], build: Callable[[], T]) -> T:
    if settings.is_set("TRAINVM_NO_CACHE"):
        return build()
    digest = _digest(namespace, build)
    if digest is None:
        return build()
    try:
        for src in sources:
            digest.update(str(src.name).encode())
            digest.update(src.read_bytes())
    except OSError:
        return build()  # let the builder raise its own, better error
    return _load_or_build(namespace, digest.hexdigest(), build)


def cached_bytes(namespace: str, parts: Sequence[bytes], build: Callable[[], T], keep: int | None = None) -> T:
    """``build()`` cached under the bytes it is a function of (``parts``: e.g. a file's name and content, which
    the caller has already read), plus the builder's module source and the trainvm version. ``keep``: at most
    that many entries of ``namespace`` stay on disk (the oldest go when a new one is written)."""
    if settings.is_set("TRAINVM_NO_CACHE"):
        return build()
    digest = _digest(namespace, build)
    if digest is None:
        return build()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))  # ("ab", "c") and ("a", "bc") are different keys
        digest.update(part)
    return _load_or_build(namespace, digest.hexdigest(), build, keep)


def _load_or_build(namespace: str, hexdigest: str, build: Callable[[], T], keep: int | None = None) -> T:
    path = cache_dir() / f"{namespace}-{hexdigest[:32]}.pickle"
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
        if keep is not None:
            _prune(namespace, keep)
    except Exception:  # noqa: BLE001 - read-only home, full disk: just don't cache
        pass
    return value


def _prune(namespace: str, keep: int) -> None:
    """Remove the oldest entries of ``namespace`` beyond ``keep`` (by modification time)."""
    entries = sorted(cache_dir().glob(f"{namespace}-*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[keep:]:
        old.unlink(missing_ok=True)
