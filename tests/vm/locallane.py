"""`make test-vm-local`: the local cloud through trainvm's own command line, on a booted Debian 12 kernel (issue 38).

tests/vm/bootlane.py boots the GCE bootstrap with a lane-made user data; this lane makes nothing of the VM itself:
``trainvm up PROFILE --cloud local`` stages the payload in the local store, writes the NoCloud seed and starts QEMU
(TCG) on an overlay of the lane's base image, exactly as a user's ``up`` does. What the lane models, each said here:

- **The base image** is the VM lane's Debian 12 image (tests/vm/image.py) with the lane's own changes made before
  the first boot (``image.derive``), since the user data is the product's and stays untouched:
  * ``/etc/hosts`` maps developer.download.nvidia.com to this machine's own address on its default route (not
    10.0.2.2, QEMU's address of the host's loopback, where the chroot lanes' repositories listen on port 443: this
    lane runs beside them; the guest reaches that address through QEMU's NAT as any outside host), where the signed
    fake NVIDIA repository (tests/realos/osrepo.py: empty .debs, Debian's real nvidia-graphics-drivers metadata
    renumbered) listens on port 443 with a trustme CA kept in the cache (so the image changes only with the address);
  * that CA and this workplace's egress CAs (/usr/local/share/ca-certificates: PyPI is reached through a
    TLS-inspecting proxy) are in the image's trust store;
  * drop-ins give cloud-final.service and trainvm-provision.service the chroot lane's environment (uv trusts the
    system CAs; uv's Python list is /srv/pbs/downloads.json, pointing at the stand-in CPython on the fake
    repository's host, since github.com is not reachable here; the bootstrap's fetch gives up after 120 s).
- **Debian's archive and PyPI are the real ones**, reached from the guest through QEMU's user network.
- **The one edit of the product** (the VM lanes' own, as tests/realos/bootlane.py makes it): the script pins the
  sha256 of NVIDIA's cuda-keyring .deb, which the fake repository cannot produce, so ``trainvm`` runs through
  ``LAUNCHER``, which sets ``provisioner.render.install.KEYRING_SHA256["debian12"]`` to the fake keyring's sha256
  before the command line starts; every command is otherwise the installed ``trainvm`` entry point.
- **The driver packages are empty** unless the real R550 module replica is given, so a GPU profile's rehearsal must
  fail at the GPU gate ("rehearsal: the NVIDIA kernel module is not built for the running kernel"), and not before.

The scenario, each step a trainvm command and what is asserted of it:

1. ``plan --cloud local``: offered as a rehearsal (no GPU).
2. ``up --cloud local --yes --wait-ready``: returns when the script's final status is published through the VM's
   endpoint; the status is ``failed:driver`` with the rehearsal gate's message; the payload was fetched through
   the endpoint (its access log: one GET of the payload, 200) and verified (console).
3. ``status``, ``verify`` (exit 1, failed at the driver phase), ``logs`` (the phases read from the serial console),
   ``ssh -- ...`` (a real sshd on a forwarded port: the booted kernel is the cloud kernel, its headers are the ones
   installed, the idle timer is enabled).
4. **The idle power-off** (of the failed VM, or of the rehearsed one): nobody logged in, the script exited: the
   watchdog (armed first) powers the VM off once it has been idle ``idle_shutdown_minutes`` (5, the least a profile
   may say) and says so on the console; then ``status`` says stopped and QEMU is gone.
5. ``start``: the same disk boots, the script runs again and ends as before; the endpoint's access log shows no
   second GET of the payload (it is on the disk); then ``stop`` (ACPI power-off through QMP).
6. A **tampered payload**: ``up`` of a second VM, its store object overwritten before the guest fetches it: the
   bootstrap refuses it (sha256), ``failed:bootstrap``.
7. ``down`` of both: no VM folder and no payload object left.

With ``TRAINVM_VM_MODULE=1`` (``make test-vm-local-module``) the profile is a V100 at 550.163.01 and the replica's
nvidia-kernel-dkms is Debian's real R550 source: DKMS compiles NVIDIA's module on the booted kernel under TCG, ``up``
ends ``rehearsed``, ``verify`` exits 6, ssh sees ``dkms status`` installed for ``uname -r`` and the module's vermagic
naming it, and after ``start`` every phase is ``verified`` (nothing installed again).

Not here yet: ``bake`` -> ``up`` with the repositories unreachable (a bake on local is a second cold install with a
DKMS build under TCG), multi-node. Root; port 443 of this machine's address free; ~30 min under TCG on 2 cores.

    nice -n 10 .venv/bin/python tests/vm/locallane.py     # TRAINVM_VM_WORK (default /var/tmp/trainvm-local-lane)
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO / "tests/realos"), str(REPO / "tests/aptsim"), str(REPO)]
sys.path.append(str(HERE))

import image  # noqa: E402
import lane  # noqa: E402
import osrepo  # noqa: E402
import osroot  # noqa: E402

_spec = importlib.util.spec_from_file_location("vmbootlane", HERE / "bootlane.py")  # not tests/realos/bootlane.py
vmlane = importlib.util.module_from_spec(_spec)  # tests/vm/bootlane.py: its ENV and downloads()
_spec.loader.exec_module(vmlane)

PYTHON = str(REPO / ".venv/bin/python")
#: ``trainvm`` with the lane's one edit (the module docstring): the fake cuda-keyring's sha256 pinned
LAUNCHER = ("import os, sys; from provisioner.render import install; "
            "install.KEYRING_SHA256['debian12'] = os.environ['TRAINVM_LANE_KEYRING_SHA256']; "
            "from provisioner.console import entry; sys.argv[0] = 'trainvm'; sys.exit(entry())")
NAME, TAMPERED, BAKED = "lane-rehearsal", "lane-tampered", "lane-baked"
#: TRAINVM_VM_BAKE=1 (implies the module): lock, bake --cloud local, then up on the baked image with the replica
#: repository down (``bake_scenario``)
BAKE = os.environ.get("TRAINVM_VM_BAKE") == "1"
#: TRAINVM_VM_MODULE=1: the replica's real nvidia-kernel-dkms (tests/realos/nvidia_module.py, Debian's R550 source)
#: and a V100 profile at its version (proprietary modules: render/install.py driver_set), so DKMS compiles NVIDIA's
#: module on the booted kernel and the rehearsal can pass its gate (``rehearsed``); else a T4 at lane.DRIVER on the
#: empty replica, whose rehearsal must fail at the gate
MODULE = os.environ.get("TRAINVM_VM_MODULE") == "1" or BAKE
PROFILE = """name: local-lane
hardware: {{gpu: {gpu}, gpu_count: 1}}
stack:
  os: debian-12
  driver: "{driver}"
  cuda: "12.4"
  python: "{python}"
  packages: [six==1.16.0, idna==3.7, nvidia-cuda-runtime-cu12==12.4.127]
