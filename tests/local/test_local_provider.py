"""Issue 38: the local provider's parts that need no QEMU (the real lifecycle: tests/vm/test_local_qemu.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.commands.down import release_payload
from provisioner.errors import ConflictError, CredentialsError, InvalidRequestError
from provisioner.hooks import HOOKS
from provisioner.providers.base import InstanceRecord, LaunchSpec
from provisioner.providers.local import host, vms
from provisioner.providers.local import provider as provider_module
from provisioner.providers.local.provider import LocalProvider
from provisioner.providers.local.request import VmFiles
from provisioner.providers.local.store import LocalStore
from provisioner.providers.store import payload_key
from tests.helpers import REPO

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


QEMU_IMG = shutil.which("qemu-img") is not None and shutil.which("qemu-io") is not None


def _qemu_io(path: Path, command: str) -> bool:
    """``qemu-io -c COMMAND``: True when it succeeded (a ``read -P`` whose pattern differs exits 1)."""
    done = subprocess.run(["qemu-io", "-f", "qcow2", "-c", command, str(path)], capture_output=True, text=True,
                          check=False)
    return done.returncode == 0 and "failed" not in (done.stdout + done.stderr).lower()


@pytest.mark.skipif(not QEMU_IMG or shutil.which("genisoimage") is None,
                    reason="qemu-img/qemu-io (Debian qemu-utils) or genisoimage missing")
def test_local_nvme_devices_are_made_at_create_blank_after_a_stop_and_gone_with_down(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real qemu-img and genisoimage; only QEMU itself is not started (the VM lane boots it: tests/vm/)."""
    base = tmp_path / "base.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "1G"], check=True)
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", str(base))
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", "")
    started: list[list[str]] = []
    real_run = provider_module._run

    def run(argv: list[str]) -> None:
        if argv[0] == "qemu-system-x86_64":
            started.append(argv)  # no QEMU: the VM reads as STOPPED, which is all start() needs
        else:
            real_run(argv)

    monkeypatch.setattr(provider_module, "_run", run)
    provider = LocalProvider(tmp_path / "local")
    files = VmFiles(tmp_path / "local" / "tv-a")
    provider.create(spec(local_nvme_gib=750), OFFER)
    for i in range(2):  # two 375 GiB devices, thin: nothing written yet
        info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", str(files.nvme(i))],
                                         capture_output=True, text=True, check=True).stdout)
        assert info["virtual-size"] == 375 * 2**30 and info["format"] == "qcow2" and info["actual-size"] < 2**20
    assert "serial=trainvm-nvme1" in " ".join(started[0])
    assert _qemu_io(files.nvme(0), "write -P 0xab 0 64k")  # the guest's scratch data
    assert _qemu_io(files.nvme(0), "read -P 0xab 0 64k") and not _qemu_io(files.nvme(0), "read -P 0 0 64k")
    provider.stop("tv-a")  # the data is discarded, as GCE's stop discards Local SSD data
    assert not files.nvme(0).exists() and not files.nvme(1).exists() and files.disk.is_file()
    provider.start("tv-a")
    def disks(argv: list[str]) -> list[str]:
        return [argv[i + 1] for i, a in enumerate(argv) if a in ("-drive", "-device")]

    assert len(started) == 2 and disks(started[1]) == disks(started[0])  # the same devices
    assert _qemu_io(files.nvme(0), "read -P 0 0 64k") and _qemu_io(files.nvme(1), "read -P 0 0 64k")  # blank again
    assert _qemu_io(files.nvme(0), "write -P 0xcd 0 64k")  # then a poweroff inside the guest: start blanks it too
    provider.start("tv-a")
    assert _qemu_io(files.nvme(0), "read -P 0 0 64k")
    assert provider.delete("tv-a") and not files.root.exists()


def test_the_local_store_keeps_a_payload_until_down_of_the_last_vm_that_names_it(tmp_path: Path) -> None:
    """What `plan --cloud local` says of the store ("kept until `trainvm down` of the last VM that uses it"), through
    down's own release (commands/down.py ``release_payload``): a stopped VM naming it keeps it too."""
    data = b"payload"
    sha = hashlib.sha256(data).hexdigest()
    provider = LocalProvider(tmp_path)
    provider.payload_store().stage("this-machine", data, sha)
    for name in ("tv-a", "tv-b"):
        files = VmFiles(tmp_path / name)
        files.root.mkdir()
        vms.save(files, {"profile": "p", "hash": "ab" * 32, "payload": sha[:16], "ssh_user": "debian"})
    rec_a, rec_b = provider.find("tv-a"), provider.find("tv-b")
    assert rec_a is not None and rec_b is not None and rec_a.payload == sha[:16]
    assert release_payload(provider, rec_a, "tv-a")["state"] == "kept"  # tv-b (stopped) still names it
    assert provider.delete("tv-a") and provider.payload_store().stored("this-machine") == [sha]
    assert release_payload(provider, rec_b, "tv-b")["state"] == "released"
    assert provider.payload_store().stored("this-machine") == []


