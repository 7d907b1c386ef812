"""The driver phase's kernel step (``tv_kernel_prepare``) on debian-12 against real ``apt-get -s``: dkms comes
without its recommended packages, so the generic kernel's headers (``linux-headers-amd64``, which dkms recommends
through ``linux-headers-generic``) are not installed; what is installed and held survives a later
``apt-get -s upgrade`` without new headers (a DKMS build for a kernel the VM never runs); and an image whose kernel
is older than the archive's newest (Debian's point-release image while bookworm-security has a newer ABI: issue 38's
QEMU boot of Debian 12 on 6.1.0-50 with 6.1.0-57 in bookworm-security) keeps booting that kernel: apt >= 2.5.2 upgrades
every installed binary of a source package it installs one of (APT::Get::Upgrade-By-Source-Package; apt's changelog,
2.5.2: "Upgrade all binaries in a source package"), and linux-headers-cloud-amd64 shares linux-image-cloud-amd64's
source (linux-signed-amd64), so installing the headers metapackage brought the newer image metapackage and kernel.

Real: Debian's stanzas of dkms, linux-headers-6.1.0-56-amd64/-common, linux-headers-amd64, linux-kbuild-6.1
(tests/fixtures/nvidia-repo/debian12-archive.Packages). **Modelled** (Debian's cloud kernel is not in the
fixture): ``linux-headers-6.1.0-56-cloud-amd64`` and its metapackage ``linux-headers-cloud-amd64``, shaped like
the generic ones, and a later kernel ABI (-57, generic and cloud) for the upgrade; the cloud kernel images and
``linux-image-cloud-amd64`` (Depends and Source as in bookworm's: the image metapackage depends on exactly its
ABI's image, both metapackages are built from linux-signed-amd64). Stubbed: ``uname -r`` (the cloud kernel),
``dpkg-query``/``apt-mark`` (apt-get -s installs nothing, so the holds the script asks for are recorded and applied
to the simulated dpkg status, at once: a hold asked before the install is seen by that install). Not modelled: a
boot (which kernel the boot loader picks), the DKMS build, Ubuntu's apt and archive (its linux-meta-<flavour> source
builds linux-<flavour>, linux-image-<flavour> and linux-headers-<flavour> alike: the same hold covers it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import load_by_path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


fakerepo = load_by_path("trainvm_fakerepo", HERE / "fakerepo.py")
support = load_by_path("trainvm_render_support", REPO / "tests/render/support.py")

KVER = "6.1.0-56-cloud-amd64"
OLD, NEW = "6.1.192-2", "6.1.199-1"


def _kernel(abi: str, version: str) -> list[dict[str, str]]:
    """Modelled cloud headers (and, for a new ABI, the generic ones) of ``abi`` at ``version``."""
    out = [
        {"Package": f"linux-headers-{abi}-cloud-amd64", "Source": "linux", "Version": version, "Architecture": "amd64",
         "Depends": f"linux-headers-{abi}-common (= {version}), linux-kbuild-6.1 (>= {OLD}), linux-compiler-gcc-12-x86"},
        {"Package": "linux-headers-cloud-amd64", "Source": "linux-signed-amd64", "Version": version, "Architecture": "amd64",
         "Depends": f"linux-headers-{abi}-cloud-amd64 (= {version})"},
    ]
    if abi != "6.1.0-56":
        out += [
            {"Package": f"linux-headers-{abi}-common", "Source": "linux", "Version": version, "Architecture": "all"},
            {"Package": f"linux-headers-{abi}-amd64", "Source": "linux", "Version": version, "Architecture": "amd64",
             "Depends": f"linux-headers-{abi}-common (= {version}), linux-kbuild-6.1 (>= {OLD}), linux-compiler-gcc-12-x86"},
            {"Package": "linux-headers-amd64", "Source": "linux-signed-amd64", "Version": version, "Architecture": "amd64",
             "Provides": "linux-headers-generic", "Depends": f"linux-headers-{abi}-amd64 (= {version})"},
        ]
    return out


def _images(abi: str, version: str) -> list[dict[str, str]]:
    """The cloud kernel image of ``abi`` and the image metapackage at ``version`` (bookworm's shape)."""
    return [
        {"Package": f"linux-image-{abi}-cloud-amd64", "Source": "linux-signed-amd64", "Version": version,
         "Architecture": "amd64"},
        {"Package": "linux-image-cloud-amd64", "Source": "linux-signed-amd64", "Version": version, "Architecture": "amd64",
         "Depends": f"linux-image-{abi}-cloud-amd64 (= {version})"},
    ]


PROGRAM = r"""
TV_PHASE=driver
mkdir -p "$TV_STATE/lib" "$TV_STATE/phases"
uname() { if [ "${1:-}" = -r ]; then echo "$TRAINVM_TEST_KVER"; else command uname "$@"; fi; }
dpkg-query() { printf 'install ok installed'; }
apt-mark() {  # -o DPkg::Lock::Timeout=600 hold PKG...: recorded, and applied to the simulated dpkg status
  shift 3
  printf 'HELD %s\n' "$*" >&2
  python3 - "$TRAINVM_TEST_STATUS" "$@" <<'PY'
import re, sys
path, held = sys.argv[1], set(sys.argv[2:])
blocks = open(path).read().split("\n\n")
def hold(b):
    m = re.search(r"^Package: (\S+)$", b, re.M)
    return b.replace("Status: install ok", "Status: hold ok") if m and m.group(1) in held else b
open(path, "w").write("\n\n".join(hold(b) for b in blocks))
PY
}
tv_apt() { apt-get "${TV_APT_OPTS[@]}" -s "$@"; }
tv_kernel_prepare
echo TRAINVM_SIMULATED_OK
"""


@pytest.fixture
def world(tmp_path):
    if shutil.which("apt-get") is None:
        if os.environ.get("TRAINVM_NO_APT") == "1":
            pytest.skip("TRAINVM_NO_APT=1: apt-get is not on this machine")
        pytest.fail("apt-get is not installed (see tests/aptsim/test_driver_resolution.py)")
    w = fakerepo.AptWorld(tmp_path / "apt", ["550.127.05"])
    w.kernel = _kernel("6.1.0-56", OLD)
    fakerepo.write_flat_repo(w.tmp / "repo/kernel", w.kernel, "Debian", "Debian")
    with open(w.tmp / "etc/sources.list", "a") as fh:
        fh.write(f"deb [trusted=yes] file:{w.tmp}/repo/kernel ./\n")
    w.apt("update")
    return w


def _prepare(world, tmp_path: Path) -> tuple[dict[str, str], set[str]]:
    lp = support.from_dict(support.minimal_profile(os="debian-12", driver="550.127.05"))
    body, last = support.render(lp, "gcp").startup_sh.rstrip("\n").rsplit("\n", 1)
    assert last.startswith("tv_main"), last
    script = tmp_path / "kernel.sh"
    script.write_text(body + "\n" + PROGRAM)
    env = {**world.env, "TRAINVM_ROOT": str(world.root), "TRAINVM_RETRY_SLEEP": "0", "TRAINVM_TEST_KVER": KVER,
           "TRAINVM_TEST_STATUS": str(world.tmp / "state/status"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = subprocess.run(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and "TRAINVM_SIMULATED_OK" in proc.stdout, proc.stdout[-5000:]
    held = {n for line in re.findall(r"^HELD (.*)$", proc.stdout, re.M) for n in line.split()}
    return fakerepo.inst_lines(proc.stdout), held


def test_dkms_comes_without_the_generic_kernel_headers(world, tmp_path):
    installs, held = _prepare(world, tmp_path)
    assert {"dkms", f"linux-headers-{KVER}"} <= set(installs), sorted(installs)
    generic = sorted(n for n in installs if n in ("linux-headers-amd64", "linux-headers-6.1.0-56-amd64"))
    assert not generic, f"dkms's recommends bring the generic kernel's headers: {generic}"
    assert "linux-headers-cloud-amd64" not in installs  # it names the archive's newest kernel, not the running one
    assert f"linux-headers-{KVER}" in held


def test_an_image_kernel_older_than_the_archive_stays_the_one_that_boots(world, tmp_path):
    """The image runs -56 at OLD with its image metapackage installed; the archive (a point release and its
    security suite) has -56's headers and, newer, -57 with the metapackages at NEW (issue 38, console.log of the
    QEMU boot: 6.1.0-50 running, ``linux-image-cloud-amd64`` upgraded to 6.1.0-57 by the headers' install)."""
    world.kernel += _kernel("6.1.0-57", NEW) + _images("6.1.0-56", OLD) + _images("6.1.0-57", NEW)
    fakerepo.write_flat_repo(world.tmp / "repo/kernel", world.kernel, "Debian", "Debian")
    world.apt("update")
    index = {(st["Package"], st["Version"]): st for st in world.kernel}
    image = [dict(index[(f"linux-image-{KVER}", OLD)]), dict(index[("linux-image-cloud-amd64", OLD)])]
    for st in image:
        st["Status"] = "install ok installed"
    (world.tmp / "state/status").write_text(fakerepo.dump(image, ("Status",)))
    installs, held = _prepare(world, tmp_path)
    kernels = sorted(n for n in installs if n.startswith("linux-image") or "6.1.0-57" in n)
    assert not kernels, f"the driver phase installs or upgrades another kernel (the next boot's): {kernels}"
    assert {"dkms", f"linux-headers-{KVER}"} <= set(installs), sorted(installs)
    assert {f"linux-image-{KVER}", "linux-image-cloud-amd64"} <= held


def test_a_later_upgrade_brings_no_new_kernel_headers(world, tmp_path):
    installs, held = _prepare(world, tmp_path)
    index = {(st["Package"], st["Version"]): st for st in fakerepo.archive() + world.kernel}
    status = []
    for name, version in sorted(installs.items()):
        st = dict(index[(name, version)])
        st["Status"] = ("hold" if name in held else "install") + " ok installed"
        status.append(st)
    (world.tmp / "state/status").write_text(fakerepo.dump(status, ("Status",)))
    # the archive moves on: a new kernel ABI, generic and cloud
    fakerepo.write_flat_repo(world.tmp / "repo/kernel", world.kernel + _kernel("6.1.0-57", NEW), "Debian", "Debian")
    world.apt("update")
    for command in ("upgrade", "dist-upgrade"):
        out = world.apt("-s", command).stdout
        headers = sorted(n for n in fakerepo.inst_lines(out) if n.startswith("linux-headers"))
        assert not headers, f"apt-get -s {command} brings kernel headers: {headers}\n{out[-2000:]}"
