"""Running the rendered script in the chroot of `make test-os`, and the lane's checks (see lane.py)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

# systemd's default PATH and no HOME, as google-startup-scripts/cloud-init/systemd run the script
BASE_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TRAINVM_RETRY_SLEEP=2",
    "UV_PYTHON_DOWNLOADS_JSON_URL=file:///srv/pbs/downloads.json",
    # uv trusts its bundled roots, not the system store; this workplace reaches PyPI through a
    # TLS-inspecting proxy whose CA is only in the system store (not needed on a real VM)
    "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "UV_SYSTEM_CERTS=1",
)
# what the lane needs on the host (tool -> the Debian package that has it)
HOST_TOOLS = {"chroot": "coreutils", "unshare": "util-linux", "mount": "mount", "losetup": "mount",
              "gpg": "gpg", "dpkg-deb": "dpkg", "dpkg-scanpackages": "dpkg-dev"}
PY_MODULES = {"trustme": "make install-dev", "moto": "make install-dev", "boto3": "make install-dev"}


def log(msg: str) -> None:
    print(f"[test-os {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def port_443_free() -> bool:
    """Whether the fake NVIDIA host can listen on 127.0.0.1:443 (another lane may be running)."""
    with socket.socket() as sock:
        # as the server binds (http.server: SO_REUSEADDR): a previous run's TIME-WAIT connections do not count
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", 443))
        except OSError:
            return False
    return True


def missing_prerequisites(*, uid: int, rootfs_cached: bool, which=shutil.which, port_free=port_443_free) -> list[str]:
    """What the host lacks for the lane, each with how to get it ([] when nothing)."""
    out = []
    if uid != 0:
        out.append("root (the lane uses chroot, overlayfs, mount namespaces and loop devices): run it as root")
    elif not port_free():
        out.append("127.0.0.1:443 is in use (the fake developer.download.nvidia.com listens there; is another make test-os running?)")
    if not rootfs_cached and which("debootstrap") is None:
        out.append("debootstrap (builds the Debian 12 root filesystem once): apt-get install debootstrap")
    for tool, pkg in HOST_TOOLS.items():
        if which(tool) is None:
            out.append(f"{tool}: apt-get install {pkg}")
    for mod, how in PY_MODULES.items():
        try:
            __import__(mod)
        except ImportError:
            out.append(f"the Python module {mod}: {how}")
    return out


def run_script(root: Path, name: str, extra_env: tuple[str, ...] = ()) -> tuple[int, str, float]:
    """Run /root/NAME (the script as user data/metadata hands it over) or the absolute path NAME (what a
    unit's ExecStart runs) in the chroot, with systemd's environment."""
    t0 = time.monotonic()
    argv = [name] if name.startswith("/") else ["/bin/bash", f"/root/{name}"]
    proc = subprocess.run(["chroot", str(root), "env", "-i", *BASE_ENV, *extra_env, *argv],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    return proc.returncode, proc.stdout, time.monotonic() - t0


def in_root(root: Path, *argv: str) -> str:
    return subprocess.run(["chroot", str(root), *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=600, check=False, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}).stdout


def final_status(out: str) -> str:
    statuses = re.findall(r"^TRAINVM_STATUS=(\S+)$", out, re.M)
    return statuses[-1] if statuses else ""


def check(cond: bool, what: str, detail: str = "") -> None:
    if not cond:
        raise SystemExit(f"test-os FAILED: {what}\n{detail[-6000:]}")
    log(f"ok: {what}")


def installed_packages(root: Path) -> dict[str, str]:
    return dict(re.findall(r"^(\S+) (\S+) (?:install|hold) ok installed$",
                           in_root(root, "dpkg-query", "-W", "-f=${Package} ${Version} ${Status}\n"), re.M))


def verify_units(root: Path) -> None:
    """``systemd-analyze verify`` (offline, inside the root filesystem) on every unit the script wrote."""
    units = sorted("/" + str(p.relative_to(root)) for p in (root / "etc/systemd/system").glob("trainvm-*")
                   if p.suffix in (".service", ".timer"))
    proc = subprocess.run(["chroot", str(root), "systemd-analyze", "verify", *units], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    check(bool(units) and proc.returncode == 0, f"systemd-analyze verify: {' '.join(units)}", proc.stdout)
