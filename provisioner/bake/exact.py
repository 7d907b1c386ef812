"""Whether a profile can boot (or bake) a baked image: its stack must be exact (docs/bake.md). Pure and light: ``plan``
asks it for every profile (bake/offline.py), so it imports nothing of the bake machinery (bake/run.py, the planner,
the providers' base), which ``plan`` then never loads for a profile with nothing to look up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.errors import InputError

if TYPE_CHECKING:
    from provisioner.profile import LoadedProfile


def require_exact(loaded: LoadedProfile) -> None:
    """A bake must be exact: the profile needs a fresh lock (or hashed requirements) and a Python stack."""
    path = loaded.path
    if loaded.profile.stack.container is not None:
        raise InputError(f"{path}: stack.container: a container stack cannot be baked yet (docs/bake.md)")
    if loaded.requirements_path is None and loaded.lock is None:
        raise InputError(f"{path}: the profile has no lock, and a bake must be exact; run `trainvm lock {path}` first")
    if loaded.lock is not None and loaded.lock_state != "fresh":
        raise InputError(f"{path}: {loaded.lock_path} is stale (the profile changed since it was written); run `trainvm lock {path}`")


def exact_reason(loaded: LoadedProfile) -> str | None:
    """Why ``loaded`` cannot boot (or bake) a baked image: None when its stack is exact (docs/bake.md)."""
    try:
        require_exact(loaded)
    except InputError as exc:
        text = str(exc).split(": ", 1)[-1]  # without the path, the hint and require_exact's own "must be exact"
        return text.split(";")[0].removesuffix(", and a bake must be exact")
    return None
