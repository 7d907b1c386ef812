"""Issue 38: the local provider's parts that need no QEMU (the real lifecycle: tests/vm/test_local_qemu.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from provisioner.errors import ConflictError, InvalidRequestError
from provisioner.hooks import HOOKS
from provisioner.providers.base import LaunchSpec
from provisioner.providers.local import host, vms
from provisioner.providers.local.provider import LocalProvider
from provisioner.providers.local.request import VmFiles
from provisioner.providers.local.store import LocalStore
from provisioner.providers.store import payload_key

OFFER = host.host_offers(cpu_count=1, meminfo="MemTotal: 2097152 kB\n", machine="x86_64")[0]


def spec(**kw: object) -> LaunchSpec:
    base: dict[str, object] = dict(name="tv-a", profile_name="p", profile_hash="ab" * 32, profile_json="{}",
                                   labels={}, startup_script="", user_data="#!/bin/sh\n", os="debian-12",
                                   boot_disk_type="balanced", boot_disk_gib=2, local_nvme_gib=0, spot=False,
                                   max_price_per_hour=None, max_run_hours=None, ssh_from=None)
    base.update(kw)
    return LaunchSpec(**base)  # type: ignore[arg-type]


def test_a_missing_tool_is_named_with_its_debian_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "qemu-system-x86_64" else f"/usr/bin/{tool}")
    with pytest.raises(InvalidRequestError, match=r"qemu-system-x86_64 is not installed.*Debian package qemu-system-x86"):
        LocalProvider(tmp_path).create(spec(), OFFER)
    assert not (tmp_path / "tv-a").exists()


def test_a_missing_base_image_names_its_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.delenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", raising=False)
    with pytest.raises(InvalidRequestError, match="set TRAINVM_LOCAL_IMAGE_DEBIAN_12"):
        LocalProvider(tmp_path).create(spec(), OFFER)
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", str(tmp_path / "nope.qcow2"))
    with pytest.raises(InvalidRequestError, match="is not a file"):
        LocalProvider(tmp_path).create(spec(), OFFER)
    with pytest.raises(InvalidRequestError, match="one VM"):
        LocalProvider(tmp_path).create(spec(nodes=2), OFFER)


def test_a_vm_of_another_profile_version_is_a_conflict_and_records_read_back(tmp_path: Path) -> None:
    files = VmFiles(tmp_path / "tv-a")
    files.root.mkdir()
    vms.save(files, {"profile": "p", "hash": "cd" * 32, "instance_type": OFFER.instance_type, "ssh_user": "debian",
                     "ssh_port": 2222, "trainvm-profile": json.dumps({"name": "p"})})
    provider = LocalProvider(tmp_path)
    with pytest.raises(ConflictError, match="another version"):
        provider.create(spec(), OFFER)
    rec = provider.find("tv-a")
    assert rec is not None and rec.state == "STOPPED" and rec.cloud == "local" and rec.ip is None  # no QEMU runs
    assert [r.name for r in provider.list()] == ["tv-a"]
    assert provider.read_report("tv-a") == (None, {"name": "p"})
    assert provider.ssh_argv(rec, ["true"])[:3] == ["ssh", "-p", "2222"] and "debian@127.0.0.1" in provider.ssh_argv(rec, [])
    assert provider.delete("tv-a") and not files.root.exists() and not provider.delete("tv-a")
    assert provider.find("../etc") is None and provider.delete("../etc") is False  # never a path outside its folder
    (tmp_path / "tv-a").mkdir()  # a folder trainvm did not make: a conflict, left as it is
    (tmp_path / "tv-a" / "mine").write_text("x")
    with pytest.raises(ConflictError, match="not a trainvm VM"):
        LocalProvider(tmp_path).create(spec(), OFFER)
    assert (tmp_path / "tv-a" / "mine").read_text() == "x"


def test_the_payload_store_is_content_addressed(tmp_path: Path) -> None:
    data = b"payload"
    sha = hashlib.sha256(data).hexdigest()
    store = LocalStore(tmp_path)
    ref = store.stage("this-machine", data, sha)
    assert ref.uploaded and ref.key == payload_key(sha) and ref.url == f"http://10.0.2.100/{payload_key(sha)}"
    assert (tmp_path / "store" / ref.key).read_bytes() == data
    assert not store.stage("this-machine", data, sha).uploaded  # there already
    assert store.stored("this-machine") == [sha]
    assert store.release("this-machine", sha) and not store.release("this-machine", sha)


def test_the_provider_hook_builds_the_local_provider() -> None:
    hook = HOOKS["local"].provider
    assert hook is not None and isinstance(hook(), LocalProvider)
