"""The Debian 12 VM image of the VM lane (issue 38), built here from Debian's packages, and one QEMU boot of it.

No cloud image download is reachable from the machines this project is built on, so the lane's base image is made
locally, shaped like Debian's ``genericcloud`` image where trainvm's bootstrap and startup script can tell:

- ``debootstrap --variant=minbase`` of bookworm with the cloud kernel (``linux-image-cloud-amd64``, the kernel Debian's
  cloud images boot), systemd as PID 1, cloud-init (22.4 in bookworm), openssh-server, curl, python3, gnupg,
  unattended-upgrades and ifupdown + isc-dhcp-client (what cloud-init's ENI renderer drives on Debian 12); deb822
  sources for bookworm, bookworm-updates and bookworm-security (main), as the cloud image has them;
- cloud-init reads only NoCloud (``datasource_list: [NoCloud, None]``): the user data arrives on a ``cidata`` ISO
  attached as a virtio disk (the cloud kernel has no AHCI driver, so a q35 SATA CD-ROM is not seen: cloud-init then
  falls back to DataSourceNone and runs no user data), as the local cloud will hand it over;
- one MBR partition (ext4, label ``root``) booted by EXTLINUX from ``/boot/extlinux/extlinux.conf``, whose entries point
  at the ``/vmlinuz`` and ``/initrd.img`` links Debian's kernel packages keep current, so a kernel that the startup
  script installs is the one booted after a reboot, as with GRUB on a cloud image; console on ttyS0 (the serial log
  the local cloud's ``logs`` reads).

Not the cloud image: no GRUB (EXTLINUX needs no partition scan of a loop device, which containers often lack), no
``cloud-guest-utils``/growpart (the disk is made at its final size), no Google/Azure/AWS guest agents.

    python tests/vm/image.py build            # the qcow2 (cached by content key under $TRAINVM_VM_CACHE)
    python tests/vm/image.py smoke            # boot it once with a user-data that prints the kernel and powers off

Needs root (debootstrap, a loop mount for extlinux), debootstrap, qemu-system-x86, qemu-utils, extlinux,
syslinux-common and genisoimage; :func:`missing` names what is not there."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: run as a script too
from tests.realos.osroot import SOURCES  # noqa: E402  (the cloud image's deb822 sources, as the chroot lane has them)

MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
PACKAGES = ("ca-certificates,systemd-sysv,dbus,udev,kmod,openssh-server,python3,curl,unattended-upgrades,e2fsprogs,"
            "cloud-init,python3-cffi-backend,linux-image-cloud-amd64,ifupdown,isc-dhcp-client,netbase,iproute2,sudo,gnupg")
#: files written into the root filesystem (path -> text)
FILES = {
    "etc/apt/sources.list.d/debian.sources": SOURCES,
    "etc/fstab": "LABEL=root / ext4 rw,discard,errors=remount-ro 0 1\n",
    "etc/hostname": "localhost\n",
    "etc/cloud/cloud.cfg.d/90_trainvm_vm_lane.cfg": "datasource_list: [NoCloud, None]\n",
    "etc/network/interfaces": "source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n",
    "boot/extlinux/extlinux.conf": (
        "DEFAULT debian\nTIMEOUT 1\nPROMPT 0\n"
        "LABEL debian\n  LINUX /vmlinuz\n  INITRD /initrd.img\n"
        "  APPEND root=LABEL=root ro console=ttyS0,115200n8 earlyprintk=ttyS0 net.ifnames=0\n"),
}
DISK_GIB = 8
KEY = hashlib.sha256(repr((SUITE, MIRROR, PACKAGES, sorted(FILES.items()), DISK_GIB)).encode()).hexdigest()[:16]
TOOLS = {"debootstrap": "debootstrap", "qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils",
         "extlinux": "extlinux", "genisoimage": "genisoimage", "sfdisk": "fdisk", "mkfs.ext4": "e2fsprogs"}
MBR = Path("/usr/lib/syslinux/mbr/mbr.bin")


def cache_dir() -> Path:
    return Path(os.environ.get("TRAINVM_VM_CACHE", "/var/cache/trainvm-vm"))


def missing() -> list[str]:
    """What the lane needs and this machine lacks, in words (empty: all there)."""
    out = [f"{tool} (apt-get install {pkg})" for tool, pkg in TOOLS.items() if shutil.which(tool) is None]
    if not MBR.exists():
        out.append(f"{MBR} (apt-get install syslinux-common)")
    if os.geteuid() != 0:
        out.append("root (debootstrap and the loop mount for extlinux)")
    return out


def sh(*argv: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], check=True, text=True, **kw)  # type: ignore[call-overload]


def _rootfs(cache: Path, log: Callable[[str], None]) -> Path:
    root = cache / f"rootfs-{KEY}"
    if (root / ".complete").exists():
        return root
    if not (root / ".debootstrapped").exists():
        shutil.rmtree(root, ignore_errors=True)
        log(f"debootstrap {SUITE} ({PACKAGES.count(',') + 1} packages and their dependencies) into {root}")
        sh("debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE, root, MIRROR, stdout=subprocess.DEVNULL)
        (root / ".debootstrapped").write_text(KEY + "\n", encoding="utf-8")
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    # a serial login on the console, machine-id made at first boot (each VM its own), no apt lists or .debs kept
    (root / "etc/machine-id").write_text("", encoding="utf-8")
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    (root / ".complete").write_text(KEY + "\n", encoding="utf-8")
    return root


def build(cache: Path | None = None, log: Callable[[str], None] = print) -> Path:
    """The lane's base image (qcow2), built once per content key."""
    cache = cache or cache_dir()
    image = cache / f"debian-12-trainvm-lane-{KEY}.qcow2"
    if _needed(image):
        _disk(_rootfs(cache, log), image, log)
    return image


