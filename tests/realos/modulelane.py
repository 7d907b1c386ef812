"""`make test-os-module`: the driver phase of the debian-12 script builds NVIDIA's REAL kernel module with DKMS (issue 38).

The chroot lane of `make test-os` (lane.py; what it models is said there), one gcp run, with these differences:

- The profile is a V100 (a GPU whose kernel modules are NVIDIA's proprietary ones, provisioner/compat/data/gpus.yaml)
  at driver 550.163.01 (nvidia_module.DRIVER, the version of the real module source), so the script's driver set is
  ``nvidia-driver-cuda`` + ``nvidia-kernel-dkms`` (render/install.py driver_set). The stubs say V100 (nvidia-smi)
  and NVIDIA's proprietary module (/proc/driver/nvidia/version): the GPU gate still reads stubs.
- In the fake NVIDIA repository ``nvidia-kernel-dkms`` 550.163.01-1 is Debian's real nvidia-kernel-dkms
  550.163.01-2 (trixie non-free) repacked under the replica's stanza (nvidia_module.py says what is real and what is
  modelled); every other package of the repository is empty, as in `make test-os`.

So the script's own ``apt-get install`` of the driver set runs the real postinst: DKMS (Debian 12's dkms 3.0.10, as
the script installs it) compiles the module source against the headers the script installed, those of the kernel the
``uname -r`` stub reports (the root filesystem's cloud kernel), and installs the modules under
/lib/modules/KVER/updates/dkms. Asserted: the script reaches ready; the real package is installed at the replica's
version; only that kernel's headers are installed (no generic headers metapackage or ABI); ``dkms status`` lists
nvidia-current/550.163.01 (Debian's DKMS name for NVIDIA's module) installed for KVER; the five modules are there
and ``modinfo -F vermagic`` of each starts with KVER. Logged, not asserted: what the rehearsal gate's
``modinfo -F vermagic nvidia`` finds in the chroot (modinfo asks the kernel, uname(2), not the stub, for the release:
the host's), the same with ``-k KVER``, the DKMS build's wall time (dpkg.log: configure to installed of
nvidia-kernel-dkms) and the machine's load average during the run.

Not modelled: loading the module (a chroot has no kernel of its own: ``modprobe nvidia`` fails against the host's),
nvidia-kernel-support's modprobe configuration (``alias nvidia nvidia-current``; its package is empty here), the
rehearsal gate (the gcp script has the real gate, which reads the stubs), a module signed for Secure Boot.

Environment: TRAINVM_OS_CACHE (default /var/cache/trainvm-os: rootfs, the downloaded and repacked package),
TRAINVM_OS_WORK (default /var/tmp/trainvm-os-module: run1.log, the overlay unless it passed), TRAINVM_OS_KEEP=1 keeps
the overlay. Needs root and what `make test-os` needs (runner.missing_prerequisites), apt-get and gpgv on the host,
deb.debian.org reachable once (the download is cached).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "tests/aptsim"), str(REPO)]

import bootlane  # noqa: E402
import lane  # noqa: E402
import nvidia_module  # noqa: E402
import osrepo  # noqa: E402
import osroot  # noqa: E402
from runner import check, final_status, in_root, installed_packages, log, missing_prerequisites, run_script  # noqa: E402

GPU = "V100"
DRIVER = nvidia_module.DRIVER
MODULES = ("", "-modeset", "-drm", "-uvm", "-peermem")  # dkms.conf's DEST_MODULE_NAMEs: nvidia-current<suffix>


def render(work: Path, python: str, keyring_sha: str):
    """The gcp RenderedScript of the V100 profile at DRIVER, its keyring edited (bootlane.repack)."""
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    path = work / "profile.yaml"
    path.write_text(lane.PROFILE.replace("gpu: T4", f"gpu: {GPU}").format(driver=DRIVER, python=python, nvme=""))
    target = RenderTarget("gcp", "n1-standard-8", GPU, 1, lane.REGION, "us-central1-a")
    return bootlane.repack(render_script(load_profile(path), target), keyring_sha)


def dkms_states(status: str) -> dict[tuple[str, str, str], str]:
    """``dkms status`` lines (dkms 3: ``NAME/VERSION, KERNEL, ARCH: STATE``) as (name, version, kernel) -> state."""
    return {(m[0], m[1], m[2]): m[3] for m in re.findall(r"^([^/\s]+)/([^,\s]+), ([^,\s]+), [^:]+: (\S+)", status, re.M)}


def configure_seconds(dpkg_log: str, package: str) -> float | None:
    """Seconds from dpkg's ``configure PACKAGE`` to its ``status installed PACKAGE`` (its postinst: here the DKMS
    build and install) in /var/log/dpkg.log, the last such pair; None when the log has none."""
    start = None
    found = None
    for line in dpkg_log.splitlines():
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (configure|status installed) (\S+?)(?::\w+)? ", line + " ")
        if not m or m[3] != package:
            continue
        at = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S")
        if m[2] == "configure":
            start = at
        elif start is not None:
            found, start = (at - start).total_seconds(), None
    return found


class LoadSampler:
    """The 1-minute load average every ``every`` seconds while a run lasts (the machine is shared)."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)

    def _run(self, every: float) -> None:
        while not self._stop.is_set():
            self.samples.append(float(Path("/proc/loadavg").read_text().split()[0]))
            self._stop.wait(every)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        s = self.samples or [0.0]
        return f"load average (1 min) min {min(s):.2f}, mean {sum(s) / len(s):.2f}, max {max(s):.2f} over {len(s)} samples"


