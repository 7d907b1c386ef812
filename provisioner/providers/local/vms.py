"""The local cloud's VMs as files: each VM's folder (providers/local/request.py ``VmFiles``) holds ``record.json``
(what ``up`` made it with: the labels the clouds keep as tags), and its state is read from its QEMU: the pid file's
process alive and QMP ``query-status`` running -> RUNNING; no process -> STOPPED (its disk stays)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from provisioner.errors import ProviderError
from provisioner.providers.base import InstanceRecord
from provisioner.providers.local import qmp
from provisioner.providers.local.host import REGION
from provisioner.providers.local.request import VmFiles

RECORD = "record.json"


@dataclass(frozen=True)
class LocalVm:
    files: VmFiles
    doc: dict[str, object]

    @property
    def name(self) -> str:
        return self.files.root.name

    def text(self, key: str) -> str | None:
        value = self.doc.get(key)
        return value if isinstance(value, str) else None

    @property
    def argv(self) -> list[str]:
        value = self.doc.get("qemu")
        return [str(a) for a in value] if isinstance(value, list) else []

    @property
    def nvme_gib(self) -> tuple[int, ...]:
        """The sizes of its local NVMe devices (none for a VM made without)."""
        value = self.doc.get("nvme_gib")
        return tuple(v for v in value if isinstance(v, int)) if isinstance(value, list) else ()

    @property
    def ssh_port(self) -> int:
        value = self.doc.get("ssh_port")
        return value if isinstance(value, int) else 0


def load(files: VmFiles) -> LocalVm | None:
    try:
        doc = json.loads((files.root / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return LocalVm(files, doc) if isinstance(doc, dict) else None


def save(files: VmFiles, doc: dict[str, object]) -> None:
    tmp = files.root / f".{RECORD}.tmp"
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
    os.replace(tmp, files.root / RECORD)


def pid_of(files: VmFiles) -> int | None:
    """The VM's QEMU process while it runs (the pid file's pid, alive and a QEMU), else None."""
    try:
        pid = int(files.pid.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"qemu-system" in cmdline and str(files.root).encode() in cmdline else None


def state(files: VmFiles) -> str:
    if pid_of(files) is None:
        return "STOPPED"
    try:
        status = qmp.execute(files.qmp, "query-status").get("status")
    except ProviderError:
        return "RUNNING"  # the process runs; its monitor did not answer in time (QEMU under load)
    return "RUNNING" if status == "running" else str(status).upper()


def record(vm: LocalVm) -> InstanceRecord:
    port = vm.ssh_port
    st = state(vm.files)
    return InstanceRecord(
        name=vm.name, cloud="local", region=REGION, zone=None, instance_type=vm.text("instance_type") or "",
        state=st, profile=vm.text("profile"), hash=vm.text("hash"), price_hourly=0.0, created=vm.text("created"),
        ip="127.0.0.1" if st == "RUNNING" else None, image=vm.text("base"),
        ssh_command=f"ssh -p {port} {vm.text('ssh_user')}@127.0.0.1" if st == "RUNNING" else None,
        ssh_user=vm.text("ssh_user"), ssh_port=port, owner=vm.text("owner"), payload=vm.text("payload"), disks_hourly=0.0,
        kept_hourly=0.0)
