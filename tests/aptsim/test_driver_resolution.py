"""The rendered debian-12 driver phase against a real apt (``apt-get -s``, unprivileged) and a fake
NVIDIA repository built from Debian's real driver metadata (fakerepo.py says what is modelled).

For every driver version in the facts and the profiles: the rendered script's own functions
(``tv_nvidia_repo``: apt update + the pin file; ``tv_driver_install``; ``tv_fabricmanager``) run
with only the downloads and dpkg stubbed and apt in simulate mode, and apt must resolve **every**
package of the repository it installs to exactly that version, while newer drivers are in the
repository. Then the same set, installed (dpkg status), must survive ``apt-get -s dist-upgrade``.

apt-get is part of the CI machine (Debian 12): its absence fails these tests loudly. Set
TRAINVM_NO_APT=1 to skip them knowingly on a machine without apt.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.compat.facts import load_facts
from tests.helpers import load_by_path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


fakerepo = load_by_path("trainvm_fakerepo", HERE / "fakerepo.py")
support = load_by_path("trainvm_render_support", REPO / "tests/render/support.py")


def driver_versions() -> list[str]:
    """Per driver branch named in the compatibility facts or the bundled profiles, its newest
    version named there."""
    texts = [p.read_text(encoding="utf-8") for p in (REPO / "provisioner/compat/data").glob("*.yaml")]
    found = {v for t in texts for v in re.findall(r'(?:driver|floor)"?:\s*"(\d{3}\.\d+(?:\.\d+)?)"', t)}
    for p in (REPO / "profiles").rglob("*.yaml"):
        found |= set(re.findall(r'^\s*driver:\s*"?(\d{3}\.\d+(?:\.\d+)?)"?\s*$', p.read_text(encoding="utf-8"), re.M))
    newest: dict[int, str] = {}
    for v in sorted(found, key=lambda v: tuple(int(x) for x in v.split("."))):
        if int(v.split(".")[0]) >= fakerepo.MIN_BRANCH:
            newest[int(v.split(".")[0])] = v
    return [newest[b] for b in sorted(newest)]


VERSIONS = driver_versions()
# Proprietary modules only for the branches the proprietary-only GPUs (V100, P100, ...) still have.
LAST_PROPRIETARY = max(g.last_branch for g in load_facts().gpus.values() if g.modules == "proprietary" and g.last_branch)
CASES = [(v, m) for v in VERSIONS for m in ("open", "proprietary")
         if m == "open" or int(v.split(".")[0]) <= LAST_PROPRIETARY]
# (GPU, count, cloud): open modules with fabric manager (8x A100), proprietary (V100).
SHAPES = {"open": ("A100", 8, "gcp"), "proprietary": ("V100", 1, "gcp")}
PROGRAM = r"""
TV_PHASE=driver
mkdir -p "$TV_STATE/lib" "$TV_STATE/phases"
tv_write_helper
printf '%s\n' "$TV_EXPECTED" >"$TV_STATE/expected.json"
# Stubbed: the keyring download and its checksum (NVIDIA's server), dpkg installs, systemd, the
# cloud channel. apt resolves for real, in simulate mode, with the options the script uses.
curl() { local a out=""; for a in "$@"; do if [ "$out" = next ]; then out=$a; fi; if [ "$a" = -o ]; then out=next; fi; done; : >"$out"; }
sha256sum() { cat >/dev/null; }
systemctl() { :; }
tv_publish() { :; }
tv_finish() { printf 'TRAINVM_STATUS=%s\n' "$1"; }
tv_apt() {
  case " $* " in
    *.deb\ *) return 0 ;;
    *" update "*) apt-get "${TV_APT_OPTS[@]}" "$@" ;;
    *) apt-get "${TV_APT_OPTS[@]}" -s "$@" ;;
  esac
}
tv_nvidia_repo
tv_driver_install
if [ "$TV_NVSWITCH" = 1 ]; then tv_fabricmanager; fi
echo TRAINVM_SIMULATED_OK
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if shutil.which("apt-get") is None:
        if os.environ.get("TRAINVM_NO_APT") == "1":
            pytest.skip("TRAINVM_NO_APT=1: apt-get is not on this machine")
        pytest.fail("apt-get is not installed: the driver resolution tests need a real apt (Debian/Ubuntu; CI is "
                    "Debian 12). Set TRAINVM_NO_APT=1 to skip them knowingly.")
    return fakerepo.AptWorld(tmp_path_factory.mktemp("aptworld"), VERSIONS)


def _script(version: str, modules: str) -> str:
    gpu, count, cloud = SHAPES[modules]
    data = support.minimal_profile(os="debian-12", driver=version)
    data["hardware"] = {"gpu": gpu, "gpu_count": count}
    lp = support.from_dict(data)
    text = support.render(lp, cloud).startup_sh
    body, last = text.rstrip("\n").rsplit("\n", 1)
    assert last.startswith("tv_main"), last
    return body + "\n" + PROGRAM


