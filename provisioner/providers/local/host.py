"""The local cloud's one offer: this machine, as a VM sized from it. A fact of the host read when ``plan`` asks
(the cloud's ``host_offers`` hook), not a row of the embedded price snapshot: the catalog is prices someone
published on a date, this is what the machine running trainvm has now.

The rule: as many vCPUs as the host has (``os.cpu_count()``), at most ``MAX_VCPUS``; half the host's memory
(``MemTotal`` of /proc/meminfo), rounded down to 0.5 GiB, at least 1 GiB and at most ``MAX_MEMORY_GIB``: the other
half stays with the host (QEMU itself, the page cache of the disk overlay, the user's own work). Price 0, no GPU,
region ``this-machine``. Local NVMe: up to the GiB free on the file system of the local cloud's folder, where the
virtual NVMe devices' files grow (providers/local/request.py); a profile that asks for more is still rehearsed on
thin devices of the size it asks, and the plan says the size was not checked (planner/checks.py). Pure apart from
the three reads, which the caller may hand in (tests)."""

from __future__ import annotations

import math
import os
import platform
import shutil
from pathlib import Path

from provisioner.providers.local.request import state_dir
from provisioner.providers.offer import Offer

MEMINFO = Path("/proc/meminfo")
MAX_VCPUS = 16
MAX_MEMORY_GIB = 32.0
MIN_MEMORY_GIB = 1.0
REGION = "this-machine"
FAMILY = "qemu"
#: what the offer's GPU fields say: none
NO_GPU = "none"
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


def mem_total_gib(meminfo: str) -> float:
    """``MemTotal`` of a /proc/meminfo text, in GiB (the kernel writes kB, which are KiB: proc(5))."""
    for line in meminfo.splitlines():
        key, _, rest = line.partition(":")
        if key.strip() == "MemTotal":
            parts = rest.split()
            if parts and parts[0].isdigit():
                return int(parts[0]) / (1024 * 1024)
    raise ValueError("/proc/meminfo has no MemTotal line")


def vm_size(cpus: int, total_gib: float) -> tuple[int, float]:
    """(vCPUs, memory GiB) of the VM this host offers (the rule in the module's docstring)."""
    vcpus = max(1, min(cpus, MAX_VCPUS))
    memory = min(MAX_MEMORY_GIB, max(MIN_MEMORY_GIB, math.floor(total_gib) / 2))  # half, rounded down to 0.5 GiB
    return vcpus, memory


def family_of(instance_type: str) -> str:
    """The catalog's ``family`` of a local shape: ``qemu`` for the VMs this module sizes."""
    return FAMILY if instance_type.startswith(f"{FAMILY}-") else instance_type


def free_gib(path: Path) -> int:
    """Whole GiB free on the file system that holds ``path`` (its nearest existing folder)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return int(shutil.disk_usage(path).free // 2**30)


def instance_type(vcpus: int, memory_gib: float) -> str:
    return f"qemu-{vcpus}vcpu-{memory_gib:g}gib"


def host_offers(*, cpu_count: int | None = None, meminfo: str | None = None, machine: str | None = None,
                disk_free_gib: int | None = None) -> tuple[Offer, ...]:
    """This machine's one offer (``cpu_count``, ``meminfo``, ``machine``, ``disk_free_gib``: read from the host when
    None)."""
    cpus = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    text = meminfo if meminfo is not None else MEMINFO.read_text()
    vcpus, memory = vm_size(cpus, mem_total_gib(text))
    name = (machine or platform.machine()).lower()
    arch = ARCHES.get(name, name)
    if disk_free_gib is None:
        disk_free_gib = free_gib(state_dir())
    return (Offer(cloud="local", instance_type=instance_type(vcpus, memory), family=FAMILY, gpu_name=NO_GPU,
                  gpu_count=0, gpu_memory_gib=0.0, vcpus=float(vcpus), memory_gib=memory, region=REGION, zone=None,
                  price_hourly=0.0, spot_price_hourly=None, gpu_attach="bundled",
                  disk_types=("standard", "balanced", "ssd"), local_nvme_max_gib=max(0, disk_free_gib), arch=arch),)
