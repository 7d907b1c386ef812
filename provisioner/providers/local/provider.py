"""``LocalProvider``: the ``base.Provider`` contract for QEMU VMs on this machine. Composition: the request builder
(request.py) says what to run, vms.py reads a VM's record and state, qmp.py talks to its QEMU, store.py is the
payload store. Every VM is one folder under the local cloud's folder; ``delete`` removes it, nothing else is left.

Errors: a missing tool is an ``InvalidRequestError`` naming its Debian package (nothing to retry elsewhere); a base
image that is not set or not there names its setting; a failed QEMU start removes the VM's folder (``verified``)."""

from __future__ import annotations

import builtins
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from provisioner import settings
from provisioner.errors import ConflictError, InvalidRequestError, ProviderError
from provisioner.providers.base import InstanceRecord, LaunchSpec, owner_label
from provisioner.providers.local import qmp, request, vms
from provisioner.providers.local.request import VmFiles
from provisioner.providers.local.store import LocalStore
from provisioner.providers.offer import Offer
from provisioner.providers.ssh_key import read_public_key
from provisioner.providers.stack_report import StackReport, last_console_report, read_report

#: tool -> the Debian package that has it
TOOLS = {"qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils", "genisoimage": "genisoimage"}
#: the official cloud images' default user (Debian's and Ubuntu's cloud-init configuration)
SSH_USERS = {"debian": "debian", "ubuntu": "ubuntu"}
NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
#: the local cloud's own folders beside the VMs' (the payload store, the baked images): never a VM's name
RESERVED = frozenset({"store", "images"})
HOSTFWD = re.compile(r"hostfwd=tcp:127\.0\.0\.1:\d+-:22")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalProvider:
    NAME = "local"

    def __init__(self, root: Path | None = None, python: str | None = None) -> None:
        self.root = root or request.state_dir()
        self.python = python or sys.executable

    def _files(self, name: str) -> VmFiles:
        if not NAME_RE.fullmatch(name) or name in RESERVED:
            raise InvalidRequestError(f"{name!r} is not a local VM name (lower-case letters, digits and '-')")
        return VmFiles(self.root / name)

    def _vm(self, name: str) -> vms.LocalVm | None:
        try:
            return vms.load(self._files(name))
        except InvalidRequestError:
            return None

    def find(self, name: str) -> InstanceRecord | None:
        vm = self._vm(name)
        return vms.record(vm) if vm else None

    def list(self) -> builtins.list[InstanceRecord]:
        found = (vms.load(VmFiles(p)) for p in sorted(self.root.iterdir()) if p.is_dir()) if self.root.is_dir() else ()
        return [vms.record(vm) for vm in found if vm is not None]

    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        if spec.nodes > 1:
            raise InvalidRequestError("the local cloud makes one VM; hardware.nodes > 1 is not rehearsed yet")
        existing = self.find(spec.name)
        if existing is not None:
            if existing.hash != spec.profile_hash:
                raise ConflictError(f"a local VM named {spec.name} exists for another version of the profile "
                                    f"(hash {existing.hash}); run `trainvm down {spec.name}` or pass --name")
            return replace(existing, adopted=True)
        if self._files(spec.name).root.exists():  # no record in it: not a VM trainvm made, never touched
            raise ConflictError(f"{self.root / spec.name} exists and is not a trainvm VM; pass --name to choose another name")
        for tool, package in TOOLS.items():
            if shutil.which(tool) is None:
                raise InvalidRequestError(f"{tool} is not installed: the local cloud needs it (Debian package {package})")
        base = request.base_image(spec)
        if base is None or not Path(base).is_file():
            setting = request.base_setting(spec.os)
            raise InvalidRequestError(f"no base image for {spec.os} on the local cloud: set {setting} to the path of "
                                      f"its qcow2 cloud image" + (f" ({base} is not a file)" if base else ""))
        files = self._files(spec.name)
        files.root.mkdir(parents=True)
        try:
            self._make(spec, offer, files, base)
        except BaseException as exc:
            shutil.rmtree(files.root, ignore_errors=True)
            if isinstance(exc, ProviderError):
                raise exc.verified() from None
            raise
        record = self.find(spec.name)
        if record is None:
            raise ProviderError(f"the local VM {spec.name} vanished right after it was made")
        return record

    def _make(self, spec: LaunchSpec, offer: Offer, files: VmFiles, base: str) -> None:
        files.seed_dir.mkdir()
        for name, data in request.seed_files(spec, read_public_key(settings.text("TRAINVM_SSH_PUBLIC_KEY") or None)).items():
            (files.seed_dir / name).write_bytes(data)
        (files.root / "objects").write_text(f"{spec.payload.key}\n" if spec.payload else "")
        _run(request.seed_argv(files.seed, files.seed_dir))
        too_small = request.boot_disk_too_small(base, _virtual_bytes(base), spec.boot_disk_gib)
        if too_small:
            raise InvalidRequestError(too_small)
        _run(request.overlay_argv(base, files.disk, spec.boot_disk_gib))
        nvme = request.nvme_sizes(spec.local_nvme_gib)
        for argv in request.nvme_argv(files, nvme):
            _run(argv)
        port = free_port()
        argv = request.qemu_argv(spec, offer, files, ssh_port=port, accel=request.accelerator(), python=self.python)
        family = spec.os.split("-")[0]
        vms.save(files, {"profile": spec.profile_name, "hash": spec.profile_hash, "instance_type": offer.instance_type,
                         "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "base": base,
                         "os": spec.os, "ssh_user": SSH_USERS.get(family, family), "ssh_port": port,
                         "owner": owner_label(), "payload": spec.payload.sha256[:16] if spec.payload else None,
                         "trainvm-profile": spec.profile_json, "labels": spec.labels, "qemu": argv,
                         "nvme_gib": list(nvme)})
        _run(argv)

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        """ACPI power-off through QMP; after ``TRAINVM_LOCAL_STOP_SECONDS`` without the guest going down, a hard
        power-off (QMP ``quit``, then SIGKILL). The boot disk stays; the local NVMe devices' data is discarded (their
        files removed: ``start`` makes them blank again), as GCE's stop discards Local SSD data."""
        vm = self._vm(name)
        if vm is None:
            return None
        if vms.pid_of(vm.files) is not None:
            try:
                qmp.execute(vm.files.qmp, "system_powerdown")
            except ProviderError:
                pass  # the bound below powers it off
            if not _gone(vm.files, settings.seconds("TRAINVM_LOCAL_STOP_SECONDS", 120.0)):
                _kill(vm.files)
        if vms.pid_of(vm.files) is None:
            for i in range(len(vm.nvme_gib)):
                vm.files.nvme(i).unlink(missing_ok=True)
        return vms.record(vm)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        """Boot the same disk with the same seed (cloud-init sees the same instance: nothing runs twice), with blank
        local NVMe devices of the same sizes (whether ``stop`` or a poweroff inside the guest stopped it: a cloud's
        local SSDs come back empty after a stop)."""
        vm = self._vm(name)
        if vm is None:
            return None
        if vms.pid_of(vm.files) is None:
            for argv in request.nvme_argv(vm.files, vm.nvme_gib):
                _run(argv)
            port = free_port()
            argv = [HOSTFWD.sub(f"hostfwd=tcp:127.0.0.1:{port}-:22", a) for a in vm.argv]
            vms.save(vm.files, {**vm.doc, "ssh_port": port, "qemu": argv})
            _run(argv)
        return self.find(name)

    def delete(self, name: str, *, wait: bool = True) -> bool:
        try:
            files = self._files(name)
        except InvalidRequestError:
            return False
        if not files.root.is_dir():
            return False
        _kill(files)
        shutil.rmtree(files.root)
        return True

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        vm = self._vm(name)
        return None if vm is None else _read_from(vm.files.console, start)

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, object] | None]:
        """The report the VM published through its endpoint (``tv_publish report``: ``status/report``, as GCE's
        guest attribute), else the last one on its console (as GCE's serial port)."""
        vm = self._vm(name)
        if vm is None:
            return None, None
        published = _read_from(vm.files.root / "status" / "report", 0)[0]
        report = (read_report(published, f"the stack report of {name} (its endpoint's status/report)")
                  or last_console_report(_read_from(vm.files.console, 0)[0], f"{name}'s console"))
        try:
            profile = json.loads(vm.text("trainvm-profile") or "null")
        except ValueError:
            profile = None
        return report, profile if isinstance(profile, dict) else None

    def ssh_argv(self, record: InstanceRecord, command: builtins.list[str]) -> builtins.list[str]:
        vm = self._vm(record.name)
        port = vm.ssh_port if vm else 0
        return ["ssh", "-p", str(port), "-o", "StrictHostKeyChecking=accept-new",
                "-o", f"UserKnownHostsFile={self.root / record.name / 'known_hosts'}",
                f"{record.ssh_user or 'debian'}@127.0.0.1", *command]

    def open_ssh_hint(self, record: InstanceRecord) -> str:
        return "nothing to open: QEMU forwards a port of 127.0.0.1 on this machine to the VM's port 22"

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        return []

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        return {}

    def payload_store(self) -> LocalStore:
        return LocalStore(self.root)

    def live_status(self, record: InstanceRecord) -> str | None:
        try:
            return (self.root / record.name / "status" / "status").read_text().strip() or None
        except (OSError, InvalidRequestError):
            return None


