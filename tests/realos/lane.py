"""`make test-os`: the rendered debian-12 startup script on a real Debian 12 userland (needs root).

- A debootstrap'ed bookworm root filesystem shaped like Debian's cloud image (deb822 sources with
  main only, cloud kernel metapackage, unattended-upgrades, curl, python3), cached under a content
  key in $TRAINVM_OS_CACHE (default /var/cache/trainvm-os); each run works on an overlay of it.
- A signed fake NVIDIA repository (tests/aptsim/fakerepo.py: Debian's real nvidia-graphics-drivers
  metadata renumbered to the pinned driver and a newer one, plus modelled NVIDIA top-level names),
  real (empty) .debs, served over HTTPS on 127.0.0.1:443 as developer.download.nvidia.com with a
  trustme CA the root filesystem trusts; cuda-keyring carries the repository's signing key.
- The script runs in a chroot with real apt, dpkg, dkms, curl, uv and PyPI (a small CPU-only set).
  Stubbed, because a container cannot have them: nvidia-smi, /proc/driver/nvidia/version, uname -r
  (reports the root filesystem's kernel), systemctl start/stop/is-active/daemon-reload (recorded;
  enable/disable/mask run for real), reboot (recorded), and uv's Python download (a relocatable
  copy of this interpreter's CPython announced through uv's own UV_PYTHON_DOWNLOADS_JSON_URL; uv
  still downloads, checks and installs it). The rendered script's only edit: TV_KEYRING_SHA256 is
  the fake keyring's.
- Asserts: ready; every installed package of the NVIDIA repository at exactly the pinned version;
  all of them held; `apt-get -s dist-upgrade` moves none; a second run installs nothing and exits
  0; the local-NVMe path (a loop device as google-local-nvme-ssd-0) formats, mounts and re-stages
  after a simulated stop/start, when the host allows loop devices.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "tests/aptsim")]

import osrepo  # noqa: E402
import osroot  # noqa: E402

DRIVER = "550.127.05"
PROFILE = """name: realos-deb12
hardware: {{gpu: T4, gpu_count: 1{nvme}}}
stack:
  os: debian-12
  driver: "{driver}"
  cuda: "12.4"
  python: "{python}"
  packages: [six==1.16.0, idna==3.7]
  env: {{PYTHONHASHSEED: "0", CUBLAS_WORKSPACE_CONFIG: ":4096:8"}}
data:
  - {{source: "https://developer.download.nvidia.com/trainvm-data/sample.bin", dest: /mnt/data/sample}}
