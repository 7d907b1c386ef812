"""The exact apt version of the NVIDIA driver, resolved from a repository's Packages index.

Real metadata: tests/fixtures/nvidia-repo/debian12-driver.Packages is Debian's own published index of
the driver packaging (src:nvidia-graphics-drivers 535.309.01-0+deb12u1, see its NOTICE). NVIDIA's
repository (nvidia-open, cuda-drivers, pinning packages) cannot be reached from here: those names
come from tests/aptsim/fakerepo.py's model, on top of the real packaging renumbered."""

from __future__ import annotations

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
    assert d.packages == {"nvidia-open": "550.127.05-2", "cuda-drivers": "550.127.05-1", "nvidia-fabricmanager-550": "550.127.05-1"}
    assert d.index == str(driver_index) and not d.unresolved and d.apt_version == "550.127.05-*"


def test_the_script_installs_exactly_the_locked_version(write_yaml, lock_cli, profile_doc) -> None:
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    def render_gcp(loaded):  # a T4: open kernel modules -> nvidia-open
        return render_script(loaded, RenderTarget("gcp", "n1-standard-8", "T4", 1, "us-central1", "us-central1-a")).startup_sh

    path = write_yaml(profile_doc(["alpha==1.0"]))
    unlocked = render_gcp(load_profile(path))
    assert "tv_pkgver \"$TV_DRIVER_PKG\" \"$TV_DRIVER-\"" in unlocked
    assert lock_cli(path).code == 0
    locked = render_gcp(load_profile(path))
    assert "awk -v w='550.127.05-2' '$3==w{print w;exit}'" in locked  # T4: open modules -> nvidia-open
    assert "tv_pkgver \"$TV_DRIVER_PKG\" \"$TV_DRIVER-\"" not in locked


def _pkgver_line(script: str) -> str:
    return next(ln.strip() for ln in script.splitlines() if ln.strip().startswith("pkgver=$("))


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
    helper = unlocked[unlocked.index("tv_pkgver() {"):]
    helper = helper[:helper.index("\n}\n") + 3]

    def run(line: str) -> str:
        prog = f"set -Eeuo pipefail\nTV_DRIVER_PKG=nvidia-open\nTV_DRIVER=550.127.05\n{helper}\n{line}\necho \"$pkgver\"\n"
        done = subprocess.run(["bash", "-c", prog], env=world.env, capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.strip()

    assert run(_pkgver_line(unlocked)) == "550.127.05-2"
    assert run(_pkgver_line(locked)) == "550.127.05-1"
    doc["driver"]["packages"]["nvidia-open"] = "550.127.05-3"  # a locked version the repository no longer has
    path.with_suffix(".lock").write_text(json.dumps(doc))
    assert run(_pkgver_line(render_script(load_profile(path), target).startup_sh)) == ""  # the script's -z check fails it


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
