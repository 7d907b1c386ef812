"""`make test-vm-boot`: trainvm's real GCE bootstrap, payload and startup script on a BOOTED Debian 12 kernel (issue 38).

The chroot lane (tests/realos, `make test-os`) has no kernel of its own, no systemd as PID 1 and no cloud-init. This
lane boots the VM lane's Debian 12 image (tests/vm/image.py: the cloud kernel, systemd, cloud-init 22.4 reading
NoCloud) under QEMU's TCG and hands it the debian-12 T4 profile's bootstrap for gcp as the chroot lane renders it
(``lane.render``: the lane's one edit, the fake cuda-keyring's sha256, packed again with ``bootlane.repack``):

- Host side, the chroot lane's own pieces (imported): the payload staged with ``GcsPayloadStore`` in
  gcp-storage-emulator, the GCE metadata-token stub (``bootlane.gce_metadata``: a token only with
  ``Metadata-Flavor: Google``), the signed fake NVIDIA repository (osrepo: empty .debs) over HTTPS with a trustme CA,
  and the relocatable CPython that stands in for uv's Python download (osroot.python_dist).
- The user data is NoCloud multipart: the rendered bootstrap, byte for byte, as an ``x-shellscript-per-boot`` part
  (cloud-init runs it as root in its final stage at every boot, as GCE's startup-script runner runs the
  startup-script: the script's own reboots resume through it), and a cloud-config part with what the lane models and
  a cloud would not need, each said here:
  * ``/etc/hosts`` maps developer.download.nvidia.com and metadata.google.internal to 10.0.2.2 (QEMU user
    networking's address of the host's loopback), where the fake repository (port 443) and the metadata stub (port
    80, GCE's) listen; on GCE both are real hosts;
  * the payload URL's host is 10.0.2.2 instead of the emulator's 127.0.0.1 (the same store, seen from the guest); on
    GCE it is storage.googleapis.com;
  * the trustme CA (the fake repository's) and this workplace's egress CAs (/usr/local/share/ca-certificates: PyPI is
    reached through a TLS-inspecting proxy) are installed in the guest;
  * drop-ins give cloud-final.service and trainvm-provision.service (what runs the script after a reboot) the chroot
    lane's environment: uv trusts the system CAs
    (``SSL_CERT_FILE``, ``UV_SYSTEM_CERTS``; no proxy on a cloud), uv's Python list is /srv/pbs/downloads.json
    pointing at the stand-in CPython on the fake repository's host (github.com, where uv downloads Python from, is
    not reachable here), and the bootstrap's fetch gives up after 120 s instead of 20 minutes (a lane fault fails
    fast);
  * a transient unit started at each boot (``systemd-run`` from bootcmd) waits until the script's status.json says
    ready or failed, prints to the serial console what the booted machine has (``uname -r``, PID 1, the installed
    linux-headers packages, the installed linux-image packages, ``dkms status``, each trainvm unit's ``is-enabled``/``is-active``, the held packages,
    the reboot counter) and powers the VM off (the script may reboot the VM on the way: QEMU boots it again).
- Nothing else is stubbed: no uname, systemctl, reboot or nvidia-smi shim (the chroot lane's). The driver .debs are
  empty, so no nvidia-smi and no kernel module exist: the startup script's GPU gate must fail there, and not before.

Asserted from the serial console (what ``trainvm logs`` reads): the bootstrap's "payload SHA fetched (N bytes) and
verified"; the phases and their results (``provisioner.verify.console``, the parser of ``trainvm logs``); the final
status is a failure of the GPU gate (every phase before it verified or done); the booted kernel is the cloud kernel
and linux-headers-$(uname -r) is what got installed (no generic headers); every boot ran the same kernel and no other
kernel image is installed (the driver phase holds the image's kernel before installing the headers: ``kernel_kept``);
PID 1 is systemd. Times: boot to the
bootstrap's first line, per phase, total; the load average. Logs: $TRAINVM_VM_WORK (default /var/tmp/trainvm-vm-run).

    nice -n 10 .venv/bin/python tests/vm/bootlane.py      # root; TRAINVM_VM_TIMEOUT (default 3600 s)
    TRAINVM_VM_STOP_AT=verified ... bootlane.py           # only up to the bootstrap's "fetched and verified"
    TRAINVM_VM_MODULE=1 ... bootlane.py                   # the real kernel module (`make test-vm-boot-module`)

With TRAINVM_VM_MODULE=1 (`make test-vm-boot-module`) the profile is the module lane's (tests/realos/modulelane.py: a
V100, proprietary modules, at driver 550.163.01) and the fake repository's nvidia-kernel-dkms is Debian's real one
(tests/realos/nvidia_module.py): DKMS compiles NVIDIA's module on the booted cloud kernel, under TCG. Asserted besides
the above: the report's ``dkms status`` lists nvidia-current/550.163.01 installed for the booted kernel and
``modinfo -F vermagic nvidia-current`` (the booted kernel's modules, the real ``uname -r``) starts with that kernel's
release; the GPU gate still fails (no GPU, and no module named ``nvidia``: nvidia-kernel-support, which maps it to
nvidia-current for modprobe, is empty here). Under TCG the DKMS build alone is expected to take tens of minutes (154 s
natively on this 2-core machine): raise TRAINVM_VM_TIMEOUT, or stop early with TRAINVM_VM_STOP_AT=driver.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import sys
import time
from dataclasses import replace
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# tests/realos first: its bootlane (imported by lane.py) is not this file
sys.path[:0] = [str(REPO / "tests/realos"), str(REPO / "tests/aptsim"), str(REPO)]
sys.path.append(str(HERE))

import bootlane as oslane  # noqa: E402  (tests/realos/bootlane.py)
import image  # noqa: E402
import lane  # noqa: E402
import osrepo  # noqa: E402
import osroot  # noqa: E402

GUEST_HOST = "10.0.2.2"  # QEMU user networking: the host's loopback as the guest reaches it
MARK = "TRAINVM-VMLANE"
ENV = {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "UV_SYSTEM_CERTS": "1",
       "UV_PYTHON_DOWNLOADS_JSON_URL": "file:///srv/pbs/downloads.json", "TRAINVM_RETRY_SLEEP": "2",
       "TRAINVM_FETCH_SECONDS": "120", "TRAINVM_MISSING_TRIES": "3"}
REPORT = f"""#!/bin/sh
# the lane's report: once the startup script's status is final (ready or failed:*), what the booted machine has
until grep -Eqs '"status": "(ready|failed:[^"]*)"' /var/lib/trainvm/status.json; do sleep 5; done
exec >/dev/ttyS0 2>&1
echo "{MARK} status=$(cat /var/lib/trainvm/status.json)"
echo "{MARK} uname=$(uname -r) pid1=$(cat /proc/1/comm)"
echo "{MARK} headers=$(dpkg-query -W -f='${{Status}} ${{Package}}\\n' 'linux-headers-*' 2>/dev/null | awk '$3 == "installed" {{ printf "%s ", $4 }}')"
echo "{MARK} images=$(dpkg-query -W -f='${{Status}} ${{Package}}=${{Version}}\\n' 'linux-image-*' 2>/dev/null | awk '$3 == "installed" {{ printf "%s ", $4 }}')"
echo "{MARK} dkms=$(dkms status 2>&1 | tr '\\n' ';')"
echo "{MARK} vermagic=$(modinfo -F vermagic nvidia-current 2>&1 | head -n 1)"
for u in $(cd /etc/systemd/system && ls -d trainvm-*.service trainvm-*.timer 2>/dev/null); do
  echo "{MARK} unit $u enabled=$(systemctl is-enabled "$u" 2>&1) active=$(systemctl is-active "$u" 2>&1)"