lifecycle: {{idle_shutdown_minutes: 5}}
"""
RESULTS: list[tuple[bool, str]] = []


def log(msg: str) -> None:
    print(f"[test-vm-local {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def check(cond: bool, what: str, detail: str = "") -> bool:
    RESULTS.append((cond, what))
    log(("ok: " if cond else "FAILED: ") + what + ("" if cond or not detail else f"\n{detail[-2500:]}"))
    return cond


def lane_ca(cache: Path):  # noqa: ANN201 - a trustme.CA
    """The fake repository's CA, kept beside the image that trusts it."""
    import trustme

    cert, key = cache / "local-lane-ca.pem", cache / "local-lane-ca.key"
    if not (cert.exists() and key.exists()):
        ca = trustme.CA()
        cert.write_bytes(ca.cert_pem.bytes())
        key.write_bytes(ca.private_key_pem.bytes())
        key.chmod(0o600)
    return trustme.CA.from_pem(cert.read_bytes(), key.read_bytes())


def host_address() -> str:
    """This machine's address on its default route (``TRAINVM_VM_REPO_HOST`` instead): a UDP socket's own address
    after connect (nothing is sent)."""
    import socket

    if given := os.environ.get("TRAINVM_VM_REPO_HOST"):
        return given
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("192.0.2.1", 9))
        return str(sock.getsockname()[0])


