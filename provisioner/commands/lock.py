"""``trainvm lock PROFILE [--upgrade] [--check] [--frozen]``: write, refresh or check NAME.lock."""

from __future__ import annotations

import difflib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner import __version__, settings
from provisioner.compat.facts import load_facts
from provisioner.errors import InputError, TrainvmError
from provisioner.lock import lock_path_for
from provisioner.lock.container import lock_container
from provisioner.lock.driver import locked_driver
from provisioner.lock.images import resolve_images, unresolved_lines
from provisioner.lock.model import LOCK_VERSION, LockedSource, LockFile, LockTarget, dumps, inputs_sha256
from provisioner.lock.resolve import resolve
from provisioner.lock.sources import sources_inputs
from provisioner.lock.target import PYPI_INDEX, TORCH_INDEX, glibc_of, torch_label
from provisioner.output import emit_json, notice, print_messages, stderr_console, stdout_console
from provisioner.profile import load_profile

if TYPE_CHECKING:
    from rich.console import Console

    from provisioner.profile import LoadedProfile
    from provisioner.profile.model import Profile


def build_lock(loaded: LoadedProfile, *, pypi_index: str, torch_index: str | None) -> LockFile:
    """Resolve the loaded profile's closure for its target and return the ``LockFile``."""
    stack = loaded.profile.stack
    if stack.python is None:  # validation allows exactly one of stack.python and stack.container
        raise InputError(f"{loaded.path}: stack.python is not set; a stack.container profile is locked by its image digest")
    label = torch_label(stack.packages)
    torch_url = (torch_index or TORCH_INDEX.format(label=label)) if label else ""
    res = resolve(list(stack.packages), python=stack.python, os_name=stack.os, pypi_index=pypi_index, torch_index=torch_url)
    image = load_facts().os_images[stack.os]
    sources = tuple(LockedSource(name=u.name, url=u.url, ref=u.ref, commit=u.commit, files=dict(sorted(u.files.items()))) for u in loaded.sources)
    return LockFile(
        lock_version=LOCK_VERSION,
        generated_by=f"trainvm {__version__}",
        inputs_sha256=inputs_sha256(loaded.profile, sources_inputs(loaded.sources)),
        target=LockTarget(python=stack.python, python_platform=res.platform, os=stack.os, glibc=glibc_of(stack.os)),
        indexes={"pypi": pypi_index, "torch": torch_url},
        uv_version=res.uv_version,
        driver=locked_driver(stack.driver, image.nvidia_repo),
        images=resolve_images(stack.os),
        sources=sources,
        packages=res.packages,
    )


def profile_diff(old: Profile, new: Profile) -> list[str]:
    """Unified diff of two merged profiles (canonical, defaults applied)."""
    a = json.dumps(old.model_dump(mode="json", exclude={"extends"}), indent=2, sort_keys=True).splitlines()
    b = json.dumps(new.model_dump(mode="json", exclude={"extends"}), indent=2, sort_keys=True).splitlines()
    return list(difflib.unified_diff(a, b, "merged profile (lock)", "merged profile (upgraded)", lineterm="", n=1))


def package_changes(old: LockFile | None, new: LockFile) -> list[str]:
    before = old.versions() if old is not None else {}
    after = new.versions()
    out = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a != b:
            out.append(f"{name}: {a or '-'} -> {b or '-'}")
    return out


