"""The VM lane's pure parts (tests/vm/image.py), without building or booting anything: what it says is missing, the
NoCloud seed it hands the guest, and the EXTLINUX entry that boots the kernel Debian's packages keep current."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import image  # noqa: E402


def test_missing_names_each_tool_with_its_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    said = image.missing()
    assert "debootstrap (apt-get install debootstrap)" in said
    assert "qemu-system-x86_64 (apt-get install qemu-system-x86)" in said
    assert "genisoimage (apt-get install genisoimage)" in said


def test_the_boot_entry_follows_the_kernel_links_and_the_serial_console() -> None:
    conf = image.FILES["boot/extlinux/extlinux.conf"]
    assert "LINUX /vmlinuz" in conf and "INITRD /initrd.img" in conf  # what a kernel upgrade moves
    assert "root=LABEL=root" in conf and "console=ttyS0" in conf
    assert image.FILES["etc/cloud/cloud.cfg.d/90_trainvm_vm_lane.cfg"] == "datasource_list: [NoCloud, None]\n"


@pytest.mark.skipif(shutil.which("genisoimage") is None or shutil.which("isoinfo") is None,
                    reason="genisoimage (with isoinfo) is not installed: apt-get install genisoimage")
def test_the_seed_is_a_cidata_volume_with_user_and_meta_data(tmp_path: Path) -> None:
    iso = image.seed_iso(tmp_path / "seed.iso", "#cloud-config\n", "lane-x")
    head = subprocess.run(["isoinfo", "-d", "-i", str(iso)], capture_output=True, text=True, check=True).stdout
    assert "Volume id: cidata" in head
    files = subprocess.run(["isoinfo", "-J", "-f", "-i", str(iso)], capture_output=True, text=True, check=True).stdout
    assert sorted(files.split()) == ["/meta-data", "/user-data"]
