"""The local cloud's create request, built without running anything: the commands that make a QEMU VM on this
machine from a ``LaunchSpec`` and the offer (``up`` runs them, providers/local/; ``render`` previews them).

Decisions (QEMU's option reference: https://www.qemu.org/docs/master/system/invocation.html):

- The VM's folder ``$XDG_STATE_HOME/trainvm/local/NAME/`` (``TRAINVM_LOCAL_DIR`` instead of
  ``$XDG_STATE_HOME/trainvm/local``) holds everything of it: ``delete`` removes the folder and nothing is left.
- Boot disk: a qcow2 overlay on the base image (``qemu-img create -f qcow2 -b BASE -F qcow2 disk.qcow2 SIZE``): the
  base is never written, the overlay's virtual size is ``boot_disk.size_gib`` (cloud-init grows the root to it).
  The base is the file the OS's setting names (``TRAINVM_LOCAL_IMAGE_*``), or a baked image (``boot_image``).
- ``-machine q35``; the accelerator is ``TRAINVM_LOCAL_ACCEL``: ``tcg`` (default: emulation works everywhere; a
  nested KVM guest on a cloud VM can hang before the kernel's first message) or ``kvm`` (``-cpu host``).
- ``-smp`` / ``-m`` from the offer (providers/local/host.py sizes it from this machine).
- Disks are **virtio** (``if=virtio``), the cloud-init seed too: the Debian cloud kernel has no AHCI driver, so a
  SATA CD-ROM would not be seen. The seed is an ISO 9660 volume labelled ``cidata`` holding ``user-data`` (the
  bootstrap, as on every cloud) and ``meta-data`` (instance id and host name): cloud-init's NoCloud datasource
  (https://cloudinit.readthedocs.io/en/latest/reference/datasources/nocloud.html), made with genisoimage.
- Local NVMe (``hardware.local_nvme_gib``): virtual NVMe controllers, one per device
  (https://www.qemu.org/docs/master/system/devices/nvme.html: ``-drive file=...,if=none,id=ID`` and
  ``-device nvme,serial=...,drive=ID``), each backed by a sparse qcow2 in the VM's folder (``nvmeN.qcow2``, space
  taken as the guest writes; ``discard=unmap`` gives back what the guest discards). Split as GCE attaches Local SSD:
  one device per started 375 GiB (``NVME_DEVICE_GIB``), equal sizes (RAID0 stripes over the smallest member) adding
  up to at least the size asked, so a profile above 375 GiB runs the startup script's RAID0 path (mdadm) as on GCE.
  Serials ``trainvm-nvmeN``: the guest's udev names them ``/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_trainvm-nvmeN``
  (QEMU's default model string is ``QEMU NVMe Ctrl``; systemd's 60-persistent-storage.rules joins model and
  serial), which the local entry's ``tv_nvme_candidates`` (templates/entry/_local.sh.j2) matches. Their data does
  not survive a stop: ``start`` makes them blank again, as GCE discards Local SSD data on stop (and AWS instance
  store and Azure's local NVMe lose theirs), so a rehearsal runs the script's re-staging path; a reboot keeps it.
- ``-serial file:console.log``: the serial console, what ``logs`` reads.
- Network: user networking (no root, no bridge). ``hostfwd=tcp:127.0.0.1:PORT-:22`` is ``ssh`` (this machine only);
  ``guestfwd=tcp:10.0.2.100:80-cmd:PYTHON -m provisioner.providers.local.endpoint VMDIR``: QEMU spawns the command
  for each connection the guest opens to 10.0.2.100:80, its stdin/stdout being the connection. That endpoint
  serves the VM its payload (the objects its own record names) and takes the status the startup script PUTs:
  only this VM's QEMU spawns an endpoint bound to this VM's folder, as only a GCE VM reaches its own metadata
  server, so no credential travels in user data. No daemon is left behind: the endpoint lives per connection.
- ``-qmp unix:qmp.sock,server=on,wait=off``: QEMU's monitor, for ``query-status`` (``status``) and ACPI
  ``system_powerdown`` (``stop``).
- ``-daemonize -pidfile qemu.pid``: ``up`` returns once QEMU runs; the pid is how ``status`` and ``delete`` find it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from provisioner import settings
from provisioner.errors import InvalidRequestError
from provisioner.providers.base import LaunchSpec
from provisioner.providers.offer import Offer
from provisioner.providers.registry import LocalImage, cloud

#: the guest address the payload/status endpoint answers on (QEMU's user network is 10.0.2.0/24; .2 is the host
#: gateway, .3 the DNS server, .15 the guest: a free address of that network)
ENDPOINT_ADDR = "10.0.2.100"
ENDPOINT_PORT = 80
ACCELERATORS = ("tcg", "kvm")
SEED_VOLUME = "cidata"
#: one virtual NVMe device per started 375 GiB: GCE's Local SSD disk size (providers/gcp/families.py)
NVME_DEVICE_GIB = 375


@dataclass(frozen=True)
class VmFiles:
    """The files of one VM, all in its folder."""

    root: Path

    @property
    def disk(self) -> Path:
        return self.root / "disk.qcow2"

    @property
    def seed(self) -> Path:
        return self.root / "seed.iso"

    @property
    def seed_dir(self) -> Path:
        return self.root / "seed"

    def nvme(self, index: int) -> Path:
        return self.root / f"nvme{index}.qcow2"

    @property
    def console(self) -> Path:
        return self.root / "console.log"

    @property
    def qmp(self) -> Path:
        return self.root / "qmp.sock"

    @property
    def pid(self) -> Path:
        return self.root / "qemu.pid"


def state_dir() -> Path:
    """The local cloud's folder: ``TRAINVM_LOCAL_DIR``, else ``$XDG_STATE_HOME/trainvm/local`` (the XDG base
    directory default ``~/.local/state`` when unset)."""
    given = settings.text("TRAINVM_LOCAL_DIR")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "trainvm" / "local"


def accelerator() -> str:
    """``TRAINVM_LOCAL_ACCEL``: tcg (the default) or kvm."""
    accel = settings.text("TRAINVM_LOCAL_ACCEL", "tcg").strip().lower() or "tcg"
    if accel not in ACCELERATORS:
        raise InvalidRequestError(f"TRAINVM_LOCAL_ACCEL={accel!r}: expected one of {', '.join(ACCELERATORS)}")
    return accel


def base_setting(os_name: str) -> str:
    """The setting that names the base qcow2 of ``os_name``."""
    ref = cloud("local").os_images.get(os_name)
    if not isinstance(ref, LocalImage):
        raise InvalidRequestError(f"the local cloud has no image of {os_name}")
    return ref.setting


def base_image(spec: LaunchSpec) -> str | None:
    """The base the overlay is made on: the baked image, else the file the OS's setting names (None: unset)."""
    return spec.boot_image or settings.text(base_setting(spec.os)) or None