def _needed(image: Path) -> bool:
    """Whether ``image`` must be built (then this machine can: else SystemExit naming what it lacks)."""
    if image.exists():
        return False
    if problems := missing():
        raise SystemExit("the VM lane needs: " + "; ".join(problems))
    image.parent.mkdir(parents=True, exist_ok=True)
    return True


def derive(name: str, files: dict[str, bytes], cache: Path | None = None, log: Callable[[str], None] = print) -> Path:
    """The base image with ``files`` (path -> bytes) added and the CA store renewed (``update-ca-certificates`` in
    the root filesystem), built once per content key: a lane's own changes to the image (its CAs, host names and unit
    drop-ins), made before the first boot instead of by user data, so the user data stays the product's own."""
    cache = cache or cache_dir()
    key = hashlib.sha256(repr((KEY, sorted(files.items()))).encode()).hexdigest()[:16]
    image = cache / f"debian-12-trainvm-{name}-{key}.qcow2"
    if not _needed(image):
        return image
    base = _rootfs(cache, log)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        work = Path(tmp)
        for d in ("upper", "wd", "root"):
            (work / d).mkdir()
        root = work / "root"
        sh("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={base},upperdir={work / 'upper'},workdir={work / 'wd'}",
           root)
        try:
            for rel, data in files.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(data)
            sh("chroot", root, "update-ca-certificates", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _disk(root, image, log)
        finally:
            sh("umount", root)
    return image


def _disk(root: Path, image: Path, log: Callable[[str], None]) -> None:
    """The qcow2 ``image`` of one bootable MBR disk holding ``root`` (EXTLINUX)."""
    with tempfile.TemporaryDirectory(dir=image.parent) as tmp:
        raw, mnt = Path(tmp) / "disk.raw", Path(tmp) / "mnt"
        offset = 1024 * 1024
        with raw.open("wb") as fh:
            fh.truncate(DISK_GIB * 1024**3)
        sh("sfdisk", "-q", raw, input="label: dos\nstart=2048, type=83, bootable\n")
        blocks = (DISK_GIB * 1024**3 - offset) // 1024
        # no 64bit / metadata_csum: EXTLINUX 6.04 reads neither (the kernel would; the boot loader would not)
        log(f"ext4 filesystem from {root} ({DISK_GIB} GiB disk)")
        sh("mkfs.ext4", "-q", "-F", "-L", "root", "-O", "^64bit,^metadata_csum,^orphan_file", "-E", f"offset={offset}",
           "-d", root, raw, f"{blocks}k")
        with MBR.open("rb") as src, raw.open("r+b") as dst:
            dst.write(src.read(440))
        mnt.mkdir()
        sh("mount", "-o", f"loop,offset={offset}", raw, mnt)
        try:
            sh("extlinux", "--install", mnt / "boot/extlinux", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            sh("umount", mnt)
        log(f"qcow2 {image}")
        sh("qemu-img", "convert", "-q", "-c", "-O", "qcow2", raw, image.with_suffix(".part"))
        image.with_suffix(".part").rename(image)


@dataclass(frozen=True)
class Boot:
    rc: int
    seconds: float
    console: str


def seed_iso(dest: Path, user_data: str, instance_id: str) -> Path:
    """A NoCloud ``cidata`` ISO with ``user_data`` and a meta-data naming the instance."""
    src = dest.parent / (dest.stem + "-seed")
    src.mkdir()
    (src / "user-data").write_text(user_data, encoding="utf-8")
    (src / "meta-data").write_text(f"instance-id: {instance_id}\nlocal-hostname: {instance_id}\n", encoding="utf-8")
    sh("genisoimage", "-quiet", "-output", dest, "-volid", "cidata", "-joliet", "-rock", src / "user-data",
       src / "meta-data")
    return dest


def boot(base: Path, work: Path, user_data: str, timeout_s: float, *, smp: int = 2, mem_mib: int = 2048,
         no_reboot: bool = True, until: Callable[[str], bool] | None = None) -> Boot:
    """One boot of a fresh overlay of ``base`` under QEMU's TCG, with ``user_data``; returns when the guest powers
    off (QEMU exits) or after ``timeout_s`` (then killed, rc 124). The serial console is the returned text.
    ``no_reboot=False``: a reboot of the guest boots the same disk again (QEMU exits only at a power-off);
    ``until(console)``: asked every 5 s; True kills the VM (rc 125: the caller saw what it waited for)."""
    overlay, console = work / "disk.qcow2", work / "console.log"
    sh("qemu-img", "create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2", overlay)
    seed = seed_iso(work / "seed.iso", user_data, "lane-" + work.name[-8:])
    argv = ["qemu-system-x86_64", "-machine", "q35,accel=tcg", "-cpu", "max", "-smp", str(smp), "-m", str(mem_mib),
            "-display", "none", *(["-no-reboot"] if no_reboot else []), "-serial", f"file:{console}",
            "-drive", f"file={overlay},if=virtio,format=qcow2", "-drive", f"file={seed},if=virtio,format=raw,readonly=on",
            "-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0"]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rc: int | None = None
    while rc is None:
        try:
            rc = proc.wait(timeout=max(0.1, min(5.0, start + timeout_s - time.monotonic())))
        except subprocess.TimeoutExpired:
            seen = until is not None and console.exists() and until(console.read_text(encoding="utf-8", errors="replace"))
            if seen or time.monotonic() - start >= timeout_s:
                proc.kill()
                proc.wait()
                rc = 125 if seen else 124
    seconds = time.monotonic() - start
    return Boot(rc, seconds, console.read_text(encoding="utf-8", errors="replace") if console.exists() else "")


SMOKE = """#cloud-config
runcmd:
  - [sh, -c, 'echo "TRAINVM-LANE uname=$(uname -r) init=$(cat /proc/1/comm) cloud-init=$(cloud-init --version 2>&1)" >/dev/ttyS0']
  - [systemctl, poweroff]
"""


def main(argv: list[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else "build"
    t0 = time.monotonic()
    image = build()
    print(f"image {image} ({image.stat().st_size / 2**20:.0f} MiB, {time.monotonic() - t0:.0f} s)")
    if cmd == "smoke":
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            b = boot(image, Path(tmp), SMOKE, timeout_s=float(os.environ.get("TRAINVM_VM_TIMEOUT", "900")))
        line = next((x for x in b.console.splitlines() if "TRAINVM-LANE" in x and "uname=" in x), None)
        print(f"boot rc={b.rc} in {b.seconds:.0f} s under TCG: {line or 'no TRAINVM-LANE line'}")
        if line is None:
            print(b.console[-3000:])
            return 1
        return b.rc
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
