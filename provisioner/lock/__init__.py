"""``trainvm lock``: the whole Python closure of a profile, for its target VM, pinned with hashes,
plus the team profile sources it extends, pinned by commit. See docs/locks.md "Lock files"."""

from __future__ import annotations

from pathlib import Path


def lock_path_for(profile_path: Path) -> Path:
    """``profiles/bert.yaml`` -> ``profiles/bert.lock`` (next to the profile)."""
    return profile_path.with_suffix(".lock")