def _simulate(world, version: str, modules: str, tmp_path: Path) -> tuple[str, set[str]]:
    for f in (world.root / "etc/apt/preferences.d").iterdir():
        f.unlink()
    shutil.rmtree(world.root / "var", ignore_errors=True)
    script = tmp_path / "driver.sh"
    script.write_text(_script(version, modules))
    env = {**world.env, "TRAINVM_ROOT": str(world.root), "TRAINVM_RETRY_SLEEP": "0",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = subprocess.run(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and "TRAINVM_SIMULATED_OK" in proc.stdout, proc.stdout[-6000:]
    held_file = world.root / "var/lib/trainvm/driver-packages"
    held = set(held_file.read_text().split()) if held_file.exists() else set()
    return proc.stdout, held


@pytest.mark.parametrize(("version", "modules"), CASES)
def test_driver_resolves_to_exactly_the_pinned_version(world, version, modules, tmp_path):
    out, held = _simulate(world, version, modules, tmp_path)
    installs = fakerepo.inst_lines(out)
    driver_pkgs = {n: v for n, v in installs.items() if n in world.driver_names()}
    # NVIDIA's compute-only (headless) set: the CUDA user space and the kernel modules, no desktop metapackage
    kernel = "nvidia-kernel-open-dkms" if modules == "open" else "nvidia-kernel-dkms"
    assert driver_pkgs.get("nvidia-driver-cuda") == driver_pkgs.get(kernel) == f"{version}-1", out[-4000:]
    assert f"the compute-only (headless) driver set: nvidia-driver-cuda={version}-1 {kernel}={version}-1" in out
    wrong = {n: v for n, v in driver_pkgs.items() if v != f"{version}-1"}
    assert not wrong, f"driver packages not at {version}-1: {wrong}"
    # The Debian-named parts are on the path of every install (the W1 defect's packages).
    assert {"libcuda1", "firmware-nvidia-gsp", "nvidia-smi", "nvidia-persistenced"} <= set(driver_pkgs)
    desktop = {"nvidia-open", "cuda-drivers", "nvidia-driver", "xserver-xorg-video-nvidia", "xserver-xorg-core",
               "libgl1-nvidia-glvnd-glx", "nvidia-settings", "libgl1"}
    assert not desktop & set(installs), f"the desktop stack is installed: {sorted(desktop & set(installs))}"
    if modules == "open":
        assert "nvidia-kernel-open-dkms" in driver_pkgs and "nvidia-kernel-dkms" not in driver_pkgs
        fm = "nvidia-fabricmanager" if int(version.split(".")[0]) >= 580 else f"nvidia-fabricmanager-{version.split('.')[0]}"
        assert driver_pkgs.get(fm) == f"{version}-1"
    # Everything installed from the driver's repository is in the hold list.
    assert set(driver_pkgs) - held == set()
    pin = (world.root / "etc/apt/preferences.d/trainvm-nvidia-driver").read_text()
    # A source-package pin (what NVIDIA's pinning packages use), no name globs.
    assert re.search(r"^Package: src:", pin, re.M) and "*" not in pin.split("Pin:")[0].split("Package:")[1]

    # Installed and held: a dist-upgrade (unattended or by hand) changes none of them.
    world.install_status({**installs}, hold=held)
    try:
        upgrade = world.apt("-s", "-o", "APT::Get::Show-Versions=1", "dist-upgrade").stdout
        moved = {n: v for n, v in fakerepo.inst_lines(upgrade).items() if n in driver_pkgs}
        assert not moved, f"dist-upgrade would move {moved}"
        # Without the holds, the pin alone still keeps them (holds are the second lock).
        world.install_status({**installs})
        upgrade = world.apt("-s", "dist-upgrade").stdout
        assert not {n for n in fakerepo.inst_lines(upgrade) if n in driver_pkgs}, upgrade[-3000:]
    finally:
        (world.tmp / "state/status").write_text("")


def test_the_version_list_covers_every_branch_of_the_facts():
    """The parametrisation is not empty or stale: the facts' branches >= MIN_BRANCH are all there."""
    branches = {int(v.split(".")[0]) for v in VERSIONS}
    assert {535, 550, 580, 590, 595} <= branches
    assert all(int(v.split(".")[0]) < int(fakerepo.NEWER_DRIVER.split(".")[0]) for v in VERSIONS)


def test_glob_pin_of_the_old_templates_is_refused_by_real_apt(world, tmp_path):
    """The model reproduces the W1 defect: a name-glob pin (the pre-fix template's) leaves the
    Debian-named parts at the newest version, and apt cannot resolve nvidia-open=V."""
    version = "550.127.05"
    prefs = world.root / "etc/apt/preferences.d"
    for f in prefs.iterdir():
        f.unlink()
    (prefs / "glob").write_text("Package: nvidia-* libnvidia-* cuda-drivers* xserver-xorg-video-nvidia* libxnvctrl* "
                                f"nvidia-fabricmanager*\nPin: version {version}-*\nPin-Priority: 1000\n")
    try:
        proc = world.apt("-s", "install", f"nvidia-open={version}-1", check=False)
    finally:
        (prefs / "glob").unlink()
    assert proc.returncode != 0
    assert re.search(r"Depends: (libcuda1|firmware-nvidia-gsp|libgl1-nvidia-glvnd-glx)", proc.stdout), proc.stdout