def test_a_payload_the_local_store_cannot_remove_is_reported_as_staying_there(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """down never fails on the store, and on local it does not promise the clouds' 30-day lifecycle rule: nothing
    expires there (PayloadStoreFacts.expires=False). An OS error other than "not there" is the store's error."""
    provider, rec = _one_vm_naming_a_payload(tmp_path)

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "unlink", refuse)
    out = release_payload(provider, rec, "tv-a")
    assert out["state"] == "error"
    assert "Permission denied" in str(out["message"]) and "30 days" not in str(out["message"])
    assert "nothing removes it on its own" in str(out["message"])


@pytest.mark.skipif(not QEMU_IMG or shutil.which("genisoimage") is None,
                    reason="qemu-img (Debian qemu-utils) or genisoimage missing")
def test_a_boot_disk_smaller_than_the_base_image_is_refused_not_cut_short(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """qemu-img makes an overlay smaller than its backing file without a word (qemu-img 7.2): the guest would see a
    disk cut short. The provider refuses it before anything is made, as GCE refuses a disk smaller than its image."""
    base = tmp_path / "base.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "3G"], check=True)
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", str(base))
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", "")
    monkeypatch.setattr(provider_module, "_run", lambda argv: None if argv[0] == "qemu-system-x86_64" else subprocess.run(argv, check=True))
    provider = LocalProvider(tmp_path / "local")
    with pytest.raises(InvalidRequestError, match=r"boot disk \(2 GiB\) is smaller than the base image's disk \(3\.0 GiB"):
        provider.create(spec(boot_disk_gib=2), OFFER)
    assert not (tmp_path / "local" / "tv-a").exists()
    provider.create(spec(name="tv-b", boot_disk_gib=3), OFFER)  # as large as the base: made
    assert (tmp_path / "local" / "tv-b" / "disk.qcow2").is_file()


def test_a_listing_error_while_releasing_a_payload_is_reported_not_raised(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The one release (providers/store.py, used by ``down`` and ``bake``) never fails the command: a cloud error of
    any kind while it asks which VMs name the payload (credentials expired mid-command, not only the store's
    ProviderError) is reported, and the object stays."""
    provider, rec = _one_vm_naming_a_payload(tmp_path)

    def refuse(self: LocalProvider) -> list[object]:
        raise CredentialsError("the session expired")

    monkeypatch.setattr(LocalProvider, "list", refuse)
    out = release_payload(provider, rec, "tv-a")
    assert out["state"] == "error" and "the session expired" in str(out["message"])
    assert provider.payload_store().stored("this-machine") == [hashlib.sha256(b"payload").hexdigest()]


def _one_vm_naming_a_payload(root: Path) -> tuple[LocalProvider, InstanceRecord]:
    """A staged payload and a stopped VM ``tv-a`` whose record names it."""
    data = b"payload"
    sha = hashlib.sha256(data).hexdigest()
    provider = LocalProvider(root)
    provider.payload_store().stage("this-machine", data, sha)
    files = VmFiles(root / "tv-a")
    files.root.mkdir()
    vms.save(files, {"profile": "p", "hash": "ab" * 32, "payload": sha[:16], "ssh_user": "debian"})
    rec = provider.find("tv-a")
    assert rec is not None
    return provider, rec


def test_the_report_is_read_where_the_vm_publishes_it_then_from_the_console(tmp_path: Path) -> None:
    """The startup script publishes its report through the VM's endpoint (``tv_publish report``: VMDIR/status/report,
    templates/entry/_local.sh.j2), as GCE's guest attribute; the console's last TRAINVM_REPORT line is the fallback."""
    provider, _ = _one_vm_naming_a_payload(tmp_path)
    assert provider.read_report("tv-a")[0] is None  # nothing published, no console yet
    status = tmp_path / "tv-a" / "status"
    status.mkdir()
    (status / "report").write_bytes((REPO / "tests/fixtures/probe/report-vm-t4.json").read_bytes())
    report = provider.read_report("tv-a")[0]
    assert report is not None and report.driver == json.loads((status / "report").read_text())["driver"]


def test_ssh_probes_the_forwarded_port_not_22(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`trainvm ssh` first checks that SSH answers (TRAINVM_SSH_PROBE_SECONDS): on local that is the port QEMU
    forwards from 127.0.0.1, not 22 (seen in tests/vm/locallane.py: "SSH (tcp:22) ... did not answer" while the
    VM's sshd answered on its forwarded port)."""
    import socket

    from provisioner.commands import ssh as ssh_command

    files = VmFiles(tmp_path / "tv-a")
    files.root.mkdir()
    with socket.socket() as listener:  # the VM's forwarded port, answering
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        vms.save(files, {"profile": "p", "hash": "ab" * 32, "instance_type": OFFER.instance_type, "ssh_user": "debian",
                         "ssh_port": port, "trainvm-profile": "{}"})
        monkeypatch.setattr(vms, "state", lambda files: "RUNNING")
        monkeypatch.setattr(ssh_command, "providers_for", lambda cloud: {"local": LocalProvider(tmp_path)})
        ran: list[list[str]] = []
        monkeypatch.setattr(ssh_command, "_exec", ran.append)
        monkeypatch.setattr(shutil, "which", lambda tool: f"/usr/bin/{tool}")
        assert ssh_command.run_ssh("tv-a", ["true"], cloud="local") == 0
    assert ran and ran[0][:3] == ["ssh", "-p", str(port)]
