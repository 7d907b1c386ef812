"""Team profile sources: ``extends: team:base/torch-2.4-cu124`` resolved through a git repository
declared in the project file ``trainvm.yaml`` (found upward from the profile)::

    sources:
      - name: team
        url: https://git.example.com/ml/trainvm-profiles.git
        ref: v3            # tag, branch or commit

The lock decides which commit is used: once ``trainvm lock`` recorded a source's commit, later runs
read that commit from the cache (no network) even if the tag or branch moved since; a moved ref is
a warning naming both commits, and ``trainvm lock --upgrade`` moves the lock. A locked commit that is gone
upstream (force-pushed away) and not in the cache is refused by plain ``trainvm lock`` (``refresh``), naming
both commits: only ``--upgrade`` re-pins, so two teammates never get two different locks. Frozen mode (``--frozen``
or ``TRAINVM_FROZEN=1``) never fetches and fails when the lock and the cache disagree.
``TRAINVM_PROFILE_PATH`` still wins as a local override, with a warning that it shadowed the source.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provisioner.errors import InputError
from provisioner.lock.gate import frozen_mode
from provisioner.messages import Message
from provisioner.yamlsource import read_yaml, search_path

if TYPE_CHECKING:
    from provisioner.lock.model import LockedSource, LockFile

PROJECT_FILE = "trainvm.yaml"
_NAME = r"[a-z][a-z0-9_-]{0,31}"
_REF = re.compile(rf"^({_NAME}):(.+)$")


class SourceDecl(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built on first use
    name: str = Field(pattern=rf"^{_NAME}$", description="Name used in `extends: NAME:path`.")
    url: str = Field(min_length=1, max_length=2000, pattern=r"^(https://|ssh://|git@|file://|/)[^\s]*$",
                     description="git URL (https://, ssh://, git@host:path, file:// or an absolute path).")
    ref: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/+-]*$", description="Tag, branch or commit.")


class ProjectFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built on first use
    sources: list[SourceDecl] = Field(default_factory=list)


def find_project_file(start: Path) -> Path | None:
    """The nearest ``trainvm.yaml`` in ``start`` or a folder above it. A folder that cannot be searched (no
    permission) is an input error: a project file there could not be seen, so going on would be a guess."""
    for folder in [start.resolve(), *start.resolve().parents]:
        cand = folder / PROJECT_FILE
        try:
            if cand.is_file():
                return cand
        except OSError as exc:  # PermissionError (EACCES); is_file() itself ignores only "not there" errors
            raise InputError(f"{folder}: cannot look for {PROJECT_FILE} in this folder: {exc.strerror or exc}",
                             hint=f"give your user read and search (x) permission on {folder}, or move the profile "
                                  "to a folder you can read") from None
    return None


def read_project_file(path: Path) -> dict[str, SourceDecl]:
    doc = read_yaml(path)
    try:
        project = ProjectFile.model_validate(doc.data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = tuple(err["loc"])
        file, line = doc.where(loc)
        raise InputError(f"{file}:{line}: {'.'.join(map(str, loc))}: {err['msg']}") from None
    names = [s.name for s in project.sources]
    if len(set(names)) != len(names):
        raise InputError(f"{path}: sources: a name is declared twice")
    return {s.name: s for s in project.sources}


@dataclass
class UsedSource:
    name: str
    url: str
    ref: str
    commit: str
    tree: Path
    files: dict[str, str] = field(default_factory=dict)
    shadowed_by: str | None = None

    def record(self) -> dict[str, str]:
        return {"name": self.name, "url": self.url, "ref": self.ref, "commit": self.commit}


class SourceResolver:
    """Resolves ``NAME:path`` refs of ``extends`` and records what was used."""

    def __init__(self, project: Path | None, decls: dict[str, SourceDecl], locked: dict[str, LockedSource], *,
                 upgrade: bool = False, frozen: bool = False, refresh: bool = False) -> None:
        self.project, self.decls, self.locked = project, decls, locked
        self.upgrade, self.frozen, self.refresh = upgrade, frozen, refresh
        self.messages: list[Message] = []
        self._commits: dict[str, str] = {}
        self._used: dict[str, UsedSource] = {}
        self._labels: dict[str, Path] = {}

    @classmethod
    def for_profile(cls, profile: Path, lock: LockFile | None, *, upgrade: bool = False, frozen: bool | None = None, refresh: bool = False) -> SourceResolver:
        project = find_project_file(profile.parent)
        decls = read_project_file(project) if project else {}
        locked = {s.name: s for s in (lock.sources if lock is not None else ())}
        if frozen is None:
            frozen = frozen_mode()
        return cls(project, decls, locked, upgrade=upgrade, frozen=frozen, refresh=refresh)

    @property
    def used(self) -> list[UsedSource]:
        return [self._used[k] for k in sorted(self._used)]

    def resolve(self, ref: str, file: str | None, line: int | None) -> Path | None:
        """The file ``ref`` names through a source, or None when ``ref`` is not ``NAME:path``."""
        m = _REF.match(ref)
        if not m:
            return None
        name, rel = m.group(1), m.group(2)
        decl = self.decls.get(name)
        if decl is None:
            where = f"{self.project}" if self.project else f"no {PROJECT_FILE} found upward from the profile"
            raise LookupError(f"source {name!r} is not declared ({where}); declare it under `sources:` in {PROJECT_FILE}")
        names = [rel] if rel.endswith((".yaml", ".yml")) else [rel + ".yaml", rel + ".yml"]

        for folder in search_path():
            for n in names:
                if (folder / n).is_file():
                    self._shadow(name, decl, folder / n, file, line)
                    return (folder / n).resolve()
        commit = self._commit(decl, file, line)
        from provisioner.lock.git import Checkout  # lazy: startup (git and tarfile: only for a source not on the path)

        tree = Checkout(decl.url).tree(commit)
        self._used.setdefault(name, UsedSource(name, decl.url, decl.ref, commit, tree))
        for n in names:
            cand = (tree / n).resolve()
            if cand.is_file() and cand.is_relative_to(tree.resolve()):
                return cand
        raise LookupError(f"{rel} not found in source {name} ({decl.url} at {decl.ref} = {commit[:12]})")

    def _shadow(self, name: str, decl: SourceDecl, path: Path, file: str | None, line: int | None) -> None:
        self.messages.append(Message("extends", f"{path} on TRAINVM_PROFILE_PATH shadows source {name} ({decl.url} {decl.ref}); the VM gets the local file, not the team's", level="warning", file=file, line=line))
        locked = self.locked.get(name)
        if locked is not None and name not in self._used:
            self._used[name] = UsedSource(name, locked.url, locked.ref, locked.commit, Path(), dict(locked.files), shadowed_by=str(path))

    def _warn(self, text: str, file: str | None, line: int | None) -> None:
        self.messages.append(Message("extends", text, level="warning", file=file, line=line))

    def _commit(self, decl: SourceDecl, file: str | None, line: int | None) -> str:
        if decl.name in self._commits:
            return self._commits[decl.name]
        from provisioner.lock.git import Checkout, SourceError, git  # lazy: startup (only a profile with a team source)

        co = Checkout(decl.url)
        locked = self.locked.get(decl.name)
        pinned = locked.commit if locked is not None and locked.url == decl.url and locked.ref == decl.ref and not self.upgrade else None
        if self.frozen:
            if pinned is None:
                raise SourceError(f"frozen: the lock pins no commit for source {decl.name} ({decl.url} {decl.ref}); run `trainvm lock` without --frozen")
            if not co.has_commit(pinned):
                raise SourceError(f"frozen: source {decl.name}: the cache does not have the locked commit {pinned}; run `trainvm lock` without --frozen to fetch it")
            commit = pinned
        elif pinned is not None and not self.refresh and co.has_commit(pinned):
            commit = pinned  # the lock decides; nothing fetched
        else:
            co.fetch()
            current = co.resolve(decl.ref)
            if current is None:
                raise SourceError(f"source {decl.name}: ref {decl.ref!r} not found in {decl.url}")
            commit = current
            if pinned is not None:
                if not co.has_commit(pinned):
                    git(["-C", str(co.repo), "fetch", "--quiet", "--no-write-fetch-head", "--", decl.url, pinned], check=False)
                if not co.has_commit(pinned):
                    gone = f"source {decl.name}: the locked commit {pinned} is gone from {decl.url} (force-pushed or deleted) and not in the local cache; {decl.ref} is now {current}"
                    if self.refresh:  # plain `trainvm lock`: re-pinning here would give two teammates two different locks
                        where = f" ({file}:{line})" if file and line else ""
                        raise SourceError(f"{gone}{where}; `trainvm lock` keeps the lock's commits and will not re-pin silently",
                                          hint=f"`trainvm lock --upgrade` re-pins {decl.name} to {current} (commit the new lock so the team shares it), "
                                               f"or restore {pinned} upstream (a tag or branch on it)")
                    self._warn(f"{gone}; using {current} (the lock is stale: `trainvm lock --upgrade` re-pins it)", file, line)
                else:
                    if current != pinned:
                        self._warn(f"source {decl.name}: {decl.ref} moved: the lock pins {pinned}, {decl.url} now has {current}; using the locked {pinned} (`trainvm lock --upgrade` moves it)", file, line)
                    commit = pinned
        self._commits[decl.name] = commit
        return commit

    def label(self, path: Path) -> str | None:
        """How messages name a file read from a source's tree: ``team@1c7f5440e031:base/x.yaml``."""
        p = path.resolve()
        for used in self._used.values():
            if used.shadowed_by is None and p.is_relative_to(used.tree.resolve()):
                label = f"{used.name}@{used.commit[:12]}:{p.relative_to(used.tree.resolve()).as_posix()}"
                self._labels[label] = p
                return label
        return None

    def finish(self, files: tuple[str, ...]) -> None:
        """Record the sha256 of every file read from each source's tree."""
        for used in self._used.values():
            if used.shadowed_by is not None:
                continue
            root = used.tree.resolve()
            for f in files:
                p = self._labels.get(f) or Path(f).resolve()
                if p.is_relative_to(root):
                    used.files[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()

    def inputs(self) -> dict[str, dict[str, object]]:
        return sources_inputs(self.used)


def sources_inputs(used: Iterable[UsedSource]) -> dict[str, dict[str, object]]:
    """What the lock's staleness check covers for the sources: URL, ref, commit and file hashes."""
    return {u.name: {"url": u.url, "ref": u.ref, "commit": u.commit, "files": dict(sorted(u.files.items()))} for u in used}
