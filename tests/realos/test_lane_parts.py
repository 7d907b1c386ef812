"""The parts of `make test-os` (lane.py) that run without root, in the fast suite: the prerequisite check
says what is missing and how to get it, and both scenarios' profiles still render to what the lane edits
and asserts on (a profile-schema or template change that breaks the lane fails here, not at the next
manual run)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "aptsim")]

import lane  # noqa: E402
import runner  # noqa: E402
import s3lane  # noqa: E402


def test_missing_prerequisites_names_each_with_how_to_get_it():
    assert runner.missing_prerequisites(uid=0, rootfs_cached=False, which=lambda t: f"/usr/bin/{t}", port_free=lambda: True) == []
    busy = runner.missing_prerequisites(uid=0, rootfs_cached=True, which=lambda t: t, port_free=lambda: False)
    assert len(busy) == 1 and "127.0.0.1:443 is in use" in busy[0]
    missing = runner.missing_prerequisites(uid=1000, rootfs_cached=False, which=lambda t: None)
    assert missing[0].startswith("root")
    assert "debootstrap (builds the Debian 12 root filesystem once): apt-get install debootstrap" in missing
    assert "dpkg-scanpackages: apt-get install dpkg-dev" in missing
    assert len(missing) == 2 + len(runner.HOST_TOOLS)
    # once the root filesystem is cached, debootstrap is no longer needed
    cached = runner.missing_prerequisites(uid=0, rootfs_cached=True, which=lambda t: None if t == "debootstrap" else t,
                                          port_free=lambda: True)
    assert cached == []


def test_lane_refuses_an_unknown_scenario(monkeypatch):
    monkeypatch.setenv("TRAINVM_OS_SCENARIOS", "gcp,azure")
    with pytest.raises(SystemExit, match="unknown scenario azure"):
        lane.main()


@pytest.mark.parametrize("nvme", [True, False])
def test_gcp_scenario_renders_with_the_fake_keyring(tmp_path, nvme):
    script = lane.render(tmp_path, "3.11.7", nvme, "ab" * 32)
    assert re.search(r"^TV_KEYRING_SHA256=(ab){32}$", script, re.M)
    assert "https://developer.download.nvidia.com/trainvm-data/sample.bin" in script
    assert re.search(r"^TV_NVME=(.*)$", script, re.M).group(1) == ("'required'" if nvme else "'none'")


def test_aws_s3_scenario_renders_the_copy_tool_and_its_lock(tmp_path):
    script = s3lane.render(tmp_path, lane.DRIVER, "3.11.7", "cd" * 32)
    assert re.search(r"^TV_KEYRING_SHA256=(cd){32}$", script, re.M)
    assert f"s3://{s3lane.BUCKET}/dataset" in script and "trainvm-provision.service" in script
    pins = s3lane.lock_pins()
    assert pins["boto3"] and all(f"{n}=={v} --hash=sha256:" in script for n, v in pins.items())
    # every object the scenario expects lies under the source prefix; the sibling does not
    assert all(k.startswith("dataset/") for k in s3lane.OBJECTS) and not any(k.startswith("dataset/") for k in s3lane.SIBLING)
