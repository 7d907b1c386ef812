"""The ``bake`` scenario of `make test-os` (lane.py): what `trainvm bake` does on its builder, for real, then a VM
booted from the captured disk (docs/bake.md).

1. The builder: a fresh overlay of the Debian 12 root, the lane's VM environment (stubs, the fake NVIDIA host, uv's
   Python stand-in); the profile rendered with ``image_mode="bake"``, staged in the GCS emulator, fetched and run by
   the bootstrap as user data (as the builder VM runs it) -> ``TRAINVM_STATUS=baked``: the install phases ran for
   real (apt/dpkg/uv/PyPI), then ``bake-clean``. Before it, what a booted VM has and a chroot lacks is planted
   (``BOOTED_BUILDER``: cloud-init's instance state, D-Bus's machine id, systemd's random seed, guest agent state, shell history with a
   token, a journal); the Debian root has its own machine-id and SSH host keys (openssh-server's postinst).
2. The capture: the builder's API mounts (proc, sys, dev) taken away, then a tar of the **merged** overlay tree,
   numeric owners, xattrs and ACLs kept. The merged tree, not the upper directory: a cloud captures the whole disk,
   and the upper directory alone holds overlayfs whiteouts (character devices) instead of deletions, which is
   not what a disk image holds. Left out: ``/srv/pbs`` only, the lane's stand-in for uv's Python download site
   (GitHub on a real builder: never on the disk).
3. The archive is checked member by member (``archive_findings``: machine-id, SSH host keys, trainvm's secrets,
   env, state and payload, data, shell history, cloud-init state, apt's downloaded packages, trainvm's logs, docker
   credentials) and, unpacked into a fresh directory, for the bytes of the metadata token the builder's bootstrap
   used and of the token in its shell history (in no file); ``dpkg --get-selections`` in it shows the driver packages and the kernel's headers on hold.
4. The baked boot: the unpacked tree (a plain directory: a new disk from the image), the VM environment again but
   no Python download site; the profile rendered with ``image_mode="baked"`` staged and run by the bootstrap ->
   ``ready``. Asserted: /var/lib/dpkg/status byte for byte the same and dpkg.log unchanged (no package installed),
   and nothing downloaded: every HTTP(S) client of the script is pointed at a recording proxy (http(s)_proxy; only
   the loopback store, the metadata stub and the fake NVIDIA host bypass it) which saw no request, and the fake
   NVIDIA host (the NVIDIA apt repository and the profile's data source) was asked only for the data file.
   A request that bypasses the proxy env (a client that ignores it) is not seen by the proxy: dpkg's status and
   the NVIDIA host's own log are what catch an apt or a data download then.

The user data sits at /root/user-data (the lane's stand-in for where the cloud's agent keeps it; cloud-init's copy
under /var/lib/cloud/instances is planted and checked): it names the payload and its sha256, no secret, and the
baked boot's bootstrap replaces it.

Not modelled (on top of lane.py's list): the builder's stop, the cloud's image and a disk created from it (a tar
stands in), the first boot's systemd (machine-id and SSH host keys regenerated: only their absence is checked),
cloud-init's own ``clean`` (cloud-init is not installed in the lane's root), a GPU-less builder (the lane's GPU is
a stub either way).
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Callable

import bootlane
import osroot
from runner import BASE_ENV, check, final_status, in_root, log, run_script

REGION = "us-central1"
# what `bake-clean` keeps of trainvm's state: the install markers (the baked boot's phases verify), the driver
# closure the driver phase held, the helper (written again by every run) and the run lock (an empty file)
KEPT_STATE = ("var/lib/trainvm/done.", "var/lib/trainvm/driver-packages", "var/lib/trainvm/lib/",
              "var/lib/trainvm/lock")


SECRET = "hf_testos_" + "q" * 24  # a token typed into the builder's shell (its history must not reach the image)
# What a booted builder VM has that the lane's chroot does not (cloud-init's instance state and the user data it
# keeps, D-Bus's machine id, systemd's random seed, the guest agent's state, shell history, a journal): planted before the bake, so that
# the image checks find something to remove. Not planted: /root/.docker/config.json (a bake never logs in to a
# registry: container stacks are refused), still checked for.
BOOTED_BUILDER = {
    "var/lib/cloud/instances/i-builder/user-data.txt": "#!/bin/bash\n# the builder's bootstrap\n",
    "var/lib/cloud/instances/i-builder/obj.pkl": "instance i-builder\n",
    "var/lib/cloud/data/instance-id": "i-builder\n",
    "var/lib/cloud/sem/config_ssh.once": "\n",
    "var/log/cloud-init.log": "cloud-init ran\n",
    "var/lib/dbus/machine-id": "0123456789abcdef0123456789abcdef\n",
    "var/lib/systemd/random-seed": "512 bytes of the builder's entropy\n",
    "var/lib/google/agent-state": "instance-id 42\n",
    "root/.bash_history": f"export HF_TOKEN={SECRET}\n",
    "home/debian/.bash_history": "sudo -i\n",
    "var/log/journal/0123456789abcdef0123456789abcdef/system.journal": "journal of the builder\n",
}


def plant_booted_builder(root: Path) -> None:
    for rel, text in BOOTED_BUILDER.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "var/lib/cloud/instance").symlink_to("/var/lib/cloud/instances/i-builder")


def _blocked(h: BaseHTTPRequestHandler) -> tuple[int, str]:
    return 403, "test-os: a baked boot downloads nothing"


class _Proxy(bootlane.Recorder):
    """The recording proxy of the baked boot: every request (a CONNECT for HTTPS, a GET of an absolute URL for
    HTTP) is recorded and refused."""

    do_CONNECT = do_HEAD = do_POST = bootlane.Recorder._serve  # noqa: N815 - http.server's names


def proxy() -> bootlane.Stub:
    import threading

    httpd = bootlane.Stub(_blocked)
    httpd.RequestHandlerClass = _Proxy
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def proxy_env(url: str) -> tuple[str, ...]:
    bypass = "127.0.0.1,localhost,metadata.google.internal,developer.download.nvidia.com"
    return (f"http_proxy={url}", f"https_proxy={url}", f"HTTP_PROXY={url}", f"HTTPS_PROXY={url}",
            f"no_proxy={bypass}", f"NO_PROXY={bypass}")


def archive_findings(members: dict[str, tuple[str, int]], data_dests: list[str]) -> list[str]:
    """What must not be in a baked image, found among ``members`` (path without a leading ./ -> (kind, size);
    kind "file", "dir", "link" or "other"). [] when the image is clean."""
    out: list[str] = []
    dests = [d.strip("/") for d in data_dests]
    for path, (kind, size) in sorted(members.items()):
        name = path.rsplit("/", 1)[-1]
        if path == "etc/machine-id" and size:
            out.append(f"{path}: {size} bytes (must be empty: systemd makes it at first boot)")
        elif path == "var/lib/dbus/machine-id" and kind == "file":
            out.append(f"{path}: a machine id")
        elif path in ("var/lib/systemd/random-seed", "var/lib/systemd/credential.secret"):
            out.append(f"{path}: the builder's {'random seed' if 'seed' in path else 'credential key'}")
        elif path.startswith("etc/ssh/ssh_host_"):
            out.append(f"{path}: an SSH host key")
        elif path in ("etc/trainvm/secrets.env", "etc/trainvm/env"):
            out.append(f"{path}: trainvm's per-VM environment")
        elif path.startswith("var/lib/trainvm/") and kind != "dir" and not path.startswith(KEPT_STATE):
            out.append(f"{path}: trainvm's per-VM state")
        elif path.startswith(("var/lib/trainvm/payload/", "opt/trainvm/payload/")) or path in (
                "opt/trainvm/current", "usr/local/sbin/trainvm-provision", "etc/systemd/system/trainvm-provision.service"):
            out.append(f"{path}: the builder's payload")
        elif any(path.startswith(d + "/") for d in dests) and kind != "dir":
            out.append(f"{path}: data")
        elif name == ".bash_history" or (name == "config.json" and "/.docker/" in f"/{path}"):
            out.append(f"{path}: {'shell history' if name == '.bash_history' else 'registry credentials'}")
        elif path.startswith(("var/lib/cloud/instance", "var/lib/cloud/data/", "var/lib/cloud/sem/")):
            out.append(f"{path}: cloud-init state of the builder")
        elif path.startswith("var/cache/apt/archives/") and name.endswith(".deb"):
            out.append(f"{path}: a downloaded package")
        elif path.startswith("var/log/trainvm/") and kind == "file" and size:
            out.append(f"{path}: trainvm's log ({size} bytes)")
    return out


def members(archive: Path) -> dict[str, tuple[str, int]]:
    out = {}
    with tarfile.open(archive) as tar:
        for m in tar:
            kind = "file" if m.isfile() else "dir" if m.isdir() else "link" if m.issym() or m.islnk() else "other"
            out[m.name.removeprefix("./")] = (kind, m.size)
    return out


def capture(root: Path, archive: Path) -> None:
    """The builder's disk as an archive: the merged tree without its API mounts (see the module's docstring)."""
    osroot.umount_api(root)
    subprocess.run(["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls", "--exclude=./srv/pbs",
                    "-cf", str(archive), "-C", str(root), "."], check=True)


def unpack(archive: Path, dest: Path) -> Path:
    dest.mkdir()
    subprocess.run(["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls", "-xpf", str(archive),
                    "-C", str(dest)], check=True)
    return dest


def files_holding(root: Path, needle: str) -> list[str]:
    proc = subprocess.run(["grep", "-rlF", "--devices=skip", "--exclude-dir=proc", "--exclude-dir=sys", needle, "."],
                          cwd=root, stdout=subprocess.PIPE, text=True, check=False)
    return proc.stdout.split()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


class Boot:
    """One VM of the scenario: stage the render's payload, hand its bootstrap over as user data, run it."""

    def __init__(self, store: Any, env: tuple[str, ...], work: Path) -> None:
        self.store, self.env, self.work = store, env, work

    def __call__(self, root: Path, rendered: Any, name: str, extra: tuple[str, ...] = ()) -> tuple[int, str, float]:
        ref = self.store.stage(REGION, rendered.payload.data, rendered.payload.sha256)
        bootlane.write_user_data(root, rendered.user_data(ref).text)
        rc, out, took = run_script(root, bootlane.USER_DATA, (*self.env, *extra))
        (self.work / f"{name}.log").write_text(out)
        log(f"bake: {name}: rc {rc}, {final_status(out)} in {took:.0f} s")
        return rc, out, took


