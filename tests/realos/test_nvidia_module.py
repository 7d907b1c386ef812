"""The pure parts of the module lane's real NVIDIA package (nvidia_module.py), in the fast suite: the pin refuses
a download that is not the pinned file (wrong size, wrong bytes) before anything is cached, and a cached copy
tampered with later; the repack keeps the real package's data and maintainer scripts under the replica's control
fields; osrepo.build puts the repacked package in place of the empty one and indexes its control."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "aptsim")]

import nvidia_module as nm  # noqa: E402

# The real package's control as `dpkg-deb -f nvidia-kernel-dkms_550.163.01-2_amd64.deb` prints it (description cut)
REAL_CONTROL = """Package: nvidia-kernel-dkms
Source: nvidia-graphics-drivers
Version: 550.163.01-2
Architecture: amd64
Maintainer: Debian NVIDIA Maintainers <pkg-nvidia-devel@lists.alioth.debian.org>
Installed-Size: 71212
Pre-Depends: nvidia-installer-cleanup
Depends: firmware-nvidia-gsp (= 550.163.01) | firmware-nvidia-gsp-550.163.01, nvidia-kernel-support--v1, dkms (>= 3.0.11)
Recommends: nvidia-driver (>= 550.163.01) | libcuda1 (>= 550.163.01)
Provides: nvidia-kernel-550.163.01, nvidia-kernel-dkms-any (= 550.163.01)
Section: non-free/kernel
Priority: optional
Multi-Arch: foreign
Homepage: https://www.nvidia.com
Description: NVIDIA binary kernel module DKMS source
 This package builds the NVIDIA binary kernel modules needed by
 nvidia-driver, using DKMS.
