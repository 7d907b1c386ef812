"""Issue 38, the local cloud's request builder (providers/local/request.py): pure, runs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

from provisioner.errors import InvalidRequestError
from provisioner.providers.base import LaunchSpec
from provisioner.providers.local import host, request
from provisioner.providers.local.request import VmFiles

MEMINFO = "MemTotal:       8388608 kB\n"  # 8 GiB: a 4 GiB VM
OFFER = host.host_offers(cpu_count=2, meminfo=MEMINFO, machine="x86_64")[0]
HERE = Path(__file__).parent
REPO = HERE.parents[1]


def spec(**kw: object) -> LaunchSpec:
    base: dict[str, object] = dict(name="tv-a", profile_name="p", profile_hash="ab" * 32, profile_json="{}",
                                   labels={}, startup_script="#!/bin/bash\n", user_data="#!/bin/bash\necho boot\n",
                                   os="debian-12", boot_disk_type="balanced", boot_disk_gib=20, local_nvme_gib=0,
                                   spot=False, max_price_per_hour=None, max_run_hours=None, ssh_from=None)
    base.update(kw)
    return LaunchSpec(**base)  # type: ignore[arg-type]


def test_the_qemu_command_line() -> None:
    files = VmFiles(Path("/state/tv-a"))
    argv = request.qemu_argv(spec(), OFFER, files, ssh_port=2222, accel="tcg", python="/venv/bin/python")
    joined = " ".join(argv)
    assert argv[0] == "qemu-system-x86_64" and argv[argv.index("-machine") + 1] == "q35"
    assert argv[argv.index("-accel") + 1] == "tcg" and argv[argv.index("-cpu") + 1] == "max"
    assert (argv[argv.index("-smp") + 1], argv[argv.index("-m") + 1]) == ("2", "4096M")  # from the offer
    drives = [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"]
    assert drives == ["file=/state/tv-a/disk.qcow2,if=virtio,format=qcow2",
                      "file=/state/tv-a/seed.iso,if=virtio,format=raw,readonly=on"]  # the seed too: no AHCI in the kernel
    assert argv[argv.index("-serial") + 1] == "file:/state/tv-a/console.log"
    netdev = argv[argv.index("-netdev") + 1]
    assert "hostfwd=tcp:127.0.0.1:2222-:22" in netdev
    assert netdev.endswith("guestfwd=tcp:10.0.2.100:80-cmd:/venv/bin/python -m provisioner.providers.local.endpoint /state/tv-a")
    assert argv[argv.index("-qmp") + 1] == "unix:/state/tv-a/qmp.sock,server=on,wait=off"
    assert "-daemonize" in argv and argv[argv.index("-pidfile") + 1] == "/state/tv-a/qemu.pid"
    assert "secret" not in joined.lower() and "token" not in joined.lower()


def test_kvm_only_when_asked_and_an_unknown_accelerator_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    files = VmFiles(Path("/s/x"))
    argv = request.qemu_argv(spec(), OFFER, files, ssh_port=1, accel="kvm", python="py")
    assert argv[argv.index("-accel") + 1] == "kvm" and argv[argv.index("-cpu") + 1] == "host"
    monkeypatch.delenv("TRAINVM_LOCAL_ACCEL", raising=False)
    assert request.accelerator() == "tcg"  # the default: a nested KVM guest can hang before its first message
    monkeypatch.setenv("TRAINVM_LOCAL_ACCEL", "KVM")
    assert request.accelerator() == "kvm"
    monkeypatch.setenv("TRAINVM_LOCAL_ACCEL", "hvf")
    with pytest.raises(InvalidRequestError, match="TRAINVM_LOCAL_ACCEL"):
        request.accelerator()


def test_a_comma_in_a_path_is_doubled_inside_qemu_options() -> None:
    argv = request.qemu_argv(spec(), OFFER, VmFiles(Path("/a,b/x")), ssh_port=1, accel="tcg", python="py")
    assert "file=/a,,b/x/disk.qcow2,if=virtio,format=qcow2" in argv


def test_the_overlay_and_the_nocloud_seed() -> None:
    assert request.overlay_argv("/img/base.qcow2", "/s/disk.qcow2", 20) == [
        "qemu-img", "create", "-f", "qcow2", "-b", "/img/base.qcow2", "-F", "qcow2", "/s/disk.qcow2", "20G"]
    files = request.seed_files(spec())
    assert files["user-data"] == b"#!/bin/bash\necho boot\n"  # the bootstrap as every cloud gets it
    meta = files["meta-data"].decode()
    assert meta.startswith("instance-id: trainvm-tv-a-") and "local-hostname: tv-a" in meta
    assert request.seed_files(spec(profile_hash="cd" * 32))["meta-data"] != files["meta-data"]  # a new instance id
    argv = request.seed_argv("/s/seed.iso", "/s/seed")
    assert argv[argv.index("-volid") + 1] == "cidata" and argv[0] == "genisoimage"


def test_the_base_image_is_the_file_the_setting_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRAINVM_LOCAL_DIR", str(tmp_path))
    monkeypatch.delenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", raising=False)
    doc = request.request_preview(spec(), OFFER)
    assert doc["vm_dir"] == str(tmp_path / "tv-a")
    assert "<the file $TRAINVM_LOCAL_IMAGE_DEBIAN_12 names>" in doc["overlay"]  # type: ignore[operator]
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", "/img/debian-12.qcow2")
    assert "/img/debian-12.qcow2" in request.request_preview(spec(), OFFER)["overlay"]  # type: ignore[operator]
    assert "/img/baked.qcow2" in request.request_preview(spec(boot_image="/img/baked.qcow2"), OFFER)["overlay"]  # type: ignore[operator]
    monkeypatch.delenv("TRAINVM_LOCAL_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert request.state_dir() == tmp_path / "xdg" / "trainvm" / "local"


def test_render_previews_the_local_request_for_a_rehearsal(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TRAINVM_TODAY": "2026-12-07", "TRAINVM_NO_CACHE": "1",
           "TRAINVM_LOCAL_DIR": str(tmp_path / "local")}
    out = subprocess.run([sys.executable, "-m", "provisioner", "render", str(HERE / "fixtures" / "t4-rehearsal.yaml"),
                          "--cloud", "local", "--out", str(tmp_path / "r")], capture_output=True, text=True, env=env,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "r" / "request.json").read_text())
    assert doc["accelerator"] == "tcg" and doc["qemu"][0] == "qemu-system-x86_64"
    script = (tmp_path / "r" / "payload" / "startup.sh").read_text()
    assert "rehearsal: no GPU" in script and "modinfo -F vermagic nvidia" in script  # the gate, rehearsed
    user_data = (tmp_path / "r" / "user-data").read_text()
    assert "http://10.0.2.100/" in user_data  # the payload comes from this VM's endpoint: no credential in it


def test_local_nvme_is_split_as_gce_attaches_local_ssd() -> None:
    assert request.nvme_sizes(0) == ()
    assert request.nvme_sizes(100) == (100,)  # one device of the size asked
    assert request.nvme_sizes(375) == (375,)
    assert request.nvme_sizes(750) == (375, 375)  # two: the startup script's RAID0 path (mdadm)
    assert request.nvme_sizes(800) == (267, 267, 267)  # equal members, together at least the size asked
    assert request.nvme_sizes(3000) == (375,) * 8  # an a2-ultragpu-8g's 8 x 375 GiB
    for gib in (1, 374, 376, 1000, 9000):
        sizes = request.nvme_sizes(gib)
        assert len(set(sizes)) == 1 and sum(sizes) >= gib and max(sizes) <= request.NVME_DEVICE_GIB
        assert sum(sizes) - gib < len(sizes)  # rounding only
    files = VmFiles(Path("/state/tv-a"))
    assert request.nvme_argv(files, (375, 375)) == [
        ["qemu-img", "create", "-f", "qcow2", "/state/tv-a/nvme0.qcow2", "375G"],
        ["qemu-img", "create", "-f", "qcow2", "/state/tv-a/nvme1.qcow2", "375G"]]


def test_local_nvme_devices_are_qemu_nvme_controllers_the_local_entry_matches() -> None:
    files = VmFiles(Path("/state/tv-a"))
    argv = request.qemu_argv(spec(local_nvme_gib=750), OFFER, files, ssh_port=2222, accel="tcg", python="py")
    drives = [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"]
    assert drives[2:] == ["file=/state/tv-a/nvme0.qcow2,if=none,id=nvme0,format=qcow2,discard=unmap",
                          "file=/state/tv-a/nvme1.qcow2,if=none,id=nvme1,format=qcow2,discard=unmap"]
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "-device"]
    assert devices[:2] == ["nvme,drive=nvme0,serial=trainvm-nvme0", "nvme,drive=nvme1,serial=trainvm-nvme1"]
    assert all(len(request.nvme_serial(i)) <= 20 for i in range(100))  # the NVMe serial number field
    plain = request.qemu_argv(spec(), OFFER, files, ssh_port=1, accel="tcg", python="py")
    assert not [a for a in plain if "nvme" in a]  # none asked: none made
    # udev (60-persistent-storage.rules) names a QEMU NVMe namespace nvme-<model>_<serial>[_<nsid>], spaces as "_";
    # QEMU's default model is "QEMU NVMe Ctrl": the local entry's candidates glob must match that name
    entry = (REPO / "templates" / "entry" / "_local.sh.j2").read_text()
    glob = entry.split("tv_nvme_candidates()", 1)[1].split('/dev/disk/by-id/', 1)[1].split(";", 1)[0].strip()
    for i in range(2):
        name = f"nvme-{'QEMU NVMe Ctrl'.replace(' ', '_')}_{request.nvme_serial(i)}"
        assert fnmatch(name, glob) and fnmatch(f"{name}_1", glob), glob


def test_render_previews_the_local_nvme_devices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRAINVM_LOCAL_DIR", str(tmp_path))
    assert "local_nvme" not in request.request_preview(spec(), OFFER)
    doc = request.request_preview(spec(local_nvme_gib=750), OFFER)["local_nvme"]
    assert isinstance(doc, dict) and doc["devices_gib"] == [375, 375]
    assert doc["serials"] == ["trainvm-nvme0", "trainvm-nvme1"] and "blank again at every start" in str(doc["kept"])