def scenario(base: Path, work: Path, repo: Any, server: Any, pydist: Any, driver: str,
             render: Callable[..., Any], *, cold: bool = False) -> dict[str, float]:
    """The bake scenario (module docstring). ``render(work, python, nvme, keyring_sha, image_mode)`` is lane.render.
    With ``cold``, first the same profile installed the usual way on a fresh overlay (the bench's baseline).
    Returns the seconds to the end of each run: cold (when asked), bake, baked."""
    from provisioner.providers.gcp_store import GcsPayloadStore
    from tests.emulators.gcs import GcsEmulator

    times: dict[str, float] = {}
    with GcsEmulator() as gcs:
        store = GcsPayloadStore(project="test-os", credentials=None, endpoint=gcs.url, call_timeout=10,
                                retry_base_delay=0, service_account=lambda: "vm@test-os.iam.gserviceaccount.com")
        md = bootlane.serve(bootlane.gce_metadata)
        boot = Boot(store, (f"TRAINVM_METADATA_URL={md.url}", *bootlane.FETCH_ENV), work)
        try:
            if cold:
                (work / "cold").mkdir()
                root = osroot.overlay(base, work / "cold", log)
                osroot.vm_environment(root, work / "cold", repo, server, pydist, driver, None)
                rc, out, times["cold"] = boot(root, render(work, pydist.version, False, repo.keyring_sha256, ""), "cold")
                check(rc == 0 and final_status(out) == "ready", "bake: the cold install reaches ready", out)
                osroot.discard(work / "cold")
            times["bake"], archive, driver_pkgs = _bake(base, work, repo, server, pydist, driver, render, boot)
            times["baked"] = _baked(work, archive, repo, server, pydist, driver, render, boot, driver_pkgs)
        finally:
            md.shutdown()
    return times


