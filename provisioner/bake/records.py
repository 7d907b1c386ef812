"""The local record of bakes: what ``trainvm bake`` created (or found), with its identity labels, so that ``plan``
can say offline whether ``up`` will boot a baked image (``up`` still confirms it in the cloud: the image may have
been deleted elsewhere). One JSON file in the cache directory (provisioner/cache.py, ``XDG_CACHE_HOME``); a record
that cannot be read or written costs the offline answer, never an error. ``trainvm images delete`` removes an
entry; ``trainvm images`` (which asks the clouds) rewrites a cloud's entries to what the cloud holds."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Required, TypedDict, cast

from provisioner.cache import cache_dir

if TYPE_CHECKING:
    from provisioner.providers.bake_base import BakedImage

FILE = "bakes.json"


class BakeRecord(TypedDict, total=False):
    """One entry of the record as read from the JSON file: ``load`` checks only that ``labels`` is an object, so every
    other value is whatever the file holds (``object``: each reader checks the type it needs)."""

    cloud: object
    name: object
    ref: object
    labels: Required[dict[str, object]]
    created: object
    size_gib: object
    regions: object
    copies: object  # absent in a record written before it was kept


def path() -> Path:
    return cache_dir() / FILE


def load() -> list[BakeRecord]:
    """Every recorded baked image: ``{cloud, name, ref, labels, created, size_gib, regions, copies}``; [] when
    unreadable (``copies``: the stored copies its cloud bills, absent in a record written before it was kept)."""
    try:
        doc = json.loads(path().read_text())
    except (OSError, ValueError):
        return []
    items = doc.get("images") if isinstance(doc, dict) else None
    # JSON object keys are strings, so an object with an object ``labels`` is a BakeRecord (values checked on use)
    return [cast("BakeRecord", i) for i in items or [] if isinstance(i, dict) and isinstance(i.get("labels"), dict)]


def _write(items: list[BakeRecord]) -> bool:
    target = path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".bakes-")
        with os.fdopen(fd, "w") as f:
            json.dump({"version": 1, "images": items}, f, indent=1, sort_keys=True)
        os.replace(tmp, target)
    except OSError:
        return False
    return True


def _entry(image: BakedImage) -> BakeRecord:
    return {"cloud": image.cloud, "name": image.name, "ref": image.ref, "labels": dict(image.labels),
            "created": image.created, "size_gib": image.size_gib, "regions": list(image.regions),
            "copies": image.copies}


def add(image: BakedImage) -> bool:
    """Record ``image`` (a BakedImage), replacing an entry of the same cloud and name."""
    items = [i for i in load() if (i.get("cloud"), i.get("name")) != (image.cloud, image.name)]
    return _write([*items, _entry(image)])


def remove(cloud: str, name: str) -> bool:
    return _write([i for i in load() if (i.get("cloud"), i.get("name")) != (cloud, name)])


def replace_cloud(cloud: str, images: Iterable[BakedImage]) -> bool:
    """``cloud``'s entries become ``images`` (what the cloud lists now)."""
    return _write([*(i for i in load() if i.get("cloud") != cloud), *(_entry(i) for i in images)])
