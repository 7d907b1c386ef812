"""The exact apt version of the NVIDIA driver, resolved from a repository's Packages index.

Real metadata: tests/fixtures/nvidia-repo/debian12-driver.Packages is Debian's own published index of
the driver packaging (src:nvidia-graphics-drivers 535.309.01-0+deb12u1, see its NOTICE). NVIDIA's
repository (nvidia-open, cuda-drivers, pinning packages) cannot be reached from here: those names
come from tests/aptsim/fakerepo.py's model, on top of the real packaging renumbered."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.lock.driver import dpkg_compare, parse_packages, resolve_driver, resolve_versions
from provisioner.lock.model import read_lock

REAL = Path(__file__).parents[1] / "fixtures" / "nvidia-repo" / "debian12-driver.Packages"
PAIRS = [
    ("1.0", "1.0"), ("1.0-1", "1.0-2"), ("1.0-10", "1.0-9"), ("1.0~rc1-1", "1.0-1"), ("1:0.9", "2.0"),
    ("535.309.01-0+deb12u1", "535.309.01-1"), ("550.127.08-0ubuntu1", "550.127.08-1"), ("1.0a-1", "1.0-1"),
    ("1.0+b1", "1.0"), ("2.0-1~deb12u1", "2.0-1"), ("1.01", "1.1"), ("1.0-1ubuntu0.22.04.1", "1.0-1ubuntu0.22.04.10"),
    ("535.309.01-0+deb12u1", "535.309.01-0+deb12u1~bpo"), ("10.0", "9.99"), ("1.0.", "1.0"),
]


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg is not on this machine")
@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_version_order_is_dpkgs(a: str, b: str) -> None:
    def dpkg(op: str) -> bool:
        return subprocess.run(["dpkg", "--compare-versions", a, op, b], check=False).returncode == 0

    mine = dpkg_compare(a, b)
    assert (mine < 0, mine == 0, mine > 0) == (dpkg("lt"), dpkg("eq"), dpkg("gt"))


def test_the_real_debian_index_parses_and_resolves_exactly() -> None:
    text = REAL.read_text(encoding="utf-8")
    stanzas = parse_packages(text)
    assert len(stanzas) == text.count("\nPackage: ") + text.startswith("Package: ")
    got = resolve_versions(stanzas, "535.309.01", ("nvidia-driver", "libcuda1", "nvidia-kernel-dkms", "nvidia-open"))
    assert got == {"nvidia-driver": "535.309.01-0+deb12u1", "libcuda1": "535.309.01-0+deb12u1",
                   "nvidia-kernel-dkms": "535.309.01-0+deb12u1"}  # Debian publishes no nvidia-open
    assert resolve_versions(stanzas, "535.309", ("nvidia-driver",)) == {}  # the whole upstream version, not a prefix


def test_a_driver_the_index_lacks_is_refused_with_what_it_has() -> None:
    from provisioner.lock.driver import DriverIndexError

    with pytest.raises(DriverIndexError) as exc:
        resolve_driver("535.309.01", "debian12", REAL.read_text(encoding="utf-8"), str(REAL))
    assert "neither nvidia-open nor cuda-drivers" in str(exc.value)


def test_lock_records_the_exact_versions_and_the_highest_revision(write_yaml, lock_cli, profile_doc, driver_index) -> None:
    path = write_yaml(profile_doc(["alpha==1.0"]))
    assert lock_cli(path).code == 0
    d = read_lock(path.with_suffix(".lock")).driver
    # nvidia-open was published twice at 550.127.05 (-1, -2): apt would take -2, so does the lock
    assert d.packages == {"nvidia-open": "550.127.05-2", "cuda-drivers": "550.127.05-1", "nvidia-fabricmanager-550": "550.127.05-1",
                          # the compute-only set the debian-12 script installs (render/context.py driver_set)
                          "nvidia-driver-cuda": "550.127.05-1", "nvidia-kernel-open-dkms": "550.127.05-1",
                          "nvidia-kernel-dkms": "550.127.05-1"}
    assert d.index == str(driver_index) and not d.unresolved and d.apt_version == "550.127.05-*"


@pytest.mark.parametrize(("os_name", "locked_line"), [
    ("ubuntu-22.04", "TV_DRIVER_PKGVERS=( '550.127.05-2' )"),  # T4: open modules -> nvidia-open
    ("debian-12", "TV_DRIVER_PKGVERS=( '550.127.05-1' '550.127.05-1' )"),  # nvidia-driver-cuda + nvidia-kernel-open-dkms
])
def test_the_script_installs_exactly_the_locked_version(write_yaml, lock_cli, profile_doc, os_name, locked_line) -> None:
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    def render_gcp(loaded):
        return render_script(loaded, RenderTarget("gcp", "n1-standard-8", "T4", 1, "us-central1", "us-central1-a")).startup_sh

    path = write_yaml(profile_doc(["alpha==1.0"], os=os_name))
    unlocked = render_gcp(load_profile(path))
    assert re.search(r"^TV_DRIVER_PKGVERS=\(( '')+ \)$", unlocked, re.M)
    assert lock_cli(path).code == 0
    locked = render_gcp(load_profile(path))
    assert locked_line in locked.splitlines()


def _driver_version_program(script: str) -> str:
    """The rendered script's TV_DRIVER* lines and its version helpers, then: the version of TV_DRIVER_PKGS[0]."""
    lines = [ln for ln in script.splitlines() if re.match(r"TV_DRIVER(_PKGS|_PKGVERS)?=", ln)]
    funcs = []
    for name in ("tv_pkgver", "tv_driver_version"):
        body = script[script.index(f"{name}() {{"):]
        funcs.append(body[:body.index("\n}\n") + 3])
    return "set -Eeuo pipefail\n" + "\n".join(lines + funcs) + '\ntv_driver_version "${TV_DRIVER_PKGS[0]}" "${TV_DRIVER_PKGVERS[0]}"\n'


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="apt-cache is not on this machine")
def test_the_locked_line_picks_the_locked_revision_with_real_apt(write_yaml, lock_cli, profile_doc, tmp_path) -> None:
    """Real apt-cache over a repository with nvidia-open 550.127.05-1 and -2: without a lock the script
    takes the newest (-2); with a lock that recorded -1 (locked before -2 was published) it takes -1."""
    import json

    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    fakerepo = sys.modules["trainvm_fakerepo_lock"]
    world = fakerepo.AptWorld(tmp_path / "apt", ["550.127.05"])
    first = next(st for st in world.nvidia if st["Package"] == "nvidia-open")
    world.nvidia.append({**first, "Version": "550.127.05-2"})
    fakerepo.write_flat_repo(world.tmp / "repo/nvidia", world.nvidia, "NVIDIA", "NVIDIA CUDA")
    world.apt("update")
    target = RenderTarget("gcp", "n1-standard-8", "T4", 1, "us-central1", "us-central1-a")
    path = write_yaml(profile_doc(["alpha==1.0"]))
    unlocked = render_script(load_profile(path), target).startup_sh
    assert lock_cli(path).code == 0
    doc = json.loads(path.with_suffix(".lock").read_text())
    doc["driver"]["packages"]["nvidia-open"] = "550.127.05-1"
    path.with_suffix(".lock").write_text(json.dumps(doc))
    locked = render_script(load_profile(path), target).startup_sh

    def run(script: str) -> str:
        done = subprocess.run(["bash", "-c", _driver_version_program(script)], env=world.env, capture_output=True,
                              text=True, timeout=60, check=True)
        return done.stdout.strip()

    assert run(unlocked) == "550.127.05-2"
    assert run(locked) == "550.127.05-1"
    doc["driver"]["packages"]["nvidia-open"] = "550.127.05-3"  # a locked version the repository no longer has
    path.with_suffix(".lock").write_text(json.dumps(doc))
    assert run(render_script(load_profile(path), target).startup_sh) == ""  # the script's -z check fails it


