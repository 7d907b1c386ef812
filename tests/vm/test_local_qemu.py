"""Issue 38: the local provider on a real QEMU, without booting an OS (seconds, not minutes): the request builder's
command line, a base image with nothing bootable on it (SeaBIOS waits), and the lifecycle around it: create ->
RUNNING, stop (no OS answers the ACPI power-off, so the bound ends in a hard power-off) -> STOPPED with the disk
kept, start -> RUNNING on the same disk, delete -> no process and no file left. The VM lane (`make test-vm`,
marker ``vm``); it skips, saying why, where QEMU's tools are missing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.providers.base import LaunchSpec
from provisioner.providers.local import host, vms
from provisioner.providers.local.provider import TOOLS, LocalProvider
from provisioner.providers.local.request import VmFiles

pytestmark = pytest.mark.vm
MISSING = [f"{t} (Debian package {p})" for t, p in TOOLS.items() if shutil.which(t) is None]


@pytest.mark.skipif(bool(MISSING), reason=f"QEMU's tools are missing: {', '.join(MISSING)}")
def test_create_stop_start_delete_leave_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "empty.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "1G"], check=True)
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", str(base))
    monkeypatch.setenv("TRAINVM_LOCAL_STOP_SECONDS", "1")
    monkeypatch.setenv("TRAINVM_LOCAL_ACCEL", "tcg")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", "")
    root = tmp_path / "local"
    provider = LocalProvider(root, python=sys.executable)
    offer = host.host_offers(cpu_count=1, meminfo="MemTotal: 1048576 kB\n", machine="x86_64")[0]
    spec = LaunchSpec(name="tv-qemu", profile_name="p", profile_hash="ab" * 32, profile_json="{}", labels={},
                      startup_script="", user_data="#!/bin/sh\npoweroff\n", os="debian-12", boot_disk_type="balanced",
                      boot_disk_gib=2, local_nvme_gib=0, spot=False, max_price_per_hour=None, max_run_hours=None,
                      ssh_from=None)
    files = VmFiles(root / "tv-qemu")
    try:
        made = provider.create(spec, offer)
        assert made.state == "RUNNING" and made.ip == "127.0.0.1" and made.hash == spec.profile_hash
        pid = vms.pid_of(files)
        assert pid is not None and files.disk.is_file() and files.seed.is_file()
        assert provider.create(spec, offer).adopted  # the same spec again: the VM that is there
        assert [r.name for r in provider.list()] == ["tv-qemu"]
        stopped = provider.stop("tv-qemu")
        assert stopped is not None and stopped.state == "STOPPED" and vms.pid_of(files) is None  # (a zombie at most)
        assert files.disk.is_file()  # the disk stays
        started = provider.start("tv-qemu")
        assert started is not None and started.state == "RUNNING"
        assert provider.console("tv-qemu") is not None
    finally:
        gone = provider.delete("tv-qemu")
    assert gone and not files.root.exists() and vms.pid_of(files) is None
    assert provider.find("tv-qemu") is None and provider.delete("tv-qemu") is False
