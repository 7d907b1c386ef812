"""This machine's record of the VM names trainvm acted on, so that ``down`` can tell "already gone" (a VM that
existed) from "no VM named X" (a name trainvm never made: a typo, while the real VM keeps billing).

``up`` writes a name before its first create call (and when it finds the VM already there); ``down`` writes it
when it deletes a VM the cloud still had. One JSON file in the state directory (``$XDG_STATE_HOME/trainvm``,
default ``~/.local/state/trainvm``): unlike the cache it is not safe to wipe, but losing it only costs
``down``'s "already gone" for a VM made and deleted earlier (exit 4 then; ``--missing-ok`` accepts that). A
record that cannot be read or written is never an error: the clouds stay the source of truth for what exists
(``status``/``list``), this file only remembers names. It keeps the newest ``KEEP`` names."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

FILE = "vms.json"
#: names kept (the oldest go first): a name is ~40 bytes, so the file stays under ~200 KB
KEEP = 2000


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "trainvm"


def path() -> Path:
    return state_dir() / FILE


def load() -> dict[str, dict[str, object]]:
    """Every recorded name: ``{name: {cloud, by: "up"|"down", at}}``; {} when missing or unreadable."""
    try:
        doc = json.loads(path().read_text())
    except (OSError, ValueError):
        return {}
    vms = doc.get("vms") if isinstance(doc, dict) else None
    return {k: v for k, v in vms.items() if isinstance(v, dict)} if isinstance(vms, dict) else {}


def known(name: str) -> dict[str, object] | None:
    """What this machine recorded of ``name`` (None: trainvm here never created nor deleted a VM of that name)."""
    return load().get(name)


def note(name: str, cloud: str, by: str) -> bool:
    """Record that ``by`` (``up``/``down``) acted on ``name`` on ``cloud``; False when the file cannot be written."""
    vms = load()
    vms.pop(name, None)  # re-inserted last: the newest names survive the trim
    vms[name] = {"cloud": cloud, "by": by, "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    kept = dict(list(vms.items())[-KEEP:])
    target = path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".vms-")
        with os.fdopen(fd, "w") as f:
            json.dump({"version": 1, "vms": kept}, f, indent=1)
        os.replace(tmp, target)
    except OSError:
        return False
    return True