done
echo "{MARK} held=$(apt-mark showhold | tr '\\n' ' ')"
echo "{MARK} reboots=$(cat /var/lib/trainvm/reboots 2>/dev/null || echo 0)"
echo "{MARK} end"
systemctl poweroff
"""


def log(msg: str) -> None:
    print(f"[test-vm-boot {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def guest_url(url: str) -> str:
    """The store's URL as the guest reaches it (the emulator listens on the host's loopback)."""
    return url.replace("http://127.0.0.1:", f"http://{GUEST_HOST}:", 1)


def bootcmd(cas: list[bytes], downloads_json: str) -> str:
    """The cloud-config ``bootcmd`` (early in cloud-init.service, before cloud-final.service starts): hosts, CAs,
    uv's Python list and cloud-final's environment (see the module docstring)."""
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    lines = ["set -e",
             f"grep -q trainvm-vm-lane /etc/hosts || echo '{GUEST_HOST} developer.download.nvidia.com "
             "metadata.google.internal # trainvm-vm-lane' >>/etc/hosts",
             "mkdir -p /usr/local/share/ca-certificates /srv/pbs"]
    lines += [f"echo {b64(pem)} | base64 -d >/usr/local/share/ca-certificates/trainvm-vm-lane-{i}.crt"
              for i, pem in enumerate(cas)]
    lines += ["update-ca-certificates >/dev/null 2>&1",
              f"echo {b64(downloads_json.encode())} | base64 -d >/srv/pbs/downloads.json",
              *(f"mkdir -p /etc/systemd/system/{unit}.d && printf '[Service]\\n"
                + "".join(f"Environment={k}={v}\\n" for k, v in ENV.items())
                + f"' >/etc/systemd/system/{unit}.d/trainvm-vm-lane.conf"
                for unit in ("cloud-final.service", "trainvm-provision.service")),
              "systemctl daemon-reload",
              f"echo {b64(REPORT.encode())} | base64 -d >/usr/local/sbin/trainvm-vm-lane-report",
              "systemd-run --no-block --unit=trainvm-vm-lane-report /bin/sh /usr/local/sbin/trainvm-vm-lane-report",
              f"echo \"{MARK} bootcmd uname=$(uname -r) pid1=$(cat /proc/1/comm)\" >/dev/ttyS0"]
    return "\n".join(lines) + "\n"


def user_data(bootstrap: str, cas: list[bytes], downloads_json: str) -> str:
    """NoCloud multipart user data: the cloud-config part and the bootstrap as a per-boot script part (cloud-init
    22.4 keeps it in /var/lib/cloud/scripts/per-boot and runs it at every boot, in its final stage, after the network:
    as GCE's startup-script runner runs the startup-script at every boot; a plain ``x-shellscript`` part runs once per
    instance, so the startup script's own reboots were never resumed)."""
    config = "#cloud-config\n" + json.dumps({"bootcmd": [["sh", "-c", bootcmd(cas, downloads_json)]]}, indent=1) + "\n"
    msg = MIMEMultipart()
    for text, subtype, name in ((config, "cloud-config", "lane.cfg"),
                                (bootstrap, "x-shellscript-per-boot", "00-trainvm-bootstrap")):
        part = MIMEText(text, subtype, "utf-8")
        part.add_header("Content-Disposition", "attachment", filename=name)
        msg.attach(part)
    return msg.as_string()


def downloads(pydist: osroot.PyDist) -> str:
    """uv's Python list for the stand-in CPython, served by the fake repository's host (as osroot writes it, with an
    https URL instead of a file on the root filesystem)."""
    major, minor, patch = (int(x) for x in pydist.version.split("."))
    return json.dumps({f"cpython-{pydist.version}-linux-x86_64-gnu": {
        "name": "cpython", "arch": {"family": "x86_64", "variant": None}, "os": "linux", "libc": "gnu",
        "major": major, "minor": minor, "patch": patch, "prerelease": "", "variant": None, "build": "test-vm",
        "url": f"https://developer.download.nvidia.com/trainvm-lane/pbs/{pydist.tarball.name}", "sha256": pydist.sha256}})


def marks(console: str) -> dict[str, str]:
    """The runcmd's ``TRAINVM-VMLANE key=value`` lines (unit lines keyed ``unit NAME``)."""
    out: dict[str, str] = {}
    for line in console.splitlines():
        if m := re.search(rf"{MARK} unit (\S+) (.*)$", line):
            out[f"unit {m[1]}"] = m[2].strip()
        elif m := re.search(rf"{MARK} (\w+)=(.*)$", line):
            out.setdefault(m[1], m[2].strip())
    return out


class Clock:
    """Host-side time (s since QEMU started) at which each console marker first appeared (``image.boot``'s ``until``)."""

    WATCH = {"bootcmd": f"{MARK} bootcmd", "bootstrap": "trainvm bootstrap: ", "verified": "and verified",
             "driver": "TRAINVM_STATUS=running:driver", "reboot": "rebooting (", "python": "TRAINVM_STATUS=running:python",
             "final": f"{MARK} status=", "end": f"{MARK} end"}

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.seen: dict[str, float] = {}
        self.stop_at = os.environ.get("TRAINVM_VM_STOP_AT", "")  # a WATCH key: stop the VM once it is seen

    def __call__(self, console: str) -> bool:
        for key, text in self.WATCH.items():
            if key not in self.seen and text in console:
                self.seen[key] = time.monotonic() - self.t0
                log(f"console: {text.strip()!r} after {self.seen[key]:.0f} s")
        if "TRAINVM_STATUS=failed:bootstrap" in console and "gave-up" not in self.seen:  # no status.json: no report
            self.seen["gave-up"] = time.monotonic() - self.t0
        if self.stop_at and self.stop_at in self.seen:  # TRAINVM_VM_STOP_AT: a shorter check
            return True
        late = [self.seen[k] + 120 for k in ("end", "gave-up") if k in self.seen]  # no power-off after 120 s: stop
        return bool(late) and time.monotonic() - self.t0 > min(late)


def at_gpu_gate(final: str, error: str | None) -> bool:
    """Whether the script's final status is a failure of its GPU gate (tv_gpu_gate, in the driver phase): its own
    check, or the reboots it asked for ("the NVIDIA kernel module is not loaded") spent."""
    return final.startswith("failed:driver:") and any(
        text in (error or "") for text in ("driver/GPU check", "NVIDIA kernel module is not loaded"))


def kernel_kept(booted: list[str], images: str) -> tuple[bool, str]:
    """Whether every boot (``booted``: each boot's ``uname -r``) ran one kernel and the installed kernel images
    (``images``: the report's ``NAME=VERSION`` list) are that kernel's and the image metapackage, nothing a next boot
    would pick instead; and what to say."""
    kernels = sorted(set(booted))
    abi = sorted(p.split("=", 1)[0] for p in images.split() if not p.startswith("linux-image-cloud-amd64="))
    ok = len(kernels) == 1 and abi == [f"linux-image-{kernels[0]}"]
    return ok, f"every boot ran {', '.join(kernels) or 'no kernel'}; kernel images installed: {images.strip() or 'none'}"


def module_built(m: dict[str, str], kernel: str, driver: str) -> tuple[bool, bool]:
    """(``dkms status`` lists nvidia-current/DRIVER installed for ``kernel``, the booted kernel's nvidia-current
    module has ``kernel``'s vermagic), from the report's marks."""
    dkms = f"nvidia-current/{driver}, {kernel}, x86_64: installed" in m.get("dkms", "").split(";")
    return dkms, bool(kernel) and m.get("vermagic", "").split(" ")[0] == kernel


def check(cond: bool, what: str, detail: str = "") -> bool:
    log(("ok: " if cond else "FAILED: ") + what + ("" if cond or not detail else f"\n{detail[-3000:]}"))
    return cond


def main() -> int:
    from provisioner.providers.gcp.store import GcsPayloadStore
    from provisioner.verify.console import events, phase_spans
    from provisioner.verify.report import last_console_report
    from tests.emulators.gcs import GcsEmulator

    problems = image.missing() + [f"127.0.0.1:{p} is in use" for p in (80, 443) if not _free(p)]
    if problems:
        raise SystemExit("test-vm-boot cannot run: " + "; ".join(problems))
    t_start = time.monotonic()
    work = Path(os.environ.get("TRAINVM_VM_WORK", "/var/tmp/trainvm-vm-run"))
    shutil.rmtree(work, ignore_errors=True)
    (work / "vm").mkdir(parents=True)
    base = image.build(log=log)
    os_cache = Path(os.environ.get("TRAINVM_OS_CACHE", "/var/cache/trainvm-os"))
    os_cache.mkdir(parents=True, exist_ok=True)
    pydist = osroot.python_dist(os_cache, log)
    module = os.environ.get("TRAINVM_VM_MODULE") == "1"
    if module:  # the real nvidia-kernel-dkms and the module lane's V100 profile at its version
        import modulelane
        import nvidia_module

        driver, repo = nvidia_module.replica_repository(work / "www", os_cache, log)
    else:
        driver, repo = lane.DRIVER, osrepo.build(work / "www", [lane.DRIVER], log)
    (work / "www/trainvm-lane/pbs").mkdir(parents=True)
    shutil.copy(pydist.tarball, work / "www/trainvm-lane/pbs" / pydist.tarball.name)
    server = osrepo.serve(work / "www", work / "tls")
    cas = [server.ca_pem] + [p.read_bytes() for p in sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))]
    if module:
        rendered = modulelane.render(work, pydist.version, repo.keyring_sha256)
    else:
        rendered = lane.render(work, pydist.version, False, repo.keyring_sha256)
    sha = rendered.payload.sha256
    timeout = float(os.environ.get("TRAINVM_VM_TIMEOUT", "3600"))  # 1800 s saw only the first reboot (RESULTS.md)
    with GcsEmulator() as gcs:
        store = GcsPayloadStore(project="test-vm", credentials=None, endpoint=gcs.url, call_timeout=10,
                                retry_base_delay=0, service_account=lambda: "vm@test-vm.iam.gserviceaccount.com")
        ref = store.stage(lane.REGION, rendered.payload.data, sha)
        md = oslane.serve(oslane.gce_metadata, port=80)
        try:
            bootstrap = rendered.user_data(replace(ref, url=guest_url(ref.url))).text
            data = user_data(bootstrap, cas, downloads(pydist))
            (work / "user-data").write_text(data)
            log(f"payload {sha[:12]} ({rendered.payload.size} bytes) staged at {ref.url}; booting under TCG "
                f"(timeout {timeout:.0f} s, load average {os.getloadavg()[0]:.1f})")
            clock = Clock()
            load0 = os.getloadavg()
            b = image.boot(base, work / "vm", data, timeout, no_reboot=False, until=clock)
            load1 = os.getloadavg()
        finally:
            md.shutdown()
            server.shutdown()
    console = b.console.replace("\r", "")
    (work / "console.log").write_text(console)
    log(f"VM exited rc {b.rc} after {b.seconds:.0f} s; load average {load0[0]:.1f} -> {load1[0]:.1f} "
        f"(15 min {load1[2]:.1f}); console {work / 'console.log'}; metadata asked {len(md.seen)} times")
    return judge(console, sha, clock, b.seconds, events, phase_spans, last_console_report, md.seen, t_start,
                 driver if module else None)


