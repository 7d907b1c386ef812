"""Resolve a profile's pins to the full closure for its target VM with ``uv pip compile``.

uv runs on this machine but resolves for the VM: ``--python-version`` (the profile's exact Python),
``--python-platform x86_64-manylinux_2_NN`` (glibc of the OS image), ``--only-binary :all:`` (the
VM never builds from source, so a package without a wheel for the target fails here, named) and
``--generate-hashes``. uv runs on trainvm's own interpreter (``--python``, never downloading
one): ``--python-version`` alone makes uv look for, and fetch, that exact CPython. The input is a throwaway ``pyproject.toml`` whose ``[tool.uv.sources]`` sends
only the pins with a PyTorch local label (``torch==2.4.1+cu124``) to the CUDA variant's index,
declared ``explicit``: nothing else (numpy, jinja2, ...) can come from the PyTorch index; its NVIDIA
wheels are the ``nvidia-*`` packages torch pins, resolved from PyPI where the same files live.
The pylock.toml (PEP 751) uv writes lists every wheel of each version; the lock keeps the one wheel
the target installs (best tag), with its URL, sha256 and size.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from provisioner.errors import TrainvmError
from provisioner.lock.model import LockedWheel
from provisioner.lock.target import best_wheel, python_platform, target_tags, torch_routed
from provisioner.probe.gpu import run_command

UV_TIMEOUT_S = 900.0
_NO_WHEEL = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?) has no (usable wheels|wheels with a matching [^,;]*|wheels? (?:for|compatible)[^,;]*)")
_ALL_NO_WHEEL = re.compile(r"all versions of ([A-Za-z0-9][A-Za-z0-9._-]*) have no (?:usable )?wheels")
_WHEELS_REQUIRED = re.compile(r"Wheels are required for `([^`]+)`")
_NOT_FOUND = re.compile(r"Because ([A-Za-z0-9][A-Za-z0-9._-]*) was not found in the package registry")


class LockError(TrainvmError):
    """The closure cannot be resolved for the target (no wheel, unknown package): exit 1 (an unreachable index: 3)."""

    exit_code = 1


class IndexUnreachableError(LockError):
    """The package index could not be reached (connection refused, no DNS, a timeout, TLS): a network error,
    exit 3 like every other cloud or network failure (docs/spec.md "Exit codes"), not the answer "no"."""

    exit_code = 3


#: uv's words for a transport failure (as opposed to an index that answered "no such package/wheel")
_NETWORK = re.compile(r"tcp connect error|Connection refused|dns error|failed to lookup address|Network is unreachable|"
                      r"operation timed out|timed out|Connection reset|connection closed before message completed|"
                      r"error trying to connect|invalid peer certificate|certificate verify failed", re.I)


@dataclass(frozen=True)
class Resolution:
    packages: tuple[LockedWheel, ...]
    platform: str
    uv_version: str


def uv_bin() -> str:
    """The uv binary shipped by the ``uv`` wheel trainvm depends on."""
    try:
        from uv import find_uv_bin  # lazy: optional (a missing uv is a one-line LockError)
    except ImportError:  # pragma: no cover - uv is a dependency
        raise LockError("the `uv` package is not installed; `pip install uv` (trainvm depends on it)") from None
    try:
        return find_uv_bin()
    except FileNotFoundError:
        raise LockError("the `uv` package is installed but its binary is missing; reinstall it with `pip install --force-reinstall uv`") from None


def uv_version(uv: str | None = None) -> str:
    done = run_command([uv or uv_bin(), "--version"], 30)
    if done.returncode != 0:
        raise LockError(f"`uv --version` failed: {(done.stderr or done.stdout).strip()[:300]}")
    parts = done.stdout.split()
    return parts[1] if len(parts) > 1 else done.stdout.strip()


def _input_pyproject(pins: list[str], torch_index: str) -> str:
    routed = torch_routed(pins) if torch_index else []
    lines = [
        "[project]",
        'name = "trainvm-lock-input"',
        'version = "0"',
        f"dependencies = {json.dumps(sorted(pins))}",
    ]
    if routed:
        lines += ["", "[[tool.uv.index]]", 'name = "pytorch"', f"url = {json.dumps(torch_index)}", "explicit = true", "", "[tool.uv.sources]"]
        lines += [f'{json.dumps(name)} = {{ index = "pytorch" }}' for name in routed]
    return "\n".join(lines) + "\n"


def _explain(stderr: str, python: str, platform: str) -> str:
    target = f"Python {python} on {platform}"
    text = " ".join(stderr.split())
    m = _NO_WHEEL.search(text)
    name = f"{m.group(1)}=={m.group(2)}" if m else None
    if name is None:
        m = _ALL_NO_WHEEL.search(text) or _WHEELS_REQUIRED.search(text)
        name = m.group(1) if m else None
    if name:
        bare = name.split("==")[0]
        parent = (re.search(rf"([A-Za-z0-9][A-Za-z0-9._-]*==\S+) depends on {re.escape(bare)}\b", text)
                  or re.search(rf"all versions of ([A-Za-z0-9][A-Za-z0-9._-]*) depend on {re.escape(bare)}\b", text))
        via = f" (required by {parent.group(1)})" if parent and not parent.group(1).startswith("trainvm-lock-input") else ""
        return (f"{name}{via} has no wheel for the target ({target}); the VM never builds from source. "
                "Pin a version with a wheel or drop the package.")
    m = _NOT_FOUND.search(stderr)
    if m:
        return f"{m.group(1)} was not found on the package index"
    text = " ".join(ln.strip() for ln in stderr.splitlines() if ln.strip())
    return f"uv could not resolve the closure for {target}: {text[:1200]}"


class PylockWheel(TypedDict, total=False):
    """A wheel of uv's ``pylock.toml`` (PEP 751 ``[[packages.wheels]]``): the keys trainvm reads."""

    url: str
    name: str
    hashes: dict[str, str]
    size: int | None


