"""System probe against a fake root (/etc, /proc, /sys) and the full probe() on this machine."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from provisioner.probe.gpu import CommandResult
from provisioner.probe.report import data_status, probe
from provisioner.probe.system import (
    cpu_info,
    disk_info,
    glibc_version,
    memory_gib,
    mount_for,
    nvcc_version,
    os_release,
    parse_nvcc,
    system_cudnn,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"

MOUNTS = """\
/dev/nvme0n1p2 / ext4 rw,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
/dev/sda1 /mnt/archive ext4 rw,relatime 0 0
/dev/sdb1 /mnt/ssd xfs rw,relatime 0 0
/dev/mapper/vg-data /mnt/data ext4 rw,relatime 0 0
server:/export /mnt/nfs nfs4 rw,relatime 0 0
/dev/sdb1 /mnt/with\\040space xfs rw 0 0
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def add_disk(root: Path, disk: str, rotational: str, partitions: Sequence[str] = ()) -> None:
    device = root / "sys/devices/pci0000:00/0000:00:01.0" / disk
    write(device / "queue/rotational", rotational + "\n")
    (root / "sys/block").mkdir(parents=True, exist_ok=True)
    (root / "sys/class/block").mkdir(parents=True, exist_ok=True)
    os.symlink(device, root / "sys/block" / disk)
    os.symlink(device, root / "sys/class/block" / disk)
    for part in partitions:
        write(device / part / "partition", "1\n")
        os.symlink(device / part, root / "sys/class/block" / part)


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    write(root / "etc/os-release", 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n')
    write(root / "proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD Ryzen 9 7950X 16-Core Processor\n")
    write(root / "proc/meminfo", "MemTotal:       65544316 kB\nMemFree:        1234 kB\n")
    write(root / "proc/mounts", MOUNTS)
    add_disk(root, "nvme0n1", "0", ["nvme0n1p1", "nvme0n1p2"])
    add_disk(root, "sda", "1", ["sda1"])
    add_disk(root, "sdb", "0", ["sdb1"])
    add_disk(root, "dm-0", "0")
    (root / "sys/block/dm-0/slaves").mkdir()
    (root / "sys/block/dm-0/slaves/nvme0n1p2").touch()
    (root / "dev/mapper").mkdir(parents=True)
    os.symlink("../dm-0", root / "dev/mapper/vg-data")
    for d in ("mnt/archive/imagenet", "mnt/ssd", "mnt/data", "mnt/nfs", "home/me"):
        (root / d).mkdir(parents=True)
    return root


def test_os_release(fake_root: Path) -> None:
    assert os_release(fake_root) == {"id": "ubuntu", "version": "22.04"}
    assert os_release(fake_root / "nowhere") == {"id": None, "version": None}


def test_cpu_and_memory(fake_root: Path) -> None:
    assert cpu_info(fake_root)["model"] == "AMD Ryzen 9 7950X 16-Core Processor"
    assert memory_gib(fake_root) == 62.5
    assert memory_gib(fake_root / "nowhere") is None


def test_glibc_on_this_machine() -> None:
    import platform

    version = glibc_version()
    lib, expected = platform.libc_ver()  # an independent reading (the ELF of this interpreter)
    if lib != "glibc":
        pytest.skip("not a glibc system")
    assert version is not None and re.fullmatch(r"\d+\.\d+(\.\d+)?", version)
    assert version.split(".")[:2] == expected.split(".")[:2]


@pytest.mark.parametrize(("path", "kind", "device"), [
    ("/home/me", "nvme", "nvme0n1"),
    ("/mnt/archive/imagenet", "hdd", "sda"),
    ("/mnt/ssd", "ssd", "sdb"),
    ("/mnt/data", "nvme", "dm-0"),  # LVM on NVMe: judged by its member disk
    ("/mnt/nfs", None, None),
    ("/mnt/archive/imagenet/not-yet-there", "hdd", "sda"),  # nearest existing parent
])
def test_disk_kind(fake_root: Path, path: str, kind: str | None, device: str | None) -> None:
    info = disk_info(path, fake_root)
    assert (info.kind, info.device) == (kind, device)
    assert info.path == path and info.free_gib is not None


def test_mount_escapes(fake_root: Path) -> None:
    assert mount_for("/mnt/with space/x", fake_root) == ("/dev/sdb1", "/mnt/with space", "xfs")


def test_disk_on_this_machine_does_not_raise(tmp_path: Path) -> None:
    info = disk_info(str(tmp_path))
    assert info.kind in ("nvme", "ssd", "hdd", None)


def test_nvcc() -> None:
    text = (FIXTURES / "nvcc-12.4.txt").read_text()
    assert parse_nvcc(text) == "12.4.131"

    def runner(argv: Sequence[str]) -> CommandResult:
        return CommandResult(0, text) if argv[-1] == "--version" else CommandResult(1, "")

    assert nvcc_version(runner) == "12.4.131"
    assert nvcc_version(lambda argv: CommandResult(127, "", "not found")) is None


def test_system_cudnn_header(tmp_path: Path) -> None:
    write(tmp_path / "usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
          "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n")
    assert system_cudnn(tmp_path) == "9.1.0"
    assert system_cudnn(tmp_path / "none") is None


def test_data_status(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "part-0000.parquet").write_bytes(b"x")
    assert data_status(str(tmp_path / "full")) == "staged"
    assert data_status(str(tmp_path / "empty")) == "empty"
    assert data_status(str(tmp_path / "missing")) == "missing"


def test_probe_on_this_machine_is_a_valid_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU, no nvidia-smi, no framework here: a complete report, never an exception."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # type: ignore[arg-type]

    def no_tools(argv: Sequence[str]) -> CommandResult:
        return CommandResult(127, "", f"{argv[0]}: not found")

    report = probe(data_path=str(tmp_path), data_dests=[str(tmp_path / "glue")], runner=no_tools)
    json.dumps(report)  # serialisable
    assert report["schema"] == 1 and report["source"] == "local" and report["status"] == "ready"
    assert report["gpus"] == [] and report["driver"] is None and report["cuda_driver_max"] is None
    assert report["cuda_toolkit"] is None
    assert report["python"] == ".".join(map(str, sys.version_info[:3]))
    assert report["packages"]["pytest"]
    assert report["cpu"]["count"] >= 1
    assert report["disk"]["path"] == str(tmp_path)
    assert report["data"] == [{"dest": str(tmp_path / "glue"), "status": "missing"}]
    assert "nvidia-smi not found" in report["notes"]
    for key in ("gpus", "driver", "cuda_driver_max", "framework", "cuda_toolkit", "cudnn", "python", "packages",
                "os", "cpu", "memory_gib", "disk", "data", "phases"):
        assert key in report


def test_probe_with_recorded_gpu_and_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # type: ignore[arg-type]
    answers = {
        "csv": (FIXTURES / "smi-rtx4090.csv").read_text(),
        "xml": (FIXTURES / "smi-rtx4090.xml").read_text(),
        "nvcc": (FIXTURES / "nvcc-12.4.txt").read_text(),
    }

    def runner(argv: Sequence[str]) -> CommandResult:
        if argv[0] == "nvidia-smi":
            return CommandResult(0, answers["xml" if "-x" in argv else "csv"])
        if argv[-1] == "--version":
            return CommandResult(0, answers["nvcc"])
        return CommandResult(127, "", "not found")

    report = probe(data_path=str(tmp_path), runner=runner)
    assert report["gpus"] == [{"name": "NVIDIA GeForce RTX 4090", "memory_mib": 24564, "compute_capability": "8.9"}]
    assert (report["driver"], report["cuda_driver_max"], report["cuda_toolkit"]) == ("550.127.05", "12.4", "12.4.131")
