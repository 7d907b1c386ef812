"""What ``plan`` and ``up`` say about a profile's lock: a warning without one, a refusal when stale;
frozen (``--frozen`` or ``TRAINVM_FROZEN=1``, for CI) also refuses a profile without a lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner import settings
from provisioner.errors import TrainvmError
from provisioner.lock import lock_path_for

if TYPE_CHECKING:
    from provisioner.profile import LoadedProfile


class StaleLockError(TrainvmError):
    exit_code = 1


def frozen_mode(flag: bool = False) -> bool:
    """``--frozen`` on the command line, or ``TRAINVM_FROZEN`` set to anything but "" or "0"."""
    return flag or settings.flag("TRAINVM_FROZEN")


def lock_gate(loaded: LoadedProfile, *, frozen: bool = False) -> list[str]:
    """Warnings to show; raises ``StaleLockError`` when NAME.lock no longer matches the profile, or
    (frozen) when there is none."""
    import shlex  # lazy: startup

    if loaded.lock_state == "stale":
        why = "".join(f"\n  {m.render()}" for m in loaded.warnings if m.path == "extends")  # a source that moved under the lock
        raise StaleLockError(
            f"{loaded.lock_path} is stale: the profile's pins, Python, OS, driver or team sources changed since it was written{why}",
            hint=f"run `trainvm lock {loaded.path}` (or `--upgrade` to move everything to the newest versions)",
        )
    if loaded.lock_state == "none" and loaded.requirements_path is None and frozen_mode(frozen):
        raise StaleLockError(
            f"frozen: {loaded.path} has no lock file {lock_path_for(loaded.path).name}; --frozen (TRAINVM_FROZEN) uses only what a lock pins",
            hint=f"run `trainvm lock {loaded.path}` and commit {lock_path_for(loaded.path).name} next to the profile",
        )
    out = [f"{s.shadowed_by} (TRAINVM_PROFILE_PATH) shadows team source {s.name} at {s.commit[:12]}" for s in loaded.sources if s.shadowed_by]
    if loaded.lock_state == "none" and loaded.requirements_path is None and loaded.profile.stack.packages:
        out.append(f"no lock file {lock_path_for(loaded.path).name} next to the profile: only the top-level pins are exact, their "
                   f"dependencies float from one VM to the next; run `trainvm lock {shlex.quote(str(loaded.path))}`")
    return out