def run(root: Path, work: Path, repo, python: str) -> tuple[int, str, float, str]:
    """The gcp bootstrap as user data (payload in gcp-storage-emulator, the metadata stub), as lane.scenario_gcp."""
    from provisioner.providers.gcp.store import GcsPayloadStore
    from tests.emulators.gcs import GcsEmulator

    rendered = render(work, python, repo.keyring_sha256)
    with GcsEmulator() as gcs:
        store = GcsPayloadStore(project="test-os", credentials=None, endpoint=gcs.url, call_timeout=10,
                                retry_base_delay=0, service_account=lambda: "vm@test-os.iam.gserviceaccount.com")
        ref = store.stage(lane.REGION, rendered.payload.data, rendered.payload.sha256)
        md = bootlane.serve(bootlane.gce_metadata)
        try:
            bootlane.write_user_data(root, rendered.user_data(ref).text)
            with LoadSampler() as load:
                rc, out, seconds = run_script(root, bootlane.USER_DATA, (f"TRAINVM_METADATA_URL={md.url}", *bootlane.FETCH_ENV))
        finally:
            md.shutdown()
    (work / "run1.log").write_text(out)
    bootlane.fetched(root, out, rendered, "module")
    return rc, out, seconds, load.summary()


def checks(root: Path, out: str) -> str:
    """The module lane's assertions (the module docstring); returns the running kernel's release."""
    kver = in_root(root, "/usr/local/bin/uname", "-r").strip()
    installed = installed_packages(root)
    check(installed.get("nvidia-kernel-dkms") == f"{DRIVER}-1" and "nvidia-driver-cuda" in installed
          and (root / f"usr/src/nvidia-current-{DRIVER}/dkms.conf").is_file(),
          f"the driver phase installed the real nvidia-kernel-dkms {DRIVER}-1 (NVIDIA's module source in "
          f"/usr/src/nvidia-current-{DRIVER}) with nvidia-driver-cuda", out)
    headers = sorted(n for n in installed if n.startswith("linux-headers") and not n.endswith("-common"))
    check(kver.endswith("-cloud-amd64") and headers == [f"linux-headers-{kver}"],
          f"the headers installed are the running cloud kernel's only: {headers}", str(headers))
    status = in_root(root, "dkms", "status")
    log("dkms status: " + "; ".join(status.strip().splitlines()))
    state = dkms_states(status).get((nvidia_module.DKMS_NAME, DRIVER, kver))
    check(state == "installed", f"dkms status: {nvidia_module.DKMS_NAME}/{DRIVER} installed for {kver}", status)
    for suffix in MODULES:
        found = sorted((root / "lib/modules" / kver / "updates/dkms").glob(f"nvidia-current{suffix}.ko*"))
        magic = in_root(root, "modinfo", "-F", "vermagic", "/" + str(found[0].relative_to(root))).strip() if found else ""
        check(magic.split(" ")[0] == kver, f"nvidia-current{suffix}.ko is built for {kver} (vermagic {magic!r})",
              str(found))
    for argv in (("modinfo", "-F", "vermagic", "nvidia"), ("modinfo", "-k", kver, "-F", "vermagic", "nvidia"),
                 ("modinfo", "-k", kver, "-F", "vermagic", "nvidia-current")):
        log(f"in the chroot, {' '.join(argv)}: {in_root(root, *argv).strip() or '(nothing)'}")
    return kver


def prerequisites(cache: Path) -> list[str]:
    missing = missing_prerequisites(uid=os.geteuid(), rootfs_cached=osroot.cached(cache))
    if not (cache / "nvidia-module" / Path(nvidia_module.PIN.filename).name).exists():
        missing += [f"{tool}: apt-get install {pkg}" for tool, pkg in (("apt-get", "apt"), ("gpgv", "gpgv"))
                    if shutil.which(tool) is None]
    return missing


def main() -> int:
    cache = Path(os.environ.get("TRAINVM_OS_CACHE", "/var/cache/trainvm-os"))
    missing = prerequisites(cache)
    if missing:
        raise SystemExit("make test-os-module cannot run; missing:\n  - " + "\n  - ".join(missing))
    lane.unshared()
    t0 = time.monotonic()
    work = Path(os.environ.get("TRAINVM_OS_WORK", "/var/tmp/trainvm-os-module"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    base, _ = osroot.base_rootfs(cache, log)
    pydist = osroot.python_dist(cache, log)
    _, repo = nvidia_module.replica_repository(work / "www", cache, log)
    server = osrepo.serve(work / "www", work / "tls")
    sub = work / "gcp"
    sub.mkdir()
    root = osroot.overlay(base, sub, log)
    osroot.vm_environment(root, sub, repo, server, pydist, DRIVER, None, gpu=GPU)
    try:
        rc, out, seconds, load = run(root, sub, repo, pydist.version)
        log(f"first boot: rc {rc} in {seconds:.0f} s; {load}")
        check(rc == 0 and final_status(out) == "ready", "the payload's script reaches ready", out)
        kver = checks(root, out)
        built = configure_seconds((root / "var/log/dpkg.log").read_text(), "nvidia-kernel-dkms")
        log(f"DKMS build and install of nvidia-current/{DRIVER} for {kver} (dpkg configure -> installed): "
            f"{built if built is not None else '?'} s on {os.cpu_count()} CPUs")
        osroot.report_usage(sub, log)
        if os.environ.get("TRAINVM_OS_KEEP") != "1":
            osroot.discard(sub)
    finally:
        server.shutdown()
    log(f"PASSED in {time.monotonic() - t0:.0f} s (script {seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