def overlay_argv(base: str, disk: Path | str, size_gib: int) -> list[str]:
    return ["qemu-img", "create", "-f", "qcow2", "-b", str(base), "-F", "qcow2", str(disk), f"{size_gib}G"]


def base_info_argv(base: str) -> list[str]:
    return ["qemu-img", "info", "--output=json", "-f", "qcow2", str(base)]


def boot_disk_too_small(base: str, base_virtual_bytes: int, size_gib: int) -> str | None:
    """Why a boot disk of ``size_gib`` cannot be made on ``base`` (None: it can). ``qemu-img create -b BASE ... SIZE``
    makes an overlay smaller than its backing file without a word (qemu-img 7.2), and the guest then sees a disk cut
    short; the clouds refuse it instead (GCE: a disk smaller than its image is an invalid request)."""
    if size_gib * 2**30 >= base_virtual_bytes:
        return None
    return (f"the profile's boot disk ({size_gib} GiB) is smaller than the base image's disk "
            f"({base_virtual_bytes / 2**30:.1f} GiB, {base}): raise hardware.boot_disk.size_gib")


def nvme_sizes(gib: int) -> tuple[int, ...]:
    """The GiB of each virtual NVMe device for ``local_nvme_gib`` = ``gib``: ``ceil(gib / 375)`` devices of equal
    size, together at least ``gib`` (none for 0)."""
    if gib <= 0:
        return ()
    count = math.ceil(gib / NVME_DEVICE_GIB)
    return (math.ceil(gib / count),) * count


def nvme_serial(index: int) -> str:
    """The serial of NVMe device ``index`` (at most 20 characters: the NVMe Identify Controller field)."""
    return f"trainvm-nvme{index}"


def nvme_argv(files: VmFiles, sizes: tuple[int, ...]) -> list[list[str]]:
    """The ``qemu-img`` commands that make the NVMe devices blank (a new sparse qcow2 replaces an old one)."""
    return [["qemu-img", "create", "-f", "qcow2", str(files.nvme(i)), f"{gib}G"] for i, gib in enumerate(sizes)]


def meta_data(spec: LaunchSpec, public_key: str | None = None) -> str:
    """NoCloud ``meta-data``: the instance id (a new one per VM: cloud-init runs its per-instance modules once for
    it), the host name and the user's SSH public key (``public-keys``: the default user's authorized key; a public
    key, no secret)."""
    iid = hashlib.sha256(f"{spec.name}\0{spec.profile_hash}".encode()).hexdigest()[:16]
    keys = f"public-keys:\n  - {json.dumps(public_key)}\n" if public_key else ""
    return f"instance-id: trainvm-{spec.name}-{iid}\nlocal-hostname: {spec.name}\n{keys}"