class PylockPackage(TypedDict, total=False):
    name: str
    version: str
    wheels: list[PylockWheel]


class Pylock(TypedDict, total=False):
    """uv's ``pylock.toml`` as ``tomllib`` reads it (the keys trainvm reads)."""

    packages: list[PylockPackage]


def _wheels(doc: Pylock, python: str, os_name: str, platform: str) -> tuple[LockedWheel, ...]:
    tags = target_tags(python, os_name)
    out = []
    for pkg in doc.get("packages", []):
        name, version = str(canonicalize_name(pkg["name"])), str(pkg.get("version", ""))
        wheels = pkg.get("wheels") or []
        names = [unquote(Path(urlparse(w.get("url", "")).path).name) or str(w.get("name", "")) for w in wheels]
        pick = best_wheel(names, tags)
        if pick is None:
            raise LockError(f"{name}=={version} has no wheel for the target (Python {python} on {platform}); the VM never builds from source")
        w = wheels[pick]
        sha = (w.get("hashes") or {}).get("sha256")
        if not sha:
            raise LockError(f"{name}=={version}: the index gave no sha256 for {names[pick]}")
        out.append(LockedWheel(name=name, version=version, filename=names[pick], url=w["url"], sha256=sha, size=w.get("size")))
    return tuple(sorted(out, key=lambda p: p.name))


def resolve(pins: list[str], *, python: str, os_name: str, pypi_index: str, torch_index: str) -> Resolution:
    """Run ``uv pip compile`` for the target; the closure with one hashed wheel per package."""
    if not pins:
        return Resolution((), python_platform(os_name), uv_version())
    uv = uv_bin()
    platform = python_platform(os_name)
    with tempfile.TemporaryDirectory(prefix="trainvm-lock-") as tmp:
        (Path(tmp) / "pyproject.toml").write_text(_input_pyproject(pins, torch_index), encoding="utf-8")
        argv = [uv, "pip", "compile", "pyproject.toml", "--python-version", python, "--python-platform", platform,
                "--generate-hashes", "--only-binary", ":all:", "--format", "pylock.toml", "-o", "pylock.toml",
                "--no-config", "--python", sys.executable, "--no-python-downloads", "--index-url", pypi_index, "--quiet", "--no-progress", "--color", "never"]
        done = run_command(argv, UV_TIMEOUT_S, cwd=tmp, env=_uv_env())
        if done.returncode != 0:
            said = done.stderr or done.stdout or ""
            network = _NETWORK.search(said)
            if network and not _NOT_FOUND.search(said):
                raise IndexUnreachableError(
                    f"cannot reach the package index ({network.group(0)}): {' '.join(said.split())[:600]}",
                    hint=f"check the network and the index URLs (--index-url {pypi_index}, --torch-index-url {torch_index}); "
                         "`trainvm lock` asks them for every package") from None
            raise LockError(_explain(said, python, platform))
        doc = cast(Pylock, tomllib.loads((Path(tmp) / "pylock.toml").read_text(encoding="utf-8")))  # uv wrote it
    return Resolution(_wheels(doc, python, os_name, platform), platform, uv_version(uv))


def _uv_env() -> dict[str, str]:
    # the user's uv/pip settings (indexes, prerelease, exclude-newer, constraints...) must not change
    # what the VM gets; only uv's cache location and transport settings pass through
    keep = {"UV_CACHE_DIR", "UV_NO_CACHE", "UV_HTTP_TIMEOUT", "UV_NATIVE_TLS", "UV_CONCURRENT_DOWNLOADS", "UV_OFFLINE"}
    return {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_")) or k in keep}