"""


def log(msg: str) -> None:
    print(f"[test-os {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def render(work: Path, python: str, nvme: bool, keyring_sha: str) -> str:
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    path = work / "profile.yaml"
    path.write_text(PROFILE.format(driver=DRIVER, python=python, nvme=", local_nvme_gib: 375" if nvme else ""))
    lp = load_profile(path)
    target = RenderTarget("gcp", "n1-standard-8", "T4", 1, "us-central1", "us-central1-a", local_nvme_gib=375 if nvme else 0)
    script = render_script(lp, target).startup_sh
    script, n = re.subn(r"^TV_KEYRING_SHA256=\S+$", f"TV_KEYRING_SHA256={keyring_sha}", script, flags=re.M)
    assert n == 1
    return script


def run_script(root: Path, name: str) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        ["chroot", str(root), "env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
         "LANG=C.UTF-8", "TRAINVM_RETRY_SLEEP=2", "UV_PYTHON_DOWNLOADS_JSON_URL=file:///srv/pbs/downloads.json",
         # uv trusts its bundled roots, not the system store; this workplace reaches PyPI through a
         # TLS-inspecting proxy whose CA is only in the system store (not needed on a real VM)
         "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "UV_NATIVE_TLS=1",
         "/bin/bash", f"/root/{name}"],
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


def main() -> int:
    if os.geteuid() != 0:
        raise SystemExit("make test-os needs root (debootstrap, chroot, overlayfs, mounts)")
    if os.environ.get("TRAINVM_OS_UNSHARED") != "1":  # private mounts, gone when the lane exits
        os.environ["TRAINVM_OS_UNSHARED"] = "1"
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable, *sys.argv])
    t_start = time.monotonic()
    cache = Path(os.environ.get("TRAINVM_OS_CACHE", "/var/cache/trainvm-os"))
    work = Path(os.environ.get("TRAINVM_OS_WORK", "/var/tmp/trainvm-os-run"))
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    base, built = osroot.base_rootfs(cache, log)
    pydist = osroot.python_dist(cache, log)
    repo = osrepo.build(work / "www", [DRIVER], log)
    server = osrepo.serve(work / "www", work / "tls")
    root = osroot.overlay(base, work, log)
    loop = osroot.attach_nvme(work, log)
    osroot.vm_environment(root, work, repo, server, pydist, DRIVER, loop)
    python = pydist.version
    (root / "root/startup-script").write_text(render(work, python, loop is not None, repo.keyring_sha256))
    t_setup = time.monotonic() - t_start
    log(f"setup {t_setup:.0f} s (rootfs {'built' if built else 'cached'}); running the startup script")

    rc, out, t_first = run_script(root, "startup-script")
    (work / "run1.log").write_text(out)
    log(f"first run: rc {rc} in {t_first:.0f} s")
    check(rc == 0 and final_status(out) == "ready", "the script reaches ready", out)
    installed = dict(re.findall(r"^(\S+) (\S+) (?:install|hold) ok installed$",
                                in_root(root, "dpkg-query", "-W", "-f=${Package} ${Version} ${Status}\n"), re.M))
    driver_pkgs = {n: v for n, v in installed.items() if n in repo.names}
    check(len(driver_pkgs) > 30 and all(v == f"{DRIVER}-1" for v in driver_pkgs.values()),
          f"{len(driver_pkgs)} driver packages installed, all at exactly {DRIVER}-1",
          str({n: v for n, v in driver_pkgs.items() if v != f"{DRIVER}-1"}))
    held = set(in_root(root, "apt-mark", "showhold").split())
    check(set(driver_pkgs) <= held, "apt-mark showhold lists every installed driver package", str(set(driver_pkgs) - held))
    upgrade = in_root(root, "apt-get", "-s", "dist-upgrade")
    moved = [n for n in re.findall(r"^(?:Inst|Remv) (\S+)", upgrade, re.M) if n in repo.names]
    check(not moved, "apt-get -s dist-upgrade changes no driver package", upgrade)
    dpkg_log = root / "var/log/dpkg.log"
    before = dpkg_log.stat().st_size
    rc2, out2, t_second = run_script(root, "startup-script")
    (work / "run2.log").write_text(out2)
    check(rc2 == 0 and final_status(out2) == "ready" and dpkg_log.stat().st_size == before,
          f"a second run installs nothing and exits 0 ({t_second:.0f} s)", out2)
    if loop:
        check(osroot.mounted(root, "/mnt/data"), "local NVMe (loop device) formatted and mounted at /mnt/data")
        osroot.stop_start(root, loop)
        rc3, out3, t_third = run_script(root, "startup-script")
        (work / "run3.log").write_text(out3)
        check(rc3 == 0 and final_status(out3) == "ready" and "formatting" in out3 and osroot.mounted(root, "/mnt/data")
              and (root / "mnt/data/sample/sample.bin").exists(),
              f"after a stop/start (blank disk) the script formats, mounts and re-stages ({t_third:.0f} s)", out3)
    else:
        log("skipped: the local-NVMe path (this host offers no loop device)")
    server.shutdown()
    osroot.report_usage(cache, work, log)
    osroot.detach(loop)
    log(f"PASSED in {time.monotonic() - t_start:.0f} s (setup {t_setup:.0f} s, first run {t_first:.0f} s, second {t_second:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
