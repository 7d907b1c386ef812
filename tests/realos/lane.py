"""`make test-os`: trainvm's debian-12 user data, the bootstrap, on a real Debian 12 userland (needs root).

What runs is what a VM runs: the bootstrap (templates/bootstrap/bootstrap.sh.j2, rendered by
``RenderedScript.user_data`` for a ``PayloadRef``) as root with ``bash /root/user-data``; it fetches the payload
(render/payload.py: the startup script, the agent, the manifest) from an object store on the host's loopback with
the cloud's real fetch function and a token or credentials from a loopback metadata stub
(``TRAINVM_METADATA_URL``), verifies its sha256, unpacks it to /opt/trainvm/payload/SHA (/opt/trainvm/current),
installs its startup.sh as /usr/local/sbin/trainvm-provision and execs it (bootlane.py).

- A debootstrap'ed bookworm root filesystem shaped like Debian's cloud image (deb822 sources with
  main only, cloud kernel metapackage, unattended-upgrades, curl, python3), cached under a content
  key in $TRAINVM_OS_CACHE (default /var/cache/trainvm-os); each scenario works on an overlay of it.
- A signed fake NVIDIA repository (tests/aptsim/fakerepo.py: Debian's real nvidia-graphics-drivers
  metadata renumbered to the pinned driver and a newer one, plus modelled NVIDIA top-level names),
  real (empty) .debs, served over HTTPS on 127.0.0.1:443 as developer.download.nvidia.com with a
  trustme CA the root filesystem trusts; cuda-keyring carries the repository's signing key.
- The payload's script runs in a chroot with real apt, dpkg, curl, uv and PyPI (a small CPU-only set); dkms is
  installed for real but builds nothing (the driver .debs are empty).
  Stubbed, because a container cannot have them: nvidia-smi (one T4: the agent's CSV query and ``-q -x``),
  /proc/driver/nvidia/version, uname -r (reports the root filesystem's kernel), systemctl
  start/stop/is-active/daemon-reload (recorded; enable/disable/mask run for real), reboot (recorded), and uv's
  Python download (a relocatable copy of this interpreter's CPython announced through uv's own
  UV_PYTHON_DOWNLOADS_JSON_URL; uv still downloads, checks and installs it). The rendered script's only edit:
  TV_KEYRING_SHA256 is the fake keyring's; the payload is built again from the edited script with
  ``build_payload`` and the render's own manifest metadata (``bootlane.repack``), so the bootstrap names the
  sha256 of what it fetches.
- Scenarios (TRAINVM_OS_SCENARIOS, comma-separated; default all three), each on a fresh overlay:
  ``gcp`` below, and ``aws-s3`` (s3lane.py: the payload in moto's S3 server with its SigV4 and IAM checks on,
  fetched by the real fetch-aws.sh (curl --aws-sigv4) with an instance profile's STS credentials from an IMDSv2
  stub; started on a kernel whose headers the archive dropped, so one reboot resumed through
  trainvm-provision.service; the copy tool installed from PyPI with hashes copies the s3:// data with the same
  identity; what it models is said there).
- ``bake`` (bakelane.py: the bake-mode script run by the bootstrap on a fresh overlay -> baked; the merged tree
  captured as a tar and checked for what a baked image must not hold; a root unpacked from it boots the baked-mode
  script to ready with nothing installed and nothing downloaded; what it asserts and models is said there).
- Both scenarios (gcp, aws-s3) assert: the stored object replaced by other bytes is refused before the good run
  (``failed:bootstrap:LINE``, a report whose error says "payload hash mismatch", and nothing unpacked, linked,
  installed or run: no dpkg activity); then the bootstrap's "payload SHA fetched (N bytes) and verified",
  /opt/trainvm/current -> /opt/trainvm/payload/SHA, trainvm-provision is the payload's startup.sh, the cloud's
  metadata stub was asked for the identity; ready; the VM's report (its last ``TRAINVM_REPORT`` line, decoded
  by ``last_console_report``) equals, field by field, the agent's ``probe()`` run again in the same root the
  way ``trainvm verify --local --python /opt/trainvm/venv/bin/python`` runs it (source "local"; the VM's data
  disk and destinations), except what differs by nature (``bootlane.BY_NATURE``: source, the script's phases
  and their timings, profile hash, error, and the disk's free space measured at another moment), and verify's
  judgement of both against the profile is the same field by field; finally the payload object deleted from
  the store and the bootstrap run again: "already on disk: nothing fetched", no metadata request (gcp),
  dpkg.log unchanged, ready.
- ``gcp`` (GcsPayloadStore on gcp-storage-emulator, the real fetch-gcp.sh, a metadata-token stub that wants
  ``Metadata-Flavor: Google``) also asserts: the compute-only driver set (nvidia-driver-cuda, nvidia-kernel-open-dkms)
  and no desktop stack; every installed package of the NVIDIA repository at exactly the pinned version; all of them
  held, with the running kernel's headers; no generic kernel headers (dkms without its recommends); the kernel that
  boots next is still the running one (the image's kernel from the point release, older than bookworm-security's
  when Debian has a newer ABI there: no kernel image installed or upgraded, no headers but the running kernel's, the
  image's kernel packages held; the lane logs whether a newer kernel was there to pull); `apt-get -s dist-upgrade` moves none; ``systemd-analyze verify`` passes
  the units the script wrote; the local-NVMe path (a loop device as google-local-nvme-ssd-0) formats, mounts
  and re-stages after a simulated stop/start (the bootstrap again), when the host allows loop devices.
- Not modelled: a PID-1 systemd (units are enabled, never started; boot ordering, timers and
  needrestart are not exercised), a real kernel module build and load (the driver .debs are empty,
  ``modprobe nvidia`` fails against the host kernel and the gate reads the stubs), RAID0 (one loop
  device; the host may have no md driver), Ubuntu (its archive is not reachable here), the clouds'
  real metadata servers and IAM (the stubs hand out a token or credentials; the GCS emulator checks no token
  at all, moto checks signatures and the role's policy but no S3 condition keys), TLS to the store (plain
  HTTP on loopback), the cloud's agent that starts user data (cloud-init, google-startup-scripts), guest
  attributes (not written), Secure Boot.
- Logs of every run: $TRAINVM_OS_WORK (default /var/tmp/trainvm-os-run)/SCENARIO/run*.log (run0-tampered.log:
  the refused bootstrap); a passed scenario's overlay (~1.4 GB) is removed unless TRAINVM_OS_KEEP=1.
- Prerequisites are checked first (runner.missing_prerequisites): root, debootstrap (until the rootfs
  is cached), the host tools and the dev extras; each missing one is named with how to get it.
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
sys.path[:0] = [str(HERE), str(REPO / "tests/aptsim"), str(REPO)]

import bakelane  # noqa: E402
import bootlane  # noqa: E402
import osrepo  # noqa: E402
import osroot  # noqa: E402
import s3lane  # noqa: E402
from runner import (  # noqa: E402
    BASE_ENV,
    check,
    final_status,
    in_root,
    installed_packages,
    log,
    missing_prerequisites,
    run_script,
    verify_units,
)

DRIVER = "550.127.05"
REGION = "us-central1"
SCENARIOS = ("gcp", "aws-s3", "bake")
PROFILE = """name: realos-deb12
hardware: {{gpu: T4, gpu_count: 1{nvme}}}
stack:
  os: debian-12
  driver: "{driver}"
  cuda: "12.4"
  python: "{python}"
  packages: [six==1.16.0, idna==3.7, nvidia-cuda-runtime-cu12==12.4.127]
  env: {{PYTHONHASHSEED: "0", CUBLAS_WORKSPACE_CONFIG: ":4096:8"}}