def run_lock(path: Path, *, upgrade: bool, check: bool, frozen: bool, index_url: str | None, torch_index_url: str | None, json_out: bool) -> int:
    if check and upgrade:
        raise InputError("--check and --upgrade exclude each other")
    err, out = stderr_console(), stdout_console()
    lock_path = lock_path_for(path)
    if check:
        loaded = load_profile(path, frozen=frozen)
        print_messages(m for m in loaded.warnings if m.level == "warning")
        state = loaded.lock_state
        if json_out:
            emit_json({"profile": str(path), "lock": str(lock_path), "state": state})
        else:
            text = {"none": f"{lock_path} does not exist; run `trainvm lock {path}`",
                    "stale": f"{lock_path} is stale: the profile (pins, Python, OS, driver or team sources) changed since it was written; run `trainvm lock {path}`",
                    "fresh": f"{lock_path} matches the profile"}[state]
            (out if state == "fresh" else err).print(text)
        return 0 if state == "fresh" else 1
    started = time.monotonic()
    old = load_profile(path, frozen=frozen) if upgrade and lock_path.is_file() else None
    loaded = load_profile(path, upgrade=upgrade, frozen=frozen, refresh=not frozen)
    if loaded.profile.stack.container is not None:  # the image's digest is the lock (provisioner/lock/container.py)

        return lock_container(loaded, json_out=json_out)
    if loaded.requirements_path is not None:
        raise InputError(f"{path}: stack.requirements names a hand-written lock; remove it to let `trainvm lock` write {lock_path.name}")
    if not json_out:
        print_messages(m for m in loaded.warnings if m.level == "warning")
    if loaded.lock is not None and loaded.lock_state == "fresh" and not upgrade:
        doc = {"profile": str(path), "lock": str(lock_path), "state": "fresh", "written": False, "packages": len(loaded.lock.packages)}
        emit_json(doc) if json_out else out.print(f"{lock_path} is up to date ({len(loaded.lock.packages)} packages); `--upgrade` re-resolves")
        return 0
    if frozen:
        notice("error", f"frozen: {lock_path} {'is stale' if loaded.lock is not None else 'does not exist'} and --frozen writes nothing")
        return 1

    lock = build_lock(loaded, pypi_index=index_url or settings.text("TRAINVM_INDEX_URL", PYPI_INDEX), torch_index=torch_index_url)
    lock_path.write_text(dumps(lock), encoding="utf-8")
    elapsed = time.monotonic() - started
    diff = profile_diff(old.profile, loaded.profile) if old is not None else []
    changes = package_changes(loaded.lock, lock)
    if json_out:
        emit_json({"profile": str(path), "lock": str(lock_path), "state": "fresh", "written": True, "packages": len(lock.packages),
                   "bytes": lock.total_size(), "sources": [s.model_dump() for s in lock.sources], "profile_diff": diff,
                   "package_changes": changes, "seconds": round(elapsed, 2)})
        return 0
    for line in diff:
        out.print(line, highlight=False)
    for line in changes:
        out.print(f"  {line}", highlight=False)

    for cloud, facts in lock.images.items():
        if not facts.get("unresolved"):
            out.print(f"image on {cloud}: " + ", ".join(f"{k}={v}" for k, v in facts.items()), highlight=False)
    for line in unresolved_lines(lock.images):
        notice("note", line)
    for s in lock.sources:
        out.print(f"source {s.name}: {s.url} {s.ref} = {s.commit} ({len(s.files)} file(s))", highlight=False)
    mib = lock.total_size() / 2**20
    out.print(f"wrote {lock_path}: {len(lock.packages)} packages, {mib:,.1f} MiB of wheels, "
              f"Python {lock.target.python} on {lock.target.python_platform}, uv {lock.uv_version} ({elapsed:.1f}s)", highlight=False)
    return 0


def lock_captured(profile_path: Path, err: Console) -> None:
    """``capture -o FILE`` also writes FILE's lock: the workstation's installed set (every package is
    pinned in the captured profile) resolved for the target. A failure is a warning, not an error:
    the profile is still useful, and `trainvm lock` says the same thing again."""

    if settings.text("TRAINVM_CAPTURE_LOCK", "1") == "0":
        return
    try:
        loaded = load_profile(profile_path, compat=False)
        lock = build_lock(loaded, pypi_index=settings.text("TRAINVM_INDEX_URL", PYPI_INDEX), torch_index=None)
    except TrainvmError as exc:
        notice("warning", f"no lock written for {profile_path}: {exc}")
        return
    lock_path_for(profile_path).write_text(dumps(lock), encoding="utf-8")
    err.print(f"wrote {lock_path_for(profile_path)} ({len(lock.packages)} packages)")