def judge(console, sha, clock, seconds, events, phase_spans, last_console_report, md_seen, t_start,  # noqa: ANN001
          module_driver=None) -> int:  # noqa: ANN001
    """The lane's assertions on the console, and the times."""
    ok = True
    says = "\n".join(oslane.bootstrap_says(re.sub(r"^.*?(?=trainvm bootstrap: )", "", console, flags=re.M)))
    ok &= check(f"payload {sha} fetched" in says and "and verified" in says,
                f"the bootstrap fetched payload {sha[:12]} and verified its sha256", says or console[-3000:])
    ok &= check(any(p.endswith("/service-accounts/default/token") for _, p, _ in md_seen),
                "fetch-gcp.sh took the service account's token from the metadata stub (port 80)", str(md_seen))
    # dpkg's triggers asked for three rebuilds in one driver install (~300 s each under TCG): the script defers them
    # (tv_apt's DPkg::Path) and rebuilds once, before the GPU gate's first reboot
    gen = console.split("rebooting (", 1)[0].count("update-initramfs: Generating /boot/initrd.img")
    ok &= check(gen <= 1, f"the initramfs was rebuilt at most once before the first reboot ({gen})")
    if clock.stop_at:
        log(f"stopped at {clock.stop_at!r} (TRAINVM_VM_STOP_AT): the phases and the machine are not judged")
        log("TIMES (host clock, s since QEMU started): " + ", ".join(f"{k} {v:.0f}" for k, v in clock.seen.items()))
        return 0 if ok and clock.stop_at in clock.seen else 1
    evs = events(console)
    spans = phase_spans(evs)
    statuses = [e.value for e in evs if e.kind == "status"]
    final = statuses[-1] if statuses else ""
    report = last_console_report(console)
    for s in spans:
        log(f"phase {s.phase:<10} {s.result or '-':<9} {'-' if s.seconds is None else f'{s.seconds:.0f} s'}")
    log(f"final status {final or '(none)'}; report error: {report.error if report else '(no report)'}")
    before = [s for s in spans if s.phase != "driver"]
    ok &= check(at_gpu_gate(final, report.error if report else None) and all(s.result in ("verified", "done") for s in before),
                f"the startup script fails at the GPU gate and not before (status {final or 'none'})",
                "\n".join(f"{s.phase} {s.result}" for s in spans))
    m = marks(console)
    for k, v in m.items():
        log(f"vm: {k} = {v}")
    booted = re.findall(rf"{MARK} (?:bootcmd )?uname=(\S+) pid1=(\S+)", console)  # each boot's, then the report's
    kernel, pid1 = booted[-1] if booted else ("", "")
    headers = m.get("headers", "").split()
    generic = [h for h in headers if h == "linux-headers-amd64" or re.fullmatch(r"linux-headers-[\d.-]+-amd64", h)]
    ok &= check(kernel.endswith("-cloud-amd64"), f"the booted kernel is the cloud kernel ({kernel or 'no uname line'})")
    ok &= check(f"linux-headers-{kernel}" in headers and not generic,
                f"the script installed the running kernel's headers, linux-headers-{kernel}, and no generic ones",
                " ".join(headers))
    kept, said = kernel_kept([k for k, _ in booted], m.get("images", ""))
    ok &= check(kept, f"the image's kernel stays the one that boots ({said})")
    ok &= check(pid1 == "systemd", f"PID 1 is systemd ({pid1 or 'no pid1 line'})")
    if module_driver:
        dkms, magic = module_built(m, kernel, module_driver)
        ok &= check(dkms, f"dkms status: nvidia-current/{module_driver} installed for {kernel}", m.get("dkms", ""))
        ok &= check(magic, f"modinfo -F vermagic nvidia-current names the booted kernel ({m.get('vermagic', '')})")
    t = clock.seen
    log("TIMES (host clock, s since QEMU started): " + ", ".join(f"{k} {v:.0f}" for k, v in t.items())
        + f"; VM ran {seconds:.0f}; lane total {time.monotonic() - t_start:.0f}")
    return 0 if ok else 1


def _free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
