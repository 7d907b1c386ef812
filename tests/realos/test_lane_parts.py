"""The parts of `make test-os` (lane.py) that run without root, in the fast suite: the prerequisite check
says what is missing and how to get it, and both scenarios' profiles still render to what the lane edits
and asserts on (a profile-schema or template change that breaks the lane fails here, not at the next
manual run), and the fake NVIDIA repository (osrepo.py) is signed for the key its cuda-keyring carries: an
unprivileged real apt reads it through ``signed-by`` and refuses a Packages file that is not the signed one."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
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


@pytest.fixture(scope="module")
def built_repo(tmp_path_factory):
    import osrepo

    www = tmp_path_factory.mktemp("osrepo") / "www"
    repo = osrepo.build(www, [lane.DRIVER], lambda msg: None)
    return repo, www / osrepo.REPO_PATH


def _apt(tmp: Path, repo_dir: Path, keyring: Path, *args: str, tool: str = "apt-get") -> subprocess.CompletedProcess[str]:
    """An unprivileged apt of its own reading the built repository as the VM does: signed-by its keyring."""
    for d in ("etc/apt.conf.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial", "log"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    (tmp / "etc/sources.list").write_text(f"deb [signed-by={keyring}] file:{repo_dir}/ /\n")
    (tmp / "state/status").touch()
    conf = {"Dir::Etc": tmp / "etc", "Dir::State": tmp / "state", "Dir::State::status": tmp / "state/status",
            "Dir::Cache": tmp / "cache", "Dir::Log": tmp / "log", "Debug::NoLocking": "true", "APT::Architecture": "amd64",
            "APT::Sandbox::User": "root" if os.geteuid() == 0 else "", "Acquire::Languages": "none"}
    (tmp / "apt.conf").write_text("".join(f'{k} "{v}";\n' for k, v in conf.items() if v != ""))
    env = {**os.environ, "APT_CONFIG": str(tmp / "apt.conf"), "LC_ALL": "C"}
    return subprocess.run([tool, *args], env=env, capture_output=True, text=True, timeout=120)


def test_fake_nvidia_repository_is_signed_for_the_key_its_cuda_keyring_carries(built_repo, tmp_path):
    repo, repo_dir = built_repo
    keyring_deb = repo_dir / "cuda-keyring_1.1-1_all.deb"
    assert hashlib.sha256(keyring_deb.read_bytes()).hexdigest() == repo.keyring_sha256
    subprocess.run(["dpkg-deb", "-x", str(keyring_deb), str(tmp_path / "kr")], check=True)
    keyring = tmp_path / "kr/usr/share/keyrings/cuda-archive-keyring.gpg"
    assert "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /" in \
        (tmp_path / "kr/etc/apt/sources.list.d/cuda-debian12-x86_64.list").read_text()
    listed = set(re.findall(r"^Package: (\S+)$", (repo_dir / "Packages").read_text(), re.M))
    assert listed == repo.names | {"cuda-keyring"} and len(repo.names) > 50
    ok = _apt(tmp_path / "apt", repo_dir, keyring, "update")
    assert ok.returncode == 0 and "NO_PUBKEY" not in ok.stderr, ok.stderr
    madison = _apt(tmp_path / "apt", repo_dir, keyring, "madison", "nvidia-open", tool="apt-cache")
    assert f"nvidia-open | {lane.DRIVER}-1 | file:{repo_dir}" in madison.stdout, madison.stdout + madison.stderr
    # a Packages file that is not the signed one is refused (the check is live)
    tampered = tmp_path / "tampered"
    shutil.copytree(repo_dir, tampered, ignore=shutil.ignore_patterns("*.deb"))
    with open(tampered / "Packages", "a") as fh:
        fh.write("\nPackage: evil\nVersion: 1\nArchitecture: all\n")
    bad = _apt(tmp_path / "apt2", tampered, keyring, "update")
    assert "Hash Sum mismatch" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
    gone = _apt(tmp_path / "apt2", tampered, keyring, "madison", "evil", tool="apt-cache")
    assert "evil" not in gone.stdout