"""
POSTINST = b"#!/bin/sh\nset -e\nDKMS_NAME=nvidia-current\nDKMS_VERSION=550.163.01\n"


def _pin_for(path: Path) -> nm.Pin:
    data = path.read_bytes()
    return nm.Pin("nvidia-kernel-dkms", "550.163.01-2", f"pool/{path.name}", len(data), hashlib.sha256(data).hexdigest())


def test_the_pin_is_the_trixie_stanzas():
    assert (nm.PIN.version, nm.PIN.size, nm.DRIVER) == ("550.163.01-2", 41721692, "550.163.01")
    assert nm.PIN.sha256 == "729d17210de2a407c27b33d1811a72502483d189251dafd718e453b0c4e40107"


def test_check_pin_refuses_wrong_bytes_of_the_right_size(tmp_path):
    good = tmp_path / "good.deb"
    good.write_bytes(b"the real package" * 64)
    pin = _pin_for(good)
    nm.check_pin(good, pin)
    tampered = tmp_path / "tampered.deb"
    tampered.write_bytes(b"the evil package" * 64)  # same size
    with pytest.raises(nm.PinMismatch, match="sha256"):
        nm.check_pin(tampered, pin)
    short = tmp_path / "short.deb"
    short.write_bytes(b"x")
    with pytest.raises(nm.PinMismatch, match="1 bytes"):
        nm.check_pin(short, pin)


def test_fetch_refuses_a_tampered_download_and_caches_nothing(tmp_path):
    def download(pin, tmp, log):
        out = tmp / Path(pin.filename).name
        out.write_bytes(b"\0" * pin.size)  # the pinned size, other bytes
        return out

    pin = nm.Pin("nvidia-kernel-dkms", "550.163.01-2", "pool/x.deb", 4096, "0" * 64)
    with pytest.raises(nm.PinMismatch, match="sha256"):
        nm.fetch(tmp_path, lambda msg: None, pin, download)
    assert list((tmp_path / "nvidia-module").iterdir()) == []


def test_fetch_downloads_once_and_checks_the_cached_copy_at_every_use(tmp_path):
    payload = b"real .deb bytes" * 100
    pin = nm.Pin("nvidia-kernel-dkms", "550.163.01-2", "pool/x.deb", len(payload), hashlib.sha256(payload).hexdigest())
    calls = []

    def download(pin, tmp, log):
        calls.append(pin)
        (tmp / "x.deb").write_bytes(payload)
        return tmp / "x.deb"

    got = nm.fetch(tmp_path, lambda msg: None, pin, download)
    assert got.read_bytes() == payload and nm.fetch(tmp_path, lambda msg: None, pin, download) == got
    assert len(calls) == 1
    got.write_bytes(payload[::-1])  # the cache tampered with after the download
    with pytest.raises(nm.PinMismatch):
        nm.fetch(tmp_path, lambda msg: None, pin, download)


def test_repack_control_names_the_replica_package_with_the_real_maintainer():
    real = nm.parse_control(REAL_CONTROL)
    assert real["Description"].startswith("NVIDIA binary kernel module DKMS source\n This package")
    replica = nm.replica_stanza(nm.DRIVER)
    fields = nm.repack_control(real, replica)
    assert (fields["Package"], fields["Version"], fields["Source"]) == ("nvidia-kernel-dkms", "550.163.01-1", "nvidia-graphics-drivers")
    # the renumbered bookworm relationships: Debian 12's dkms 3.0.10 satisfies them (trixie's asks for >= 3.0.11)
    assert fields["Depends"] == ("firmware-nvidia-gsp (= 550.163.01) | firmware-nvidia-gsp-550.163.01, "
                                 "nvidia-kernel-support--v1, dkms (>= 3.0.3-4~)")
    assert fields["Provides"] == "nvidia-kernel-550.163.01, nvidia-kernel-dkms-any (= 550.163.01)"
    assert fields["Pre-Depends"] == "nvidia-installer-cleanup"
    assert fields["Maintainer"] == real["Maintainer"] and fields["Installed-Size"] == "71212"
    text = nm.control_text(fields)
    assert nm.parse_control(text)["Version"] == "550.163.01-1" and "repacked as nvidia-kernel-dkms 550.163.01-1" in text


def _real_deb(tmp: Path) -> Path:
    """A stand-in for the real package: its control, a postinst, a source file."""
    tree = tmp / "real"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN/control").write_text(REAL_CONTROL)
    (tree / "DEBIAN/postinst").write_bytes(POSTINST)
    (tree / "DEBIAN/postinst").chmod(0o755)
    src = tree / "usr/src/nvidia-current-550.163.01/dkms.conf"
    src.parent.mkdir(parents=True)
    src.write_text('PACKAGE_NAME="nvidia-current"\nPACKAGE_VERSION="550.163.01"\n')
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(tmp / "real.deb")], check=True,
                   stdout=subprocess.DEVNULL)
    return tmp / "real.deb"


def test_repacked_keeps_the_data_and_maintainer_scripts_under_the_replica_control(tmp_path):
    deb = _real_deb(tmp_path)
    (tmp_path / "cache/nvidia-module").mkdir(parents=True)
    stanza, out = nm.repacked(tmp_path / "cache", deb, nm.DRIVER, lambda msg: None)
    assert out.name.startswith("nvidia-kernel-dkms_550.163.01-1_amd64-")
    info = subprocess.run(["dpkg-deb", "-f", str(out), "Package", "Version", "Depends", "Maintainer"],
                          capture_output=True, text=True, check=True).stdout
    assert info == (f"Package: nvidia-kernel-dkms\nVersion: 550.163.01-1\nDepends: {stanza['Depends']}\n"
                    "Maintainer: Debian NVIDIA Maintainers <pkg-nvidia-devel@lists.alioth.debian.org>\n")
    subprocess.run(["dpkg-deb", "-R", str(out), str(tmp_path / "x")], check=True)
    assert (tmp_path / "x/DEBIAN/postinst").read_bytes() == POSTINST
    assert "nvidia-current" in (tmp_path / "x/usr/src/nvidia-current-550.163.01/dkms.conf").read_text()


def test_osrepo_puts_the_real_package_in_place_of_the_empty_one(tmp_path):
    import osrepo

    deb = _real_deb(tmp_path)
    (tmp_path / "cache/nvidia-module").mkdir(parents=True)
    stanza, out = nm.repacked(tmp_path / "cache", deb, nm.DRIVER, lambda msg: None)
    with pytest.raises(ValueError, match="not in the fake repository"):
        osrepo.build(tmp_path / "bad/www", [nm.DRIVER], lambda msg: None, {("nvidia-kernel-dkms", "1.0-1"): out})
    osrepo.build(tmp_path / "www", [nm.DRIVER], lambda msg: None, {("nvidia-kernel-dkms", stanza["Version"]): out})
    root = tmp_path / "www" / osrepo.REPO_PATH
    placed = root / "nvidia-kernel-dkms_550.163.01-1_amd64.deb"
    assert placed.read_bytes() == out.read_bytes()
    packages = (root / "Packages").read_text()
    stanzas = {(m["Package"], m["Version"]): m for m in map(nm.parse_control, re.split(r"\n\n+", packages)) if m}
    assert stanzas["nvidia-kernel-dkms", "550.163.01-1"]["Installed-Size"] == "71212"
    assert "Installed-Size" not in stanzas["nvidia-kernel-open-dkms", "550.163.01-1"]  # the others stay empty


def test_module_lane_profile_renders_the_proprietary_driver_set_at_the_module_source_version(tmp_path):
    """The module lane's V100 profile (modulelane.render) installs nvidia-kernel-dkms, the package that carries the
    real module, at the module source's version (a template or compat change that breaks the lane fails here)."""
    import modulelane

    script = modulelane.render(tmp_path, "3.11.7", "ab" * 32).startup_sh
    assert "TV_DRIVER_PKGS=( 'nvidia-driver-cuda' 'nvidia-kernel-dkms' )" in script
    assert f"TV_DRIVER='{nm.DRIVER}'" in script and "TV_MODULES='proprietary'" in script
    assert re.search(r"^TV_KEYRING_SHA256=(ab)+$", script, re.M)


def test_dkms_status_lines_are_read_per_kernel():
    import modulelane

    status = ("nvidia-current/550.163.01, 6.1.0-50-cloud-amd64, x86_64: installed\n"
              "nvidia-current/550.163.01, 6.1.0-57-amd64, x86_64: built\n"
              "other/1.0: added\n")
    assert modulelane.dkms_states(status) == {
        ("nvidia-current", "550.163.01", "6.1.0-50-cloud-amd64"): "installed",
        ("nvidia-current", "550.163.01", "6.1.0-57-amd64"): "built"}


def test_dkms_build_time_is_the_postinst_of_the_package_in_dpkg_log():
    import modulelane

    log = ("2026-12-07 22:30:01 configure dkms:all 3.0.10-8+deb12u1 <none>\n"
           "2026-12-07 22:30:02 status installed dkms:all 3.0.10-8+deb12u1\n"
           "2026-12-07 22:30:05 configure nvidia-kernel-dkms:amd64 550.163.01-1 <none>\n"
           "2026-12-07 22:30:05 status half-configured nvidia-kernel-dkms:amd64 550.163.01-1\n"
           "2026-12-07 22:34:17 status installed nvidia-kernel-dkms:amd64 550.163.01-1\n")
    assert modulelane.configure_seconds(log, "nvidia-kernel-dkms") == 252.0
    assert modulelane.configure_seconds(log, "nvidia-driver-cuda") is None
