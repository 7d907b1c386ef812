"""The exact apt version of the NVIDIA driver packages, resolved from the repository's ``Packages`` index.

A profile says ``driver: "550.127.08"``; NVIDIA's repository publishes that driver as
``nvidia-open 550.127.08-1`` (or another Debian revision, per repository: ``-1``, ``-0ubuntu1``,
``-1~deb12u1``...), sometimes more than one revision of the same driver. ``trainvm lock`` reads the
repository's index once (``TRAINVM_DRIVER_INDEX_URL``, else NVIDIA's
``https://developer.download.nvidia.com/compute/cuda/repos/<repo>/x86_64/Packages.gz``) and records,
per package the startup script may install (``nvidia-open``, ``cuda-drivers``, the pinning package,
fabric manager, the compute-only set ``nvidia-driver-cuda`` + ``nvidia-kernel-*-dkms``), the exact version whose upstream part is the profile's driver; of several revisions,
the highest in dpkg's order (what apt would pick). The script then installs ``PKG=<that version>``.

What this does *not* model (apt on the VM still does it): pin priorities and origins, several
repositories at once, the dependency closure (the script's ``driver-pin`` helper pins that), and the
index's signature (Release/InRelease): the lock reads the index over HTTPS and the VM checks
signatures with the keyring when it installs. Architectures other than amd64/all are ignored.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import lzma
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

from debian.deb822 import Packages
from debian.debian_support import Version

from provisioner import settings
from provisioner.errors import TrainvmError
from provisioner.lock.model import LockedDriver
from provisioner.output import notice
from provisioner.providers.poll import poll, transient_http_status

NVIDIA_INDEX = "https://developer.download.nvidia.com/compute/cuda/repos/{repo}/x86_64/Packages.gz"
MAX_INDEX_BYTES = 200_000_000  # NVIDIA's Packages is ~5 MB uncompressed per repository
FETCH_TIMEOUT_S = 60.0
RETRY_DEADLINE_S = 30.0  # transient failures (5xx, 429, resets) are retried this long


class DriverIndexError(TrainvmError):
    """The driver's repository index cannot be read, or does not have the profile's driver: exit 1."""

    exit_code = 1


# ------------------------------------------------------------------ the Packages format and dpkg's order
# python-debian (the library of Debian's own tools, pure Python here: no python3-apt) does both; its order is
# checked against the real ``dpkg --compare-versions`` by tests/lock/test_debian_order.py.
FIELDS = ["Package", "Version", "Architecture"]  # the only fields read: deb822 then skips the rest (faster)


def parse_packages(text: str) -> list[dict[str, str]]:
    """Stanzas of a Debian ``Packages`` index (deb822): field -> value, for the fields in ``FIELDS``. Stanzas
    without a name, or whose version is not a valid Debian version, are left out (apt ignores them too)."""
    out = []
    for para in Packages.iter_paragraphs(text.splitlines(), fields=FIELDS, use_apt_pkg=False):
        st = dict(para)
        if st.get("Package") and st.get("Version") and _valid(st["Version"]):
            out.append(st)
    return out


def _version(v: str) -> Version:
    return Version(v)


def _valid(v: str) -> bool:
    try:
        _version(v)
    except ValueError:
        return False
    return True


def split_version(v: str) -> tuple[int, str, str]:
    """(epoch, upstream, revision) of a Debian version string."""
    ver = _version(v)
    return int(ver.epoch or 0), str(ver.upstream_version), str(ver.debian_revision or "")


def dpkg_compare(a: str, b: str) -> int:
    """<0, 0, >0 as Debian version ``a`` sorts before, with, after ``b`` (dpkg --compare-versions)."""
    va, vb = _version(a), _version(b)
    return (va > vb) - (va < vb)


# ------------------------------------------------------------------ resolution
def driver_packages(driver: str) -> tuple[str, ...]:
    """The names the startup script may install for ``driver``: both kernel-module flavours'
    metapackages (the GPU decides which at render time), the pinning package, fabric manager, and the
    compute-only set (Debian: ``nvidia-driver-cuda`` with ``nvidia-kernel-open-dkms`` or ``nvidia-kernel-dkms``;
    render/context.py ``driver_set``)."""
    branch = int(driver.split(".")[0])
    fm = "nvidia-fabricmanager" if branch >= 580 else f"nvidia-fabricmanager-{branch}"
    return ("nvidia-open", "cuda-drivers", f"nvidia-driver-pinning-{driver}", fm,
            "nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-kernel-dkms")


def resolve_versions(stanzas: list[dict[str, str]], driver: str, names: tuple[str, ...]) -> dict[str, str]:
    """name -> the exact version of ``name`` whose upstream version is ``driver`` (the highest
    revision, as apt picks it); names the index does not have at ``driver`` are left out."""
    best: dict[str, str] = {}
    wanted = set(names)
    for st in stanzas:
        name, version = st["Package"], st["Version"]
        if name not in wanted or st.get("Architecture", "amd64") not in ("amd64", "all"):
            continue
        if split_version(version)[1] != driver:
            continue
        if name not in best or dpkg_compare(version, best[name]) > 0:
            best[name] = version
    return {n: best[n] for n in names if n in best}


def available(stanzas: list[dict[str, str]], name: str, limit: int = 5) -> list[str]:
    """The newest upstream versions of ``name`` in the index (for the error message)."""
    ups = {split_version(st["Version"])[1] for st in stanzas if st["Package"] == name}
    return sorted(ups, key=functools.cmp_to_key(dpkg_compare), reverse=True)[:limit]


def resolve_driver(driver: str, repo: str, text: str, source: str) -> dict[str, str]:
    """The exact versions for ``driver`` in one index; refuses a driver the index does not have."""
    stanzas = parse_packages(text)
    names = driver_packages(driver)
    found = resolve_versions(stanzas, driver, names)
    if not any(n in found for n in names[:2]):
        newest = sorted({v for n in names[:2] for v in available(stanzas, n)}, key=functools.cmp_to_key(dpkg_compare), reverse=True)[:5]
        raise DriverIndexError(
            f"driver {driver} is not in NVIDIA's {repo} repository ({source}): neither nvidia-open nor cuda-drivers has version {driver}-*"
            + (f"; the newest there: {', '.join(newest)}" if newest else ""),
            hint="set stack.driver to a version the repository publishes")
    return found


# ------------------------------------------------------------------ reading the index
def _decompress(data: bytes, name: str) -> bytes:
    if name.endswith(".gz") or data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if name.endswith(".xz") or data[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(data)
    if name.endswith(".bz2") or data[:3] == b"BZh":
        return bz2.decompress(data)
    return data


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, urllib.error.HTTPError):
        return transient_http_status(exc.code)
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, socket.gaierror):
        return False  # no such host (or no DNS at all): asking again does not help
    return isinstance(exc, (urllib.error.URLError, TimeoutError, ConnectionError))


def read_index(location: str) -> str:
    """The text of a Packages index at a URL (https://, http://, file://) or a local path."""
    if "://" not in location or location.startswith("file://"):
        path = Path(location.removeprefix("file://"))
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DriverIndexError(f"{location}: {exc.strerror or exc}") from None
    else:
        if not location.startswith(("https://", "http://")):
            raise DriverIndexError(f"{location}: only https://, http://, file:// or a path can be read")

        def get() -> bytes:
            with urllib.request.urlopen(location, timeout=FETCH_TIMEOUT_S) as resp:  # noqa: S310 - scheme checked above
                body: bytes = resp.read(MAX_INDEX_BYTES + 1)
                return body

        def timed_out(last: BaseException) -> DriverIndexError:
            reason = getattr(last, "reason", None) or last
            return DriverIndexError(f"{location}: {reason} (retried {RETRY_DEADLINE_S:.0f}s)")

        try:  # transient failures: exponential backoff from 1 s, within RETRY_DEADLINE_S
            data = poll(get, deadline=time.monotonic() + RETRY_DEADLINE_S, timed_out=timed_out, transient=_transient,
                        tries=None, backoff=1.0)
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise DriverIndexError(f"{location}: {reason}") from None
    if len(data) > MAX_INDEX_BYTES:
        raise DriverIndexError(f"{location}: over {MAX_INDEX_BYTES} bytes; not a Packages index")
    try:
        return _decompress(data, location).decode("utf-8", "replace")
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise DriverIndexError(f"{location}: cannot decompress: {exc}") from None


def index_location(repo: str) -> str | None:
    """Where the index of NVIDIA's ``repo`` is read from: ``TRAINVM_DRIVER_INDEX_URL`` (``{repo}`` is
    replaced; ``none`` skips the resolution), else NVIDIA's repository."""
    env = settings.text("TRAINVM_DRIVER_INDEX_URL")
    if env.lower() == "none":
        return None
    return (env or NVIDIA_INDEX).replace("{repo}", repo)


def locked_driver(driver: str, repo: str) -> LockedDriver:
    """The driver facts of the lock: exact apt versions from the repository's index when it can be
    read; when it cannot (no network), the pattern only, with the reason. A readable index that does
    not have the driver fails ``lock``."""
    base = {"version": driver, "apt_version": f"{driver}-*", "nvidia_repo": repo}
    where = index_location(repo)
    if where is None:
        return LockedDriver(**base, unresolved="not resolved (TRAINVM_DRIVER_INDEX_URL=none); the VM picks the newest revision of " + driver)
    try:
        text = read_index(where)
    except DriverIndexError as exc:
        notice("warning", f"driver {driver}: exact apt versions not resolved: {exc}; the VM picks the newest revision of {driver} in {repo}")
        return LockedDriver(**base, index=where, unresolved=f"index unreachable when locked: {exc}")
    return LockedDriver(**base, index=where, packages=resolve_driver(driver, repo, text, where))
