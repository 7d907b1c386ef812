"""The canonical JSON text that trainvm's content hashes are computed over: the profile hash
(profile/loader.py), the lock's ``inputs_sha256`` (lock/model.py) and the launch record (provision/launch.py).
Keys sorted, no spaces, non-ASCII kept as is. One definition, in a leaf, so that every hash of the same data
agrees and neither package has to import the other for it."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