data:
  - {{source: "https://developer.download.nvidia.com/trainvm-data/sample.bin", dest: /mnt/data/sample}}
"""


def render(work: Path, python: str, nvme: bool, keyring_sha: str, image_mode: str = ""):
    """The RenderedScript of the gcp scenario (and of the bake scenario, ``image_mode``), its script edited (the fake
    keyring) and packed again (bootlane)."""
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    path = work / "profile.yaml"
    path.write_text(PROFILE.format(driver=DRIVER, python=python, nvme=", local_nvme_gib: 375" if nvme else ""))
    lp = load_profile(path)
    target = RenderTarget("gcp", "n1-standard-8", "T4", 1, REGION, "us-central1-a", local_nvme_gib=375 if nvme else 0)
    return bootlane.repack(render_script(lp, target, image_mode=image_mode), keyring_sha)


def scenario_gcp(root: Path, work: Path, repo, python: str, loop: str | None) -> dict[str, float]:
    """The payload staged in GCS (gcp-storage-emulator, GcsPayloadStore), read by the real fetch-gcp.sh with a
    token from a loopback metadata stub; the bootstrap is what runs, at every boot as GCE runs a startup-script."""
    from provisioner.providers.gcp.store import GcsPayloadStore
    from tests.emulators.gcs import GcsEmulator

    rendered = render(work, python, loop is not None, repo.keyring_sha256)
    sha = rendered.payload.sha256
    with GcsEmulator() as gcs:
        store = GcsPayloadStore(project="test-os", credentials=None, endpoint=gcs.url, call_timeout=10,
                                retry_base_delay=0, service_account=lambda: "vm@test-os.iam.gserviceaccount.com")
        ref = store.stage(REGION, rendered.payload.data, sha)
        blob = store.client().bucket(ref.store).blob(ref.key)
        md = bootlane.serve(bootlane.gce_metadata)
        try:
            env = (f"TRAINVM_METADATA_URL={md.url}", *bootlane.FETCH_ENV)
            bootlane.write_user_data(root, rendered.user_data(ref).text)
            log(f"gcp: payload {sha[:12]} ({rendered.payload.size} bytes) staged at {ref.url}")
            blob.upload_from_string(b"not this payload\n" + os.urandom(4096))  # the stored object tampered with
            bootlane.refuses_tampered(root, work, env, sha, "gcp")
            blob.upload_from_string(rendered.payload.data)
            before = installed_packages(root)
            running = in_root(root, "/usr/local/bin/uname", "-r").strip()  # before the run: a kernel it installs is newer
            rc, out, t_first = run_script(root, bootlane.USER_DATA, env)
            (work / "run1.log").write_text(out)
            log(f"gcp first boot (the bootstrap as user data): rc {rc} in {t_first:.0f} s")
            bootlane.fetched(root, out, rendered, "gcp")
            check(any(path.endswith("/service-accounts/default/token") for _, path, _ in md.seen),
                  "gcp: fetch-gcp.sh took the service account's token from the metadata server", str(md.seen))
            check(rc == 0 and final_status(out) == "ready", "gcp: the payload's script reaches ready", out)
            installed = installed_packages(root)
            driver_pkgs = {n: v for n, v in installed.items() if n in repo.names}
            check({"nvidia-driver-cuda", "nvidia-kernel-open-dkms"} <= set(driver_pkgs)
                  and all(v == f"{DRIVER}-1" for v in driver_pkgs.values()),
                  f"the compute-only set: {len(driver_pkgs)} driver packages installed, all at exactly {DRIVER}-1",
                  str({n: v for n, v in driver_pkgs.items() if v != f"{DRIVER}-1"}))
            desktop = sorted(set(installed) & {"nvidia-open", "nvidia-driver", "xserver-xorg-core", "xserver-xorg-video-nvidia"})
            check(not desktop, f"no desktop stack installed ({len(installed)} packages in all)", str(desktop))
            kver = in_root(root, "/usr/local/bin/uname", "-r").strip()  # the stub the script sees (the lane's kernel)
            generic = sorted(n for n in installed if n == "linux-headers-amd64" or re.fullmatch(r"linux-headers-[\d.-]+-amd64", n))
            check(not generic, "dkms came without the generic kernel's headers", str(generic))
            held = set(in_root(root, "apt-mark", "showhold").split())
            kernel_stays(root, running, before, installed, held)
            check(set(driver_pkgs) | {f"linux-headers-{kver}"} <= held,
                  f"apt-mark showhold lists every installed driver package and linux-headers-{kver}",
                  str((set(driver_pkgs) | {f"linux-headers-{kver}"}) - held))
            upgrade = in_root(root, "apt-get", "-s", "dist-upgrade")
            moved = [n for n in re.findall(r"^(?:Inst|Remv) (\S+)", upgrade, re.M) if n in repo.names or n.startswith("linux-headers")]
            check(not moved, "apt-get -s dist-upgrade changes no driver package and brings no kernel headers", upgrade)
            verify_units(root)
            bootlane.compare_reports(root, out, BASE_ENV, work / "profile.yaml", "gcp")
            blob.delete()  # the store emptied (lifecycle rule, `down` of another VM): a reboot needs no fetch
            tokens = len(md.seen)
            rc2, out2, t_second = bootlane.rerun(root, work, env, rendered, "run2")
            check(rc2 == 0 and final_status(out2) == "ready" and len(md.seen) == tokens,
                  f"gcp: the bootstrap again, store emptied: nothing fetched, nothing installed, ready ({t_second:.0f} s)", out2)
            if loop:
                check(osroot.mounted(root, "/mnt/data"), "local NVMe (loop device) formatted and mounted at /mnt/data")
                osroot.stop_start(root, loop)
                rc3, out3, t_third = run_script(root, bootlane.USER_DATA, env)
                (work / "run3.log").write_text(out3)
                check(rc3 == 0 and final_status(out3) == "ready" and "formatting" in out3 and osroot.mounted(root, "/mnt/data")
                      and (root / "mnt/data/sample/sample.bin").exists() and bootlane.nothing_fetched(out3, sha),
                      f"after a stop/start (blank disk) the bootstrap's script formats, mounts and re-stages ({t_third:.0f} s)", out3)
            else:
                log("skipped: the local-NVMe path (this host offers no loop device)")
        finally:
            md.shutdown()
    return {"first": t_first, "second": t_second}


def kernel_stays(root: Path, kver: str, before: dict[str, str], installed: dict[str, str], held: set[str]) -> None:
    """The driver phase leaves the kernel that boots next the running one: no kernel image installed or upgraded
    (the image metapackage held before the headers' install), no kernel headers but the running kernel's. Whether
    the archive's newest cloud kernel is newer than the image's (the case issue 38's QEMU boot met) is logged: only
    then does this check see apt's upgrade of the image metapackage with its source's headers metapackage."""
    images = {n: v for n, v in installed.items() if n.startswith("linux-image")}
    check(images == {n: v for n, v in before.items() if n.startswith("linux-image")},
          f"the kernel that boots stays {kver}: no kernel image installed or upgraded", str(images))
    headers = sorted(n for n in installed if n.startswith("linux-headers") and not n.endswith("-common"))
    check(headers == [f"linux-headers-{kver}"], f"only the running kernel's headers installed (linux-headers-{kver})",
          str(headers))
    check({"linux-image-cloud-amd64", f"linux-image-{kver}"} <= held, "the image's kernel packages are held", str(held))
    policy = in_root(root, "apt-cache", "policy", "linux-image-cloud-amd64")
    candidate = re.search(r"Candidate: (\S+)", policy)
    newer = candidate is not None and candidate.group(1) != before.get("linux-image-cloud-amd64")
    log(f"the archive's newest linux-image-cloud-amd64 is {candidate.group(1) if candidate else '?'}, the image's "
        f"{before.get('linux-image-cloud-amd64')}: " + ("a newer kernel was there to be pulled" if newer else
                                                        "no newer kernel in the archive (the upgrade path was not exercised)"))


def prepare(work: Path) -> tuple:
    """What every scenario shares: the cached root filesystem, the Python stand-in, the fake NVIDIA repository
    served on 127.0.0.1:443. Needs root and the lane's own mount namespace (``unshared``)."""
    cache = Path(os.environ.get("TRAINVM_OS_CACHE", "/var/cache/trainvm-os"))
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    base, built = osroot.base_rootfs(cache, log)
    pydist = osroot.python_dist(cache, log)
    repo = osrepo.build(work / "www", [DRIVER], log)
    server = osrepo.serve(work / "www", work / "tls")
    return cache, base, built, pydist, repo, server


def unshared() -> None:
    """Re-run this program in a private mount namespace (its mounts are gone when it exits), once."""
    if os.environ.get("TRAINVM_OS_UNSHARED") != "1":
        os.environ["TRAINVM_OS_UNSHARED"] = "1"
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable, *sys.argv])


