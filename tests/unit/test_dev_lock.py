"""The development and test environment is pinned (issue 36 item 27): requirements-dev.lock (trainvm's dependencies
and the dev extras) and requirements.lock (trainvm's dependencies alone), exact versions with hashes, made by
`make lock-deps` from pyproject.toml and installed by `make install-dev` / `make install` with pip's
``--require-hashes``. These checks need no network: they compare the locks with pyproject.toml and with the
installed distributions' own metadata."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.helpers import REPO

ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?:\s*;\s*(.+?))?\s*\\?$")


def parse_lock(text: str) -> dict[str, list[tuple[Version, str | None, int]]]:
    """name -> [(version, marker, hashes)] of a `uv pip compile --universal --generate-hashes` file (a name can
    appear once per marker, e.g. a version for Python < 3.12 and another for >= 3.12)."""
    out: dict[str, list[tuple[Version, str | None, int]]] = {}
    current: list[tuple[Version, str | None, int]] | None = None
    for line in text.splitlines():
        if m := ENTRY.match(line):
            current = out.setdefault(canonicalize_name(m.group(1)), [])
            current.append((Version(m.group(2)), m.group(3), 0))
        elif line.strip().startswith("--hash=sha256:") and current:
            version, marker, hashes = current[-1]
            current[-1] = (version, marker, hashes + 1)
        elif line.strip() and not line.lstrip().startswith("#"):
            raise AssertionError(f"unexpected line in a lock file: {line!r}")
    return out


def lock(name: str) -> dict[str, list[tuple[Version, str | None, int]]]:
    return parse_lock((REPO / name).read_text(encoding="utf-8"))


def project_requirements(text: str, extras: tuple[str, ...]) -> list[Requirement]:
    project = tomllib.loads(text)["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def unlocked(pyproject: str, locked: dict[str, list[tuple[Version, str | None, int]]], extras: tuple[str, ...]) -> list[str]:
    """pyproject.toml's requirements that ``locked`` does not pin at a version they allow (on any marker)."""
    problems = []
    for req in project_requirements(pyproject, extras):
        entries = locked.get(canonicalize_name(req.name))
        if not entries:
            problems.append(f"{req}: not in the lock")
        problems += [f"{req}: the lock pins {v}" for v, _, _ in entries or () if not req.specifier.contains(v, prereleases=True)]
    return problems


LOCKS = {"requirements-dev.lock": ("dev",), "requirements.lock": ()}


@pytest.mark.parametrize("name", LOCKS)
def test_every_requirement_of_pyproject_is_pinned_with_hashes(name):
    locked = lock(name)
    assert unlocked((REPO / "pyproject.toml").read_text(encoding="utf-8"), locked, LOCKS[name]) == [], \
        "pyproject.toml changed without `make lock-deps`"
    assert [n for n, entries in locked.items() if any(h == 0 for _, _, h in entries)] == []


def test_a_dependency_added_or_narrowed_without_relocking_is_caught():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    locked = lock("requirements-dev.lock")
    added = text.replace('  "uv>=0.4.20",\n', '  "uv>=0.4.20",\n  "requests-toolbelt>=1",\n')
    assert added != text and unlocked(added, locked, ("dev",)) == ["requests-toolbelt>=1: not in the lock"]
    moto = next(v for v, _, _ in locked["moto"])
    narrowed = re.sub(r'"moto\[server\][^"]*"', f'"moto[server]>{moto}"', text)
    assert narrowed != text and unlocked(narrowed, locked, ("dev",)) == [f"moto[server]>{moto}: the lock pins {moto}"]


def test_the_runtime_lock_pins_what_the_dev_lock_pins():
    dev, runtime = lock("requirements-dev.lock"), lock("requirements.lock")
    assert {n: [e[:2] for e in v] for n, v in runtime.items()} == {n: [e[:2] for e in dev[n]] for n in runtime if n in dev}


def test_this_environment_is_the_locked_one_closure_and_extras_included():
    """From pyproject.toml's requirements (the dev extra included) through every installed distribution's own
    requirements (with the extras asked for): each one reached is installed at the version the lock pins for this
    interpreter and platform. Fails when the lock misses a dependency of a dependency (an extra added to a
    requirement without re-locking) or when .venv was not installed from the lock (`make install-dev`)."""
    locked = lock("requirements-dev.lock")

    def applies(marker: str | None, extra: str = "") -> bool:
        return marker is None or Requirement(f"x; {marker}").marker.evaluate({**default_environment(), "extra": extra})  # type: ignore[union-attr]

    problems: list[str] = []
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(r, "dev") for r in project_requirements((REPO / "pyproject.toml").read_text(encoding="utf-8"), ("dev",))]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**default_environment(), "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        pinned = [v for v, marker, _ in locked.get(name, ()) if applies(marker)]
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} (for {req}): not installed; the lock pins {[str(v) for v in pinned] or 'nothing'}")
            continue
        if pinned != [Version(dist.version)]:
            problems.append(f"{name} (for {req}): installed {dist.version}, the lock pins {[str(v) for v in pinned] or 'nothing'}")
        for sub in dist.requires or ():
            r = Requirement(sub)
            todo += [(r, e) for e in (req.extras or {""})]
    assert problems == [], "run `make install-dev` (a stale .venv) or `make lock-deps` (a stale lock)"
    assert ("moto", frozenset({"server"})) in seen and ("flask", frozenset()) in seen  # moto's server extra followed


def test_the_install_targets_install_from_the_locks_with_hashes():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for name in LOCKS:
        assert f"install --require-hashes -r {name}" in makefile
    assert "install -e '.[dev]'" not in makefile and "install --no-deps --no-build-isolation -e ." in makefile


def test_the_build_backend_is_pinned_with_hashes_and_installed_without_isolation():
    """pyproject.toml's [build-system] requires (hatchling) and what hatchling's editable build asks for (editables)
    come from requirements-build.lock; `make install` builds trainvm with --no-build-isolation from them, so the
    install never fetches an unpinned build backend."""
    locked = lock("requirements-build.lock")
    build = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    for req in [Requirement(r) for r in build] + [Requirement("editables")]:
        entries = locked.get(canonicalize_name(req.name))
        assert entries and all(req.specifier.contains(v, prereleases=True) for v, _, _ in entries), str(req)
    assert [n for n, entries in locked.items() if any(h == 0 for _, _, h in entries)] == []
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "install --require-hashes -r requirements.lock -r requirements-build.lock" in make
