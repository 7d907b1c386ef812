"""The lock file format (version 1): one JSON document next to the profile (``NAME.lock``).

Keys (docs/locks.md "Lock file format" is the reference):
- ``lock_version``: 1. A reader refuses any other number.
- ``inputs_sha256``: sha256 of the profile facts the lock was made from (``lock_inputs``). When the
  profile's pins, Python, OS, driver or its team sources change, the lock is *stale*.
- ``target``: the VM the closure is for (Python version, uv's ``--python-platform``, OS, glibc).
- ``indexes``: the PyPI index and the CUDA variant's torch index ("" without one).
- ``uv_version``, ``generated_by``.
- ``driver``: the NVIDIA driver version, the apt version pattern (``V-*``), NVIDIA's repository and,
  resolved from that repository's Packages index (``provisioner/lock/driver.py``), the exact apt
  version per package the startup script may install (``packages``), where it was read (``index``),
  or why not (``unresolved``).
- ``images``: per cloud, the OS image reference (GCE project/family, Azure URN, AWS SSM parameter) and,
  when that cloud had credentials at lock time, the exact image (``image``, ``version``, ``ami``), else
  ``unresolved`` (provisioner/lock/images.py).
- ``sources``: per team source the URL, the ref asked for, the commit it resolved to and the
  sha256 of every file used from it.
- ``container``: for a ``stack.container`` profile, the image's facts (digest, manifest and config
  digests, compressed layer size, CUDA/framework env); ``packages`` is then empty.
- ``packages``: every distribution of the closure with its version and the one wheel for the
  target: file name, URL, sha256, size.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provisioner.canonical import canonical_json
from provisioner.errors import InputError
from provisioner.inputfile import read_capped
from provisioner.lock.target import python_platform, torch_label
from provisioner.secrets import find_secret

if TYPE_CHECKING:
    from provisioner.profile.model import Profile

LOCK_VERSION = 1
MAX_LOCK_FILE_BYTES = 2_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LockedWheel(_Strict):
    name: str
    version: str
    filename: str
    url: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int | None = None


class LockedSource(_Strict):
    name: str
    url: str
    ref: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    files: dict[str, str] = Field(default_factory=dict)  # path in the repo -> sha256


class LockedDriver(_Strict):
    version: str
    apt_version: str  # the pattern ``V-*`` the script resolves on the VM when ``packages`` lacks the package
    nvidia_repo: str
    packages: dict[str, str] = Field(default_factory=dict)  # name -> exact apt version (nvidia-open, cuda-drivers...)
    index: str = ""  # the Packages index they were read from
    unresolved: str = ""  # why ``packages`` is empty


class LockTarget(_Strict):
    python: str
    python_platform: str
    os: str
    glibc: str


class LockFile(_Strict):
    lock_version: Literal[1]
    generated_by: str
    inputs_sha256: str
    target: LockTarget
    indexes: dict[str, str]
    uv_version: str
    driver: LockedDriver
    images: dict[str, dict[str, str]]
    sources: tuple[LockedSource, ...] = ()
    packages: tuple[LockedWheel, ...]
    # stack.container: the image's facts as the registry gave them (provisioner/container/image.py ImageFacts:
    # digest, linux/amd64 manifest and config digests, compressed size of the layers, CUDA/framework env)
    container: dict[str, object] | None = None

    def requirements_text(self) -> str:
        """The closure in pip's ``--require-hashes`` format, each wheel by URL, as the VM installs it."""
        lines = [f"# trainvm lock v{self.lock_version} for python {self.target.python} on {self.target.python_platform}"]
        for p in sorted(self.packages, key=lambda w: w.name):
            lines.append(f"{p.name} @ {p.url} \\\n    --hash=sha256:{p.sha256}")
        return "\n".join(lines) + "\n"

    def versions(self) -> dict[str, str]:
        return {p.name: p.version for p in self.packages}

    def total_size(self) -> int:
        return sum(p.size or 0 for p in self.packages)


def dumps(lock: LockFile) -> str:
    return json.dumps(lock.model_dump(mode="json"), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def read_lock(path: Path) -> LockFile:
    """Parse a lock file; unreadable, too big, malformed or another version: exit 2."""
    raw = read_capped(path, MAX_LOCK_FILE_BYTES, "lock file")  # a regular file under the cap, checked before reading
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a trainvm lock file (JSON): {exc}") from None
    what = find_secret(text, guess=False)  # lock files hold digests and commit ids: formats only
    if what:
        raise InputError(f"{path}: looks like it holds {what}; credentials never go into a lock file (it is sent to the VM)")
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a trainvm lock file (JSON): {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a trainvm lock file (a JSON object is expected)")
    if data.get("lock_version") != LOCK_VERSION:
        raise InputError(f"{path}: lock_version {data.get('lock_version')!r} is not supported (this trainvm reads {LOCK_VERSION}); run `trainvm lock` again")
    try:
        return LockFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{path}: {where}: {first['msg']}") from None


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lock_inputs(profile: Profile, sources: Mapping[str, Mapping[str, object]] | None = None) -> dict[str, object]:
    """What a lock is made from: the target and the top-level pins (not env, hardware, data...)."""

    stack = profile.stack
    extra = {"container": stack.container.image} if stack.container is not None else {}
    return {
        "lock_version": LOCK_VERSION,
        "python": stack.python,
        "os": stack.os,
        "platform": python_platform(stack.os),
        "driver": stack.driver,
        "packages": sorted(stack.packages),
        "torch_variant": torch_label(stack.packages),
        "sources": sources or {},
        **extra,
    }


def inputs_sha256(profile: Profile, sources: Mapping[str, Mapping[str, object]] | None = None) -> str:
    return hashlib.sha256(canonical_json(lock_inputs(profile, sources)).encode()).hexdigest()