def lane_image(ca_pem: bytes, downloads_json: str, repo_host: str) -> Path:
    """The VM lane's image with the lane's hosts, CAs and unit drop-ins (the module docstring)."""
    hosts = f"127.0.0.1 localhost\n{repo_host} developer.download.nvidia.com # trainvm-local-lane\n"
    files = {"etc/hosts": hosts.encode(), "srv/pbs/downloads.json": downloads_json.encode(),
             "usr/local/share/ca-certificates/trainvm-local-lane-0.crt": ca_pem}
    for i, pem in enumerate(sorted(Path("/usr/local/share/ca-certificates").glob("*.crt")), start=1):
        files[f"usr/local/share/ca-certificates/trainvm-local-lane-{i}.crt"] = pem.read_bytes()
    dropin = "[Service]\n" + "".join(f"Environment={k}={v}\n" for k, v in vmlane.ENV.items())
    for unit in ("cloud-final.service", "trainvm-provision.service"):
        files[f"etc/systemd/system/{unit}.d/trainvm-local-lane.conf"] = dropin.encode()
    return image.derive("local-lane", files, log=log)


def tv(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    out = subprocess.run([PYTHON, "-c", LAUNCHER, *args], env=env, text=True, capture_output=True, timeout=timeout, check=False)
    log(f"trainvm {' '.join(args)} -> exit {out.returncode} in {time.monotonic() - t0:.0f} s")
    return out


def vm_dir(env: dict[str, str], name: str) -> Path:
    return Path(env["TRAINVM_LOCAL_DIR"]) / name


def qemu_running(env: dict[str, str], name: str) -> bool:
    pid = vm_dir(env, name) / "qemu.pid"
    try:
        return Path(f"/proc/{int(pid.read_text().strip())}").exists()
    except (OSError, ValueError):
        return False


def final_status(env: dict[str, str], name: str) -> str:
    """The status the VM's script last published through its endpoint (what ``status`` reads)."""
    try:
        return (vm_dir(env, name) / "status" / "status").read_text().strip()
    except OSError:
        return ""


def wait_for(what: str, cond, timeout: float, every: float = 5) -> float | None:  # noqa: ANN001
    """Seconds until ``cond()`` held, or None after ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            log(f"{what} after {time.monotonic() - t0:.0f} s")
            return time.monotonic() - t0
        time.sleep(every)
    log(f"{what}: not seen within {timeout:.0f} s")
    return None


def payload_gets(env: dict[str, str], name: str) -> list[str]:
    try:
        lines = (vm_dir(env, name) / "access.log").read_text().splitlines()
    except OSError:
        return []
    return [line for line in lines if " GET /payloads/" in line]


def free(host: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def ssh_agent(work: Path) -> dict[str, str]:
    key = work / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    sock = work / "agent.sock"
    subprocess.run(["ssh-agent", "-a", str(sock)], check=True, capture_output=True)
    subprocess.run(["ssh-add", "-q", str(key)], check=True, env={**os.environ, "SSH_AUTH_SOCK": str(sock)},
                   capture_output=True)
    return {"SSH_AUTH_SOCK": str(sock), "TRAINVM_SSH_PUBLIC_KEY": f"{key}.pub"}


def main() -> int:  # noqa: PLR0915 - one scenario, read top to bottom
    repo_host = host_address()
    problems = image.missing() + ([] if free(repo_host, 443) else [f"{repo_host}:443 is in use"])
    problems += [f"{t} (Debian package openssh-client)" for t in ("ssh", "ssh-keygen", "ssh-agent") if not shutil.which(t)]
    if problems:
        raise SystemExit("test-vm-local cannot run: " + "; ".join(problems))
    t_start = time.monotonic()
    work = Path(os.environ.get("TRAINVM_VM_WORK", "/var/tmp/trainvm-local-lane"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cache = image.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    os_cache = Path(os.environ.get("TRAINVM_OS_CACHE", "/var/cache/trainvm-os"))
    os_cache.mkdir(parents=True, exist_ok=True)
    pydist = osroot.python_dist(os_cache, log)
    ca = lane_ca(cache)
    base = lane_image(ca.cert_pem.bytes(), vmlane.downloads(pydist), repo_host)
    if MODULE:
        import nvidia_module

        driver, repo = nvidia_module.replica_repository(work / "www", os_cache, log)
    else:
        driver, repo = lane.DRIVER, osrepo.build(work / "www", [lane.DRIVER], log)
    (work / "www/trainvm-lane/pbs").mkdir(parents=True)
    shutil.copy(pydist.tarball, work / "www/trainvm-lane/pbs" / pydist.tarball.name)
    server = osrepo.serve(work / "www", work / "tls", ca, repo_host)
    env = {**os.environ, "TRAINVM_LOCAL_DIR": str(work / "local"), "TRAINVM_LOCAL_IMAGE_DEBIAN_12": str(base),
           "TRAINVM_LOCAL_ACCEL": "tcg", "NO_COLOR": "1", "COLUMNS": "200", "TRAINVM_NO_CACHE": "1",
           "TRAINVM_LANE_KEYRING_SHA256": repo.keyring_sha256, "XDG_CACHE_HOME": str(work / "cache"),
           "XDG_STATE_HOME": str(work / "state"), **ssh_agent(work)}
    profile = work / "local-lane.yaml"
    profile.write_text(PROFILE.format(gpu="V100" if MODULE else "T4", driver=driver, python=pydist.version))
    try:
        if BAKE:
            return bake_scenario(env, profile, server, t_start, work)
        return scenario(env, profile, repo, t_start, work)
    finally:
        for name in (NAME, TAMPERED, BAKED):
            if vm_dir(env, name).exists():
                tv(env, "down", name, "--cloud", "local", "--yes")
        server.shutdown()
        subprocess.run(["ssh-agent", "-k"], env=env, capture_output=True, check=False)


def scenario(env: dict[str, str], profile: Path, repo, t_start: float, work: Path) -> int:  # noqa: ANN001, PLR0915
    out = tv(env, "plan", str(profile), "--cloud", "local")
    check(out.returncode == 0 and "rehearsal: no GPU" in out.stdout, "plan --cloud local offers this machine as a "
          "rehearsal (no GPU)", out.stdout + out.stderr)
    t0 = time.monotonic()
    out = tv(env, "up", str(profile), "--cloud", "local", "--yes", "--name", NAME, "--wait-ready", "--ready-timeout",
             # the module's DKMS build alone took ~36 min under TCG (run 2: 2400 s was too short, up exited 5 in driver)
             os.environ.get("TRAINVM_VM_TIMEOUT", "5400" if MODULE else "2400"), timeout=6000)
    cold = time.monotonic() - t0
    (work / "up.out").write_text(out.stdout + out.stderr)
    status = final_status(env, NAME)
    log(f"up --wait-ready: exit {out.returncode} after {cold:.0f} s, final status {status!r}")
    console = (vm_dir(env, NAME) / "console.log").read_text(errors="replace")
    (work / "console-1.log").write_text(console)
    check("and verified" in console and len(payload_gets(env, NAME)) == 1 and " 200 " in payload_gets(env, NAME)[0],
          "the bootstrap fetched the payload through the VM's endpoint (one GET, 200) and verified its sha256",
          "\n".join(payload_gets(env, NAME)) + console[-2000:])
    if MODULE:
        check(status == "rehearsed" and "rehearsal: no GPU; not checked" in console,
              f"up --wait-ready: every phase ran and the GPU gate says rehearsal: no GPU (status {status or 'none'}, "
              f"exit {out.returncode})", out.stdout + out.stderr + console[-2500:])
        out = tv(env, "verify", NAME, "--cloud", "local")
        check(out.returncode == 6 and "rehearsed" in out.stdout and "not checked" in out.stdout,
              "verify: rehearsed, the GPU fields not checked, exit 6 (never a match)", out.stdout + out.stderr)
    else:
        gate = status.startswith("failed:driver:") and "not built for the running kernel" in (out.stdout + out.stderr + console)
        check(out.returncode == 1 and gate, "up --wait-ready ends at the rehearsal's GPU gate (empty replica driver: "
              f"no module for the booted kernel), exit 1 (status {status or 'none'})", out.stdout + out.stderr)
        out = tv(env, "verify", NAME, "--cloud", "local")
        check(out.returncode == 1 and "driver" in out.stdout, "verify: failed at the driver phase, exit 1",
              out.stdout + out.stderr)
    out = tv(env, "logs", NAME, "--cloud", "local")
    check(out.returncode == 0 and f"TRAINVM_STATUS={status}" in out.stdout and "preflight" in out.stdout,
          "logs shows the serial console with the phases", out.stdout[-2000:] + out.stderr)
    out = tv(env, "ssh", NAME, "--cloud", "local", "--", "uname -r; cat /proc/1/comm; "
             "dpkg-query -W -f='${Status} ${Package}\\n' 'linux-headers-*' | awk '$3==\"installed\"{print $4}' | tr '\\n' ' '; echo; "
             "systemctl is-enabled trainvm-idle.timer; sudo cat /etc/trainvm/watchdog.conf; "
             "echo dkms=$(/usr/sbin/dkms status 2>&1 | tr '\n' ';'); "
             "echo vermagic=$(/sbin/modinfo -F vermagic nvidia-current 2>&1 || /sbin/modinfo -F vermagic nvidia 2>&1)",
             timeout=180)
    lines = out.stdout.splitlines()
    log(f"ssh says: {lines}")
    kernel = lines[0].strip() if lines else ""
    check(out.returncode == 0 and kernel.endswith("-cloud-amd64") and len(lines) > 1 and lines[1] == "systemd",
          f"ssh reaches the booted VM: kernel {kernel or '?'}, PID 1 systemd", out.stdout + out.stderr)
    headers = lines[2].split() if len(lines) > 2 else []
    check(f"linux-headers-{kernel}" in headers and not any(re.fullmatch(r"linux-headers-[\d.-]+-amd64", h) for h in headers),
          f"the script installed the running kernel's headers and no generic ones ({' '.join(headers)})")
    check("enabled" in lines[3:4] and "IDLE_MINUTES=5" in out.stdout,
          "the idle watchdog is armed (trainvm-idle.timer enabled, IDLE_MINUTES=5)", out.stdout)
    if MODULE:
        said = dict(line.split("=", 1) for line in lines if line.startswith(("dkms=", "vermagic=")))
        check(f", {kernel}, x86_64: installed" in said.get("dkms", "") and said.get("vermagic", "").split(" ")[:1] == [kernel],
              f"DKMS built NVIDIA's module on the booted kernel: dkms status {said.get('dkms', '?')}; "
              f"vermagic {said.get('vermagic', '?')}")
    # 4: nobody is logged in now; the script has exited: idle. The timer's first check is 5 min after boot, the
    # 5-minute load average must fall under 1.0 after the install, then the 5-minute limit runs.
    idle = wait_for("the idle watchdog powered the VM off", lambda: not qemu_running(env, NAME), 1500, 10)
    console = (vm_dir(env, NAME) / "console.log").read_text(errors="replace")
    check(idle is not None and "idle for 5 minutes (limit 5): stop" in console,
          "the idle watchdog powered the VM off and said why on the console (its QEMU exited)", console[-1500:])
    out = tv(env, "status", NAME, "--cloud", "local")
    check(out.returncode == 0 and "stopped" in out.stdout.lower(), "status says stopped", out.stdout + out.stderr)
    # 5: start boots the same disk; nothing fetched again
    gets = len(payload_gets(env, NAME))
    out = tv(env, "start", NAME, "--cloud", "local")
    check(out.returncode == 0 and qemu_running(env, NAME), "start boots the same disk", out.stdout + out.stderr)
    (vm_dir(env, NAME) / "status" / "status").unlink(missing_ok=True)
    again = wait_for("the script's status after start", lambda: final_status(env, NAME).startswith(("failed:", "ready", "rehearsed")), 1500, 10)
    console = (vm_dir(env, NAME) / "console.log").read_text(errors="replace")
    (work / "console-2.log").write_text(console)
    check(again is not None and final_status(env, NAME).split(":")[0] == status.split(":")[0],
          f"after start the script runs again and ends as before ({final_status(env, NAME) or 'none'})", console[-1500:])
    if MODULE:
        out = tv(env, "logs", NAME, "--cloud", "local", "--json")
        phases = {p["phase"]: p["result"] for p in json.loads(out.stdout or "{}").get("phases", [])}
        check(bool(phases) and all(r in ("verified", "skipped") for r in phases.values()),
              f"after start nothing was installed again: every phase verified ({phases})", out.stdout[-1500:])
    check(len(payload_gets(env, NAME)) == gets, "after start the payload was not fetched again (the endpoint's "
          "access log has no second GET)", "\n".join(payload_gets(env, NAME)))
    t0 = time.monotonic()
    out = tv(env, "stop", NAME, "--cloud", "local", "--yes")
    check(out.returncode == 0 and not qemu_running(env, NAME), f"stop powers the VM off ({time.monotonic() - t0:.0f} s)",
          out.stdout + out.stderr)
    # 6: a tampered payload
    out = tv(env, "up", str(profile), "--cloud", "local", "--yes", "--name", TAMPERED)
    objects = list((Path(env["TRAINVM_LOCAL_DIR"]) / "store").rglob("*.tar.gz"))
    for obj in objects:  # one byte in the middle (a gzip's last byte is its size's top byte: already 0)
        data = bytearray(obj.read_bytes())
        data[len(data) // 2] ^= 0xFF
        obj.write_bytes(bytes(data))
    refused = wait_for("the tampered VM's bootstrap result", lambda: "failed:bootstrap" in
                       (vm_dir(env, TAMPERED) / "console.log").read_text(errors="replace"), 900, 5)
    console = (vm_dir(env, TAMPERED) / "console.log").read_text(errors="replace")
    (work / "console-tampered.log").write_text(console)
    check(out.returncode == 0 and refused is not None and "sha256" in console,
          f"a tampered payload is refused by the bootstrap ({len(objects)} object(s) changed)", console[-1500:])
    # 7: down, nothing left
    for name in (NAME, TAMPERED):
        out = tv(env, "down", name, "--cloud", "local", "--yes")
        check(out.returncode == 0 and not vm_dir(env, name).exists(), f"down {name} removes its folder", out.stdout + out.stderr)
    left = [p for p in (Path(env["TRAINVM_LOCAL_DIR"]) / "store").rglob("*") if p.is_file()]
    check(not left, "no payload object is left in the local store", " ".join(map(str, left)))
    failed = [w for ok, w in RESULTS if not ok]
    log(f"TIMES: up to the final status {cold:.0f} s; idle power-off {idle or 0:.0f} s after up returned; "
        f"start to the final status {again or 0:.0f} s; lane {time.monotonic() - t_start:.0f} s; "
        f"load average {os.getloadavg()[0]:.1f}")
    log(f"{len(RESULTS) - len(failed)} of {len(RESULTS)} checks passed" + (": FAILED " + "; ".join(failed) if failed else ""))
    return 1 if failed else 0


def bake_scenario(env: dict[str, str], profile: Path, server, t_start: float, work: Path) -> int:  # noqa: ANN001
    """lock; bake --cloud local (a builder VM runs the bake-mode script: a cold install with the DKMS build, then a
    qcow2 of its disk); images; plan names the baked image; the replica repository (and the stand-in Python's host)
    shut down; up on the baked image --wait-ready: rehearsed with nothing installed (every phase verified, no apt
    download, no uv download on the console); down; images delete; nothing left."""
    out = tv(env, "lock", str(profile), timeout=600)
    check(out.returncode == 0, "lock pins the profile (a baked image must be exact)", out.stdout + out.stderr)
    t0 = time.monotonic()
    out = tv(env, "bake", str(profile), "--cloud", "local", "--json", timeout=7200)
    baked_s = time.monotonic() - t0
    (work / "bake.out").write_text(out.stdout + out.stderr)
    try:
        doc = json.loads(out.stdout)
    except ValueError:
        doc = {}
    image_name = str((doc.get("image") or {}).get("name") or "")
    check(out.returncode == 0 and bool(image_name), f"bake --cloud local made {image_name or 'no image'} in {baked_s:.0f} s",
          out.stdout[-2500:] + out.stderr[-2500:])
    out = tv(env, "images", "--cloud", "local")
    check(out.returncode == 0 and bool(image_name) and image_name in out.stdout, "images --cloud local lists it",
          out.stdout + out.stderr)
    out = tv(env, "plan", str(profile), "--cloud", "local")
    check(bool(image_name) and f"baked image: {image_name}" in out.stdout, "plan names the baked image", out.stdout)
    server.shutdown()
    log("the replica NVIDIA repository and the stand-in Python's host are down")
    t0 = time.monotonic()
    out = tv(env, "up", str(profile), "--cloud", "local", "--yes", "--name", BAKED, "--wait-ready", "--ready-timeout",
             "2400", timeout=3000)
    warm = time.monotonic() - t0
    console = (vm_dir(env, BAKED) / "console.log").read_text(errors="replace")
    (work / "console-baked.log").write_text(console)
    status = final_status(env, BAKED)
    check(status == "rehearsed", f"up on the baked image: rehearsed in {warm:.0f} s (cold: bake above)",
          out.stdout + out.stderr + console[-2500:])
    out = tv(env, "logs", BAKED, "--cloud", "local", "--json")
    phases = {p["phase"]: p["result"] for p in json.loads(out.stdout or "{}").get("phases", [])}
    downloads = [line for line in console.splitlines() if re.search(r"\b(Get|Hit):\d+ |Downloading |Downloaded ", line)]
    # watchdog and env write this VM's own settings at its first boot ("done"); the phases that install must verify
    installs = {k: v for k, v in phases.items() if k not in ("watchdog", "env")}
    check(bool(installs) and all(r in ("verified", "skipped") for r in installs.values()) and not downloads,
          f"nothing installed or downloaded on the baked image ({phases})", "\n".join(downloads[:20]))
    out = tv(env, "down", BAKED, "--cloud", "local", "--yes")
    check(out.returncode == 0 and not vm_dir(env, BAKED).exists(), "down removes the VM", out.stdout + out.stderr)
    out = tv(env, "images", "delete", image_name, "--cloud", "local")
    check(out.returncode == 0, f"images delete {image_name}", out.stdout + out.stderr)
    left = [p for p in (Path(env["TRAINVM_LOCAL_DIR"]) / "store").rglob("*") if p.is_file()]
    check(not left, "no payload object is left in the local store", " ".join(map(str, left)))
    failed = [w for ok, w in RESULTS if not ok]
    log(f"TIMES: bake {baked_s:.0f} s; up on the baked image to rehearsed {warm:.0f} s; lane {time.monotonic() - t_start:.0f} s")
    log(f"{len(RESULTS) - len(failed)} of {len(RESULTS)} checks passed" + (": FAILED " + "; ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