def main() -> int:
    cache = Path(os.environ.get("TRAINVM_OS_CACHE", "/var/cache/trainvm-os"))
    chosen = [s.strip() for s in os.environ.get("TRAINVM_OS_SCENARIOS", ",".join(SCENARIOS)).split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"TRAINVM_OS_SCENARIOS: unknown scenario {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    missing = missing_prerequisites(uid=os.geteuid(), rootfs_cached=osroot.cached(cache))
    if missing:
        raise SystemExit("make test-os cannot run; missing:\n  - " + "\n  - ".join(missing))
    unshared()
    t_start = time.monotonic()
    work = Path(os.environ.get("TRAINVM_OS_WORK", "/var/tmp/trainvm-os-run"))
    cache, base, built, pydist, repo, server = prepare(work)
    t_setup = time.monotonic() - t_start
    log(f"setup {t_setup:.0f} s (rootfs {'built' if built else 'cached'}); scenarios: {', '.join(chosen)}")
    timings: dict[str, dict[str, float]] = {}
    for name in chosen:
        sub = work / name
        sub.mkdir()
        if name == "bake":  # its own roots: the builder's overlay, then a fresh root from the captured image
            t = bakelane.scenario(base, sub, repo, server, pydist, DRIVER, render)
            timings[name] = {"first": t["bake"], "second": t["baked"]}
            continue
        root = osroot.overlay(base, sub, log)
        loop = osroot.attach_nvme(sub, log) if name == "gcp" else None
        osroot.vm_environment(root, sub, repo, server, pydist, DRIVER, loop)
        try:
            if name == "gcp":
                timings[name] = scenario_gcp(root, sub, repo, pydist.version, loop)
            else:
                timings[name] = s3lane.scenario(root, sub, DRIVER, pydist.version, repo.keyring_sha256, repo.names)
            osroot.report_usage(sub, log)
            if os.environ.get("TRAINVM_OS_KEEP") != "1":  # a failed scenario keeps its overlay for a look
                osroot.discard(sub)
        finally:
            osroot.detach(loop)
    server.shutdown()
    osroot.report_usage(cache, log)
    runs = ", ".join(f"{n}: first run {t['first']:.0f} s, second {t['second']:.0f} s" for n, t in timings.items())
    log(f"PASSED in {time.monotonic() - t_start:.0f} s (setup {t_setup:.0f} s; {runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
