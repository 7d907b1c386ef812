"""Runs a rendered startup script unprivileged: ``TRAINVM_ROOT=<tmp>/root``, a clean environment
(``env -i``: only what is set here), and the stub commands of ``bin/`` first on PATH. Stubs
record their argv in ``<tmp>/stub/calls.log`` and keep a fake machine state (installed packages,
loaded kernel module, filesystems, mounts) in ``<tmp>/stub``; scenario knobs are STUB_*
environment variables read by the stubs (documented in each stub).

``reboot()`` and ``stop_start()`` change the fake machine the way a real one changes between two
runs of the script (GCE re-runs it every boot; elsewhere trainvm-provision.service does).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.agent.bundle import bundle_files

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"

OS_RELEASE = {
    "ubuntu-22.04": 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=jammy\n',
    "ubuntu-24.04": 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=noble\n',
    "debian-12": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n',
}
NVME_LINKS = {
    "gcp": "dev/disk/by-id/google-local-nvme-ssd-{i}",
    "azure": "dev/disk/azure/local/by-serial/3c5e1d3a2b1f0{i}",
    "aws": "dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1A2B3C4D5E6F7G{i}",
}
KERNEL = {"gcp": "5.15.0-1071-gcp", "azure": "6.5.0-1025-azure", "aws": "6.8.0-1019-aws"}


@dataclass
class Call:
    name: str
    args: list[str]

    @property
    def line(self) -> str:
        return " ".join([self.name, *self.args])


@dataclass
class Run:
    rc: int
    output: str
    calls: list[Call]
    report: dict[str, Any] | None
    report_lines: int
    statuses: list[str] = field(default_factory=list)
    apt_env: list[str] = field(default_factory=list)  # DEBIAN_FRONTEND of each apt-get call

    @property
    def status(self) -> str | None:
        return self.statuses[-1] if self.statuses else None

    def named(self, name: str) -> list[Call]:
        return [c for c in self.calls if c.name == name]

    def lines(self, name: str) -> list[str]:
        return [c.line for c in self.named(name)]

    def installs(self) -> list[str]:
        """Everything this run installed: apt-get install/update, uv python/pip installs."""
        out = [c.line for c in self.named("apt-get") if {"install", "update"} & set(c.args)]
        out += [c.line for c in self.named("uv") if c.args[:2] in (["python", "install"], ["pip", "install"])]
        return out


class Harness:
    def __init__(self, tmp: Path, script: str, *, cloud: str = "gcp", os_name: str = "ubuntu-22.04",
                 nvme_disks: int = 0, **knobs: str) -> None:
        self.tmp = Path(tmp)
        self.root = self.tmp / "root"
        self.state = self.tmp / "stub"
        self.cwd = self.tmp / "cwd"
        self.script = self.tmp / "startup.sh"
        self.cloud = cloud
        kernel = "6.1.0-27-cloud-amd64" if os_name.startswith("debian") else KERNEL[cloud]
        self.knobs = {"STUB_KERNEL": kernel, **knobs}
        self.runs = 0
        for d in (self.root, self.state, self.cwd, self.tmp / "home"):
            d.mkdir(parents=True, exist_ok=True)
        self.script.write_text(script, encoding="utf-8")
        etc = self.root / "etc"
        etc.mkdir(exist_ok=True)
        (etc / "os-release").write_text(OS_RELEASE[os_name])
        (etc / "fstab").write_text("LABEL=cloudimg-rootfs / ext4 defaults 0 1\n")
        if os_name.startswith("debian"):
            (etc / "apt/sources.list.d").mkdir(parents=True)
            (etc / "apt/sources.list.d/debian.sources").write_text(
                "Types: deb deb-src\nURIs: mirror+file:///etc/apt/mirrors/debian.list\nSuites: bookworm bookworm-updates\nComponents: main\n"
            )
        proc = self.root / "proc"
        proc.mkdir()
        (proc / "cpuinfo").write_text("".join(f"processor\t: {i}\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\n" for i in range(8)))
        (proc / "meminfo").write_text("MemTotal:       32873236 kB\nMemFree:        30000000 kB\n")
        (self.root / "var/run").mkdir(parents=True)
        (proc / "sys/kernel/random").mkdir(parents=True)
        self.boots = 0
        self._new_boot_id()
        # What the cloud image has installed (dpkg database of the fake machine).
        kver = self.knobs["STUB_KERNEL"]
        flavour = kver.rsplit("-", 1)[-1]
        image = [f"linux-image-{kver}", f"linux-modules-{kver}", "python3", "curl", "mokutil"]
        image += ["linux-image-cloud-amd64"] if os_name.startswith("debian") else [f"linux-{flavour}", f"linux-image-{flavour}"]
        (self.state / "installed").write_text("".join(f"{p} 1.0-image\n" for p in image))
        self.unpack_payload()
        for i in range(nvme_disks):
            dev = self.root / f"dev/nvme0n{i + 2}"
            dev.parent.mkdir(parents=True, exist_ok=True)
            dev.write_text("")
            link = self.root / NVME_LINKS[cloud].format(i=i)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(dev)

    def unpack_payload(self) -> None:
        """The payload's agent (provisioner.agent.bundle_files) where the script runs it, /opt/trainvm/current/agent:
        what the bootstrap unpacks before it runs the script."""
        payload = self.root / "opt/trainvm/payloads/stub"
        for rel, data in bundle_files().items():
            (payload / "agent" / rel).parent.mkdir(parents=True, exist_ok=True)
            (payload / "agent" / rel).write_bytes(data)
        current = self.root / "opt/trainvm/current"
        if not current.is_symlink():
            current.symlink_to("payloads/stub")

    # ------------------------------------------------------------------ running
    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": f"{BIN}:/usr/bin:/bin",
            "HOME": str(self.tmp / "home"),
            "TRAINVM_ROOT": str(self.root),
            "TRAINVM_RETRY_SLEEP": "0",
            "STUB_STATE": str(self.state),
            "STUB_LIB": str(HERE / "lib.sh"),
            "STUB_DIR": str(HERE),
            "STUB_REAL_PYTHON": sys.executable,
            **self.knobs,
            **extra,
        }

    def run(self, *, release_lock_after: float | None = None, **extra: str) -> Run:
        self.runs += 1
        for name in ("calls", "apt-env"):
            log = self.state / f"{name}.log"
            if log.exists():
                log.rename(self.state / f"{name}.{self.runs - 1}.log")
        timer = None
        if release_lock_after is not None:
            timer = threading.Timer(release_lock_after, lambda: (self.state / "dpkg.lock").unlink(missing_ok=True))
            timer.start()
        try:
            proc = subprocess.run(["bash", str(self.script)], env=self.env(**extra), cwd=self.cwd,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120, text=True)
        finally:
            if timer:
                timer.cancel()
        return self._result(proc.returncode, proc.stdout)

    def run_file(self, path: str | Path, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run another program (e.g. the installed idle watchdog) in the same stub world."""
        return subprocess.run(["bash", str(path)], env=self.env(**extra), cwd=self.cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=60, text=True)

    def _result(self, rc: int, output: str) -> Run:
        calls = []
        log = self.state / "calls.log"
        if log.exists():
            for line in log.read_text(encoding="utf-8").splitlines():
                name, *args = line.split("\t")
                calls.append(Call(name, args))
        report_lines = [ln for ln in output.splitlines() if ln.startswith("TRAINVM_REPORT=")]
        report = None
        if report_lines:
            report = json.loads(base64.b64decode(report_lines[-1].split("=", 1)[1]))
        statuses = [ln.split("=", 1)[1] for ln in output.splitlines() if ln.startswith("TRAINVM_STATUS=")]
        env_log = self.state / "apt-env.log"
        apt_env = env_log.read_text().split() if env_log.exists() else []
        return Run(rc, output, calls, report, len(report_lines), statuses, apt_env)

    # ------------------------------------------------------------------ machine events
    def reboot(self) -> None:
        """A guest reboot: the kernel module and mounts are gone, /var/run is empty, RAID arrays
        are not assembled yet (device nodes live in devtmpfs); disks keep their data."""
        shutil.rmtree(self.root / "dev/md", ignore_errors=True)
        (self.root / "proc/mounts").unlink(missing_ok=True)
        shutil.rmtree(self.root / "sys/block", ignore_errors=True)
        for name in ("kmod", "mounts"):
            path = self.state / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        shutil.rmtree(self.root / "proc/driver", ignore_errors=True)
        shutil.rmtree(self.root / "var/run", ignore_errors=True)
        (self.root / "var/run").mkdir(parents=True)
        shutil.rmtree(self.root / "run", ignore_errors=True)  # tmpfs
        self._new_boot_id()

    def _new_boot_id(self) -> None:
        """/proc/sys/kernel/random/boot_id: a new random UUID at every boot."""
        self.boots += 1
        (self.root / "proc/sys/kernel/random/boot_id").write_text(f"00000000-0000-4000-8000-{self.boots:012d}\n")

    def stop_start(self, stages: tuple[str, ...] = ()) -> None:
        """Stop/start: also local NVMe comes back blank (no filesystem, no RAID, no data)."""
        self.reboot()
        for name in ("fs", "md"):
            shutil.rmtree(self.state / name, ignore_errors=True)
        for stage in stages:
            target = self.root / stage.lstrip("/")
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()

    def process(self, pid: int, comm: str, fds: tuple[str, ...] = ()) -> None:
        """A running process of the fake machine: /proc/PID/comm and fd links (e.g. /dev/nvidia0)."""
        d = self.root / f"proc/{pid}"
        (d / "fd").mkdir(parents=True, exist_ok=True)
        (d / "comm").write_text(comm + "\n")
        for i, target in enumerate(fds, start=3):
            (d / f"fd/{i}").symlink_to(target)

    def hold_dpkg_lock(self) -> None:
        (self.state / "dpkg.lock").write_text("4242\n")

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    @property
    def pwned(self) -> bool:
        return (self.state / "PWNED").exists()

    @staticmethod
    def available() -> bool:
        return all(shutil.which(t) for t in ("bash", "flock", "base64", "cmp", "awk", "find", "tee"))


def env_file_values(harness: Harness) -> dict[str, str]:
    """Source /etc/trainvm/env in a clean bash (with the canary on PATH) and read the values back."""
    script = 'set -a; . "$1"; set +a; env -0'
    proc = subprocess.run(["bash", "-c", script, "bash", str(harness.path("/etc/trainvm/env"))],
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "STUB_STATE": str(harness.state), "STUB_LIB": str(HERE / "lib.sh")},
                          stdout=subprocess.PIPE, check=True)
    out = {}
    for item in proc.stdout.split(b"\0"):
        if b"=" in item:
            key, _, value = item.partition(b"=")
            out[key.decode()] = value.decode("utf-8", "surrogateescape")
    return out


def clean_env_keys() -> set[str]:
    """Variables a bare `bash -c 'env -0'` has by itself (to subtract from env_file_values)."""
    proc = subprocess.run(["bash", "-c", "env -0"], env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, check=True)
    return {item.split(b"=", 1)[0].decode() for item in proc.stdout.split(b"\0") if b"=" in item}


__all__ = ["Call", "Harness", "Run", "clean_env_keys", "env_file_values"]