def test_an_unreachable_index_leaves_the_driver_unresolved_and_says_so(write_yaml, lock_cli, profile_doc, monkeypatch) -> None:
    monkeypatch.setattr("provisioner.lock.driver.RETRY_DEADLINE_S", 1.0)
    monkeypatch.setenv("TRAINVM_DRIVER_INDEX_URL", "http://127.0.0.1:9/{repo}/Packages.gz")  # nothing listens on port 9
    path = write_yaml(profile_doc(["alpha==1.0"]))
    r = lock_cli(path)
    assert r.code == 0 and "exact apt versions not resolved" in r.err
    d = read_lock(path.with_suffix(".lock")).driver
    assert d.packages == {} and "ubuntu2204/Packages.gz" in d.index and "unreachable" in d.unresolved
    assert "Connection refused" in d.unresolved


def test_an_index_without_the_driver_fails_lock(write_yaml, lock_cli, profile_doc, make_driver_index, monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_DRIVER_INDEX_URL", str(make_driver_index(["560.35.03"])))
    path = write_yaml(profile_doc(["alpha==1.0"]))
    r = lock_cli(path)
    assert r.code == 1 and "driver 550.127.05 is not in NVIDIA's ubuntu2204 repository" in r.err and "560.35.03" in r.err
    assert not path.with_suffix(".lock").exists()
