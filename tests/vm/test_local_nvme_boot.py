"""Issue 38: the local cloud's virtual NVMe devices seen from a booted guest. ``up`` makes a VM of the VM lane's Debian
12 image (tests/vm/image.py, cloud kernel, systemd and udev) with ``local_nvme_gib: 750`` (two 375 GiB devices); its
user data runs the local entry's own ``tv_nvme_candidates`` (templates/entry/_local.sh.j2, as the startup script's
data phase calls it), prints what it found and each controller's model, makes an ext4 filesystem on the first device,
mounts it and powers off. The VM lane (marker ``vm``, minutes under TCG); it skips, saying why, when QEMU's tools or
the lane's image are missing (``python tests/vm/image.py build`` makes it)."""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from provisioner.providers.base import LaunchSpec
from provisioner.providers.local import host, vms
from provisioner.providers.local.provider import TOOLS, LocalProvider
from provisioner.providers.local.request import VmFiles
from tests.vm import image

pytestmark = pytest.mark.vm
REPO = Path(__file__).resolve().parents[2]
IMAGE = image.cache_dir() / f"debian-12-trainvm-lane-{image.KEY}.qcow2"
MISSING = [f"{t} (Debian package {p})" for t, p in TOOLS.items() if shutil.which(t) is None]
if not IMAGE.is_file():
    MISSING.append(f"the VM lane's image {IMAGE} (python tests/vm/image.py build)")


def candidates_function() -> str:
    """``tv_nvme_candidates`` as the local entry template writes it (plain bash: no template syntax inside)."""
    text = (REPO / "templates" / "entry" / "_local.sh.j2").read_text()
    start = text.index("tv_nvme_candidates() {")
    return text[start:text.index("\n}\n", start) + 3]


def user_data() -> str:
    return f"""#!/bin/bash
TV_ROOT=""
{candidates_function()}
udevadm settle
out=$(tv_nvme_candidates | while read -r d; do printf '%s=%s ' "${{d##*/}}" "$(readlink -f "$d")"; done)
models=$(cat /sys/class/nvme/nvme*/model | tr -s ' ' | tr '\\n' ',')
first=$(tv_nvme_candidates | head -n 1)
mkfs.ext4 -F -q "$first" && mkdir -p /mnt/scratch && mount "$first" /mnt/scratch && echo ok >/mnt/scratch/probe
echo "TRAINVM-NVME found=[$out] models=[$models] size=$(blockdev --getsize64 "$(readlink -f "$first")") mounted=$(cat /mnt/scratch/probe)" >/dev/ttyS0
systemctl poweroff
"""


@pytest.mark.skipif(bool(MISSING), reason=f"missing: {', '.join(MISSING)}")
def test_the_guest_finds_the_local_nvme_devices_by_the_entry_s_own_names(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", str(IMAGE))
    monkeypatch.setenv("TRAINVM_LOCAL_ACCEL", "tcg")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", "")
    provider = LocalProvider(tmp_path / "local", python=sys.executable)
    offer = host.host_offers(cpu_count=2, meminfo="MemTotal: 4194304 kB\n", machine="x86_64", disk_free_gib=1)[0]
    spec = LaunchSpec(name="tv-nvme", profile_name="p", profile_hash="ab" * 32, profile_json="{}", labels={},
                      startup_script="", user_data=user_data(), os="debian-12", boot_disk_type="balanced",
                      boot_disk_gib=image.DISK_GIB, local_nvme_gib=750, spot=False, max_price_per_hour=None,
                      max_run_hours=None, ssh_from=None)
    files = VmFiles(tmp_path / "local" / "tv-nvme")
    deadline = time.monotonic() + float(os.environ.get("TRAINVM_VM_TIMEOUT", "900"))
    try:
        provider.create(spec, offer)
        while vms.pid_of(files) is not None and time.monotonic() < deadline:
            time.sleep(5)
        console = files.console.read_text(errors="replace")
    finally:
        provider.delete("tv-nvme")
    line = next((x for x in console.splitlines() if x.startswith("TRAINVM-NVME ")), None)
    assert line is not None, console[-3000:]
    found = dict(re.findall(r"(\S+)=(/dev/\S+)", line.split("found=[", 1)[1].split("]", 1)[0]))
    assert sorted(set(found.values())) == ["/dev/nvme0n1", "/dev/nvme1n1"], line  # two devices, each once
    assert "nvme-QEMU_NVMe_Ctrl_trainvm-nvme0" in found and "nvme-QEMU_NVMe_Ctrl_trainvm-nvme1" in found, line
    # sysfs pads the model field (the NVMe Identify field is space-padded; tr -s leaves one space)
    assert re.search(r"models=\[QEMU NVMe Ctrl ?,QEMU NVMe Ctrl ?,\]", line) and f"size={375 * 2**30} " in line, line
    assert line.endswith("mounted=ok"), line