def _bake(base, work, repo, server, pydist, driver, render, boot) -> tuple[float, Path, set[str]]:
    (work / "builder").mkdir()
    root = osroot.overlay(base, work / "builder", log)
    osroot.vm_environment(root, work / "builder", repo, server, pydist, driver, None)
    plant_booted_builder(root)
    identity = {rel: (root / rel).read_bytes() for rel in ("etc/machine-id", "etc/ssh/ssh_host_ed25519_key")}
    check(all(identity.values()), "bake: the builder has a machine-id and SSH host keys (the Debian root's), and a "
          f"booted VM's state planted ({len(BOOTED_BUILDER) + 1} paths: cloud-init, D-Bus id, agent, history, journal)")
    rendered = render(work, pydist.version, False, repo.keyring_sha256, "bake")
    rc, out, took = boot(root, rendered, "bake")
    check(rc == 0 and final_status(out) == "baked", f"bake: the builder's bootstrap runs the bake-mode script to baked ({took:.0f} s)", out)
    check("phase start" in out and "emptied /etc/machine-id" in out, "bake: the install phases and bake-clean ran", out)
    installed = {n for n in in_root(root, "dpkg-query", "-W", "-f=${Package}\n").split() if n in repo.names}
    check({"nvidia-driver-cuda", "nvidia-kernel-open-dkms"} <= installed,
          f"bake: the driver installed for real on the builder ({len(installed)} packages of the NVIDIA repository)")
    kver = in_root(root, "/usr/local/bin/uname", "-r").strip()
    archive = work / "image.tar"
    capture(root, archive)
    osroot.discard(work / "builder")
    found = members(archive)
    log(f"bake: captured {archive} ({archive.stat().st_size >> 20} MiB, {len(found)} members)")
    problems = archive_findings(found, ["/mnt/data/sample"])
    check(not problems, "bake: the image holds no machine-id, SSH host key, secret, per-VM state, payload, data, "
          "history, cloud-init state, downloaded package or log", "\n".join(problems))
    planted = sorted(p for p in [*BOOTED_BUILDER, "var/lib/cloud/instance", "var/lib/google"] if p in found)
    check(not planted, "bake: none of the booted builder's planted state is in the image", str(planted))
    kept = sorted(p for p in found if p.startswith(KEPT_STATE))
    check(bool(kept), f"bake: the install markers are kept ({', '.join(p.rsplit('/', 1)[-1] for p in kept)})")
    return took, archive, installed | {f"linux-headers-{kver}"}