def _run(argv: builtins.list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProviderError(f"{argv[0]} failed: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ProviderError(f"{argv[0]} exited {done.returncode}: {why}")


def _read_from(path: Path, start: int) -> tuple[str, int]:
    """The text of ``path`` from byte ``start`` and where it ends ("" when the file is not there yet)."""
    try:
        with path.open("rb") as f:
            f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return "", start
    return data.decode("utf-8", "replace"), start + len(data)


def _virtual_bytes(base: str) -> int:
    """The disk size a qcow2 image gives its guest (``qemu-img info``'s ``virtual-size``)."""
    try:
        done = subprocess.run(request.base_info_argv(base), capture_output=True, text=True, timeout=60, check=False)
        size = json.loads(done.stdout)["virtual-size"] if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as exc:
        raise ProviderError(f"qemu-img info {base} failed: {exc}") from None
    if not isinstance(size, int):
        raise InvalidRequestError(f"{base} is not a qcow2 image qemu-img can read: {done.stderr.strip()[-300:]}")
    return size


def _gone(files: VmFiles, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while vms.pid_of(files) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _kill(files: VmFiles) -> None:
    """A hard power-off: QMP ``quit``, then SIGKILL after 5 s."""
    if vms.pid_of(files) is None:
        return
    try:
        qmp.execute(files.qmp, "quit")
    except ProviderError:
        pass
    if not _gone(files, 5.0) and (pid := vms.pid_of(files)) is not None:
        os.kill(pid, signal.SIGKILL)
        _gone(files, 5.0)