def seed_files(spec: LaunchSpec, public_key: str | None = None) -> dict[str, bytes]:
    """The files of the ``cidata`` seed volume."""
    data = spec.user_data if isinstance(spec.user_data, bytes) else spec.user_data.encode()
    return {"user-data": data, "meta-data": meta_data(spec, public_key).encode()}


def seed_argv(seed: Path | str, folder: Path | str) -> list[str]:
    """genisoimage: an ISO 9660 volume labelled ``cidata`` (Joliet and Rock Ridge names) of the files in ``folder``."""
    return ["genisoimage", "-quiet", "-output", str(seed), "-volid", SEED_VOLUME, "-joliet", "-rock", str(folder)]


def endpoint_command(python: str, root: Path | str) -> str:
    return f"{python} -m provisioner.providers.local.endpoint {root}"


def _opt(value: str) -> str:
    """A value inside a QEMU option list: a comma is written twice."""
    return value.replace(",", ",,")


def qemu_argv(spec: LaunchSpec, offer: Offer, files: VmFiles, *, ssh_port: int | str, accel: str,
              python: str) -> list[str]:
    """The ``qemu-system-x86_64`` command line of the VM (the module's docstring says each choice)."""
    if accel not in ACCELERATORS:
        raise InvalidRequestError(f"accelerator {accel!r}: expected one of {', '.join(ACCELERATORS)}")
    vcpus = max(1, int(offer.vcpus))
    memory_mib = max(512, int(offer.memory_gib * 1024))
    netdev = (f"user,id=net0,hostfwd=tcp:127.0.0.1:{ssh_port}-:22,"
              f"guestfwd=tcp:{ENDPOINT_ADDR}:{ENDPOINT_PORT}-cmd:{_opt(endpoint_command(python, files.root))}")
    return [
        "qemu-system-x86_64",
        "-name", spec.name,
        "-machine", "q35", "-accel", accel, "-cpu", "host" if accel == "kvm" else "max",
        "-smp", str(vcpus), "-m", f"{memory_mib}M",
        "-drive", f"file={_opt(str(files.disk))},if=virtio,format=qcow2",
        "-drive", f"file={_opt(str(files.seed))},if=virtio,format=raw,readonly=on",
        *_nvme_options(files, len(nvme_sizes(spec.local_nvme_gib))),
        "-netdev", netdev, "-device", "virtio-net-pci,netdev=net0",
        "-serial", f"file:{files.console}",
        "-qmp", f"unix:{_opt(str(files.qmp))},server=on,wait=off",
        "-display", "none", "-monitor", "none",
        "-daemonize", "-pidfile", str(files.pid),
    ]


def _nvme_options(files: VmFiles, count: int) -> list[str]:
    out: list[str] = []
    for i in range(count):
        out += ["-drive", f"file={_opt(str(files.nvme(i)))},if=none,id=nvme{i},format=qcow2,discard=unmap",
                "-device", f"nvme,drive=nvme{i},serial={nvme_serial(i)}"]
    return out


def request_preview(spec: LaunchSpec, offer: Offer) -> dict[str, object]:
    """What ``up`` would run for ``spec`` on ``offer``, offline: the overlay, the seed and QEMU's command line (the
    port, the interpreter and an unset base image as placeholders)."""
    files = VmFiles(state_dir() / spec.name)
    base = base_image(spec) or f"<the file ${base_setting(spec.os)} names>"
    seed = seed_files(spec)
    sizes = nvme_sizes(spec.local_nvme_gib)
    nvme: dict[str, object] = {"devices_gib": list(sizes), "serials": [nvme_serial(i) for i in range(len(sizes))],
                               "commands": nvme_argv(files, sizes),
                               "kept": "over a reboot; blank again at every start (data lost on stop, as on a cloud's local SSDs); "
                                       "removed by down"}
    return {
        "vm_dir": str(files.root),
        "accelerator": accelerator(),
        "overlay": overlay_argv(base, files.disk, spec.boot_disk_gib),
        "seed": {"format": "cloud-init NoCloud, ISO 9660 volume cidata (no size limit of an API)",
                 "files": {n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in seed.items()},
                 "command": seed_argv(files.seed, files.seed_dir)},
        **({"local_nvme": nvme} if sizes else {}),
        "qemu": qemu_argv(spec, offer, files, ssh_port="<a free port>", accel=accelerator(), python="<python>"),
    }