def _baked(work, archive, repo, server, pydist, driver, render, boot, held_pkgs: set[str]) -> float:
    root = unpack(archive, work / "vm")
    leaked = {needle: files_holding(root, needle) for needle in (bootlane.GCE_TOKEN, SECRET)}
    check(not any(leaked.values()), "bake: the builder's metadata token and the token typed into its shell are in no "
          "file of the image", str(leaked))
    selections = dict(line.split() for line in in_root(root, "dpkg", "--get-selections").splitlines() if line.strip())
    not_held = sorted(p for p in held_pkgs if selections.get(p) != "hold" and selections.get(p + ":amd64") != "hold")
    check(not not_held, f"bake: dpkg --get-selections in the image: {len(held_pkgs)} driver and kernel-header packages on hold",
          str(not_held))
    osroot.vm_environment(root, work, repo, server, None, driver, None)  # no Python download site this time
    status, dpkg_log = _sha(root / "var/lib/dpkg/status"), _sha(root / "var/log/dpkg.log")
    px = proxy()
    try:
        # control: the proxy sees what a client of the image would download (else "it saw nothing" proves nothing)
        subprocess.run(["chroot", str(root), "env", "-i", *BASE_ENV, *proxy_env(px.url), "curl", "-sS", "-o", "/dev/null",
                        "https://pypi.org/simple/six/"], capture_output=True, timeout=60, check=False)
        check([m for m, _, _ in px.seen] == ["CONNECT"] and px.seen[0][1].startswith("pypi.org:443"),
              "bake: control: curl in the image through the recording proxy is seen and refused", str(px.seen))
        del px.seen[:]
        del server.seen[:]
        rendered = render(work, pydist.version, False, repo.keyring_sha256, "baked")
        rc, out, took = boot(root, rendered, "baked", proxy_env(px.url))
        asked = list(server.seen)
    finally:
        px.shutdown()
    check(rc == 0 and final_status(out) == "ready", f"bake: a VM booted from the image reaches ready ({took:.0f} s)", out)
    check(_sha(root / "var/lib/dpkg/status") == status and _sha(root / "var/log/dpkg.log") == dpkg_log,
          "bake: the baked boot installed no package (dpkg status and dpkg.log byte for byte the same)")
    check(not px.seen, "bake: the baked boot downloaded nothing through the proxy (apt, uv, PyPI, Python)", str(px.seen))
    check(asked == ["/trainvm-data/sample.bin"], "bake: the NVIDIA host was asked for the profile's data only", str(asked))
    check((root / "mnt/data/sample/sample.bin").exists(), "bake: the baked boot staged the profile's data")
    osroot.umount_api(root)
    subprocess.run(["rm", "-rf", str(root), str(archive)], check=False)
    return took
