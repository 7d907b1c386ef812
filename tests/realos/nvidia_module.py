"""NVIDIA's real R550 kernel-module source for the replica NVIDIA repository (`make test-os-module`, issue 38).

What is real and what is modelled:

- **Real**: Debian's ``nvidia-kernel-dkms`` 550.163.01-2 (trixie, non-free; ``PIN``), downloaded once by apt itself
  (``apt-get download`` with a private configuration whose only source is trixie non-free, ``signed-by`` the
  host's debian-archive-keyring: apt checks the InRelease signature, the Packages index's hash and the .deb's hash
  against it), then checked again against the size and SHA256 written below (a tampered or substituted download is
  refused, ``check_pin``). Its data is kept as it is: NVIDIA's module source under
  /usr/src/nvidia-current-550.163.01 (the proprietary nvidia.ko's binary core nv-kernel.o_binary and the open
  interface layer, nvidia-modeset, nvidia-drm, nvidia-uvm, nvidia-peermem), dkms.conf (DKMS module
  ``nvidia-current``, built modules installed as ``nvidia-current*.ko`` under updates/dkms), and its maintainer
  scripts (dh_dkms's postinst: DKMS adds, builds and installs the module for the kernels it finds; prerm).
- **Modelled**: the control data. The replica names it as the fake repository does (tests/aptsim/fakerepo.py):
  NVIDIA's name ``nvidia-kernel-dkms`` at ``<V>-1`` with the relationships of Debian's bookworm stanza renumbered to
  V (``repack_control``). trixie's own Depends asks for ``dkms (>= 3.0.11)``, which Debian 12 (dkms 3.0.10-8+deb12u1)
  cannot satisfy: the renumbered bookworm stanza's ``dkms (>= 3.0.3-4~)`` is kept. dkms 3.0.10 runs this postinst as
  it is (common.postinst takes NAME VERSION TARBALL_ROOT ARCH UPGRADE, the arguments dh_dkms 3.2 passes) and reads
  dkms.conf's BUILD_EXCLUSIVE_CONFIG. Every other package of the replica stays an empty .deb (osrepo.py), including
  nvidia-kernel-support, whose modprobe configuration (``alias nvidia nvidia-current``) is therefore absent.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import fakerepo


@dataclass(frozen=True)
class Pin:
    package: str
    version: str
    filename: str  # in the archive's pool
    size: int
    sha256: str

    @property
    def upstream(self) -> str:
        return self.version.split("-")[0]


# http://deb.debian.org/debian/dists/trixie/non-free/binary-amd64/Packages.xz (the Packages stanza of
# nvidia-kernel-dkms 550.163.01-2: Filename, Size, SHA256)
PIN = Pin("nvidia-kernel-dkms", "550.163.01-2",
          "pool/non-free/n/nvidia-graphics-drivers/nvidia-kernel-dkms_550.163.01-2_amd64.deb",
          41721692, "729d17210de2a407c27b33d1811a72502483d189251dafd718e453b0c4e40107")
DRIVER = PIN.upstream  # the module source's version: the pinned driver of the module lane
DKMS_NAME = "nvidia-current"  # dkms.conf's PACKAGE_NAME (Debian's), what `dkms status` lists
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SOURCE = f"deb [signed-by={KEYRING}] {MIRROR} trixie non-free\n"


class PinMismatch(Exception):
    """A download that is not the pinned file."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_pin(path: Path, pin: Pin = PIN) -> None:
    """Refuse ``path`` unless it has the pinned size and SHA256."""
    size = path.stat().st_size
    if size != pin.size:
        raise PinMismatch(f"{path.name}: {size} bytes, the pin says {pin.size} ({pin.filename})")
    got = sha256_of(path)
    if got != pin.sha256:
        raise PinMismatch(f"{path.name}: sha256 {got}, the pin says {pin.sha256} ({pin.filename})")


def apt_config(tmp: Path) -> dict[str, str]:
    """An apt of its own under ``tmp`` whose only source is trixie non-free (the environment to run it with)."""
    for d in ("etc/apt.conf.d", "etc/preferences.d", "etc/sources.list.d", "state/lists/partial",
              "cache/archives/partial", "log"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    (tmp / "etc/sources.list").write_text(SOURCE)
    (tmp / "state/status").write_text("")
    conf = {"Dir::Etc": tmp / "etc", "Dir::Etc::Preferences": tmp / "none",
            "Dir::Etc::PreferencesParts": tmp / "etc/preferences.d", "Dir::State": tmp / "state",
            "Dir::State::status": tmp / "state/status", "Dir::Cache": tmp / "cache", "Dir::Log": tmp / "log",
            "APT::Architecture": "amd64", "Acquire::Languages": "none",
            "APT::Sandbox::User": "root"}  # the download folder is the caller's, not _apt's
    lines = [f'{k} "{v}";' for k, v in conf.items()] + ['APT::Architectures { "amd64"; };']
    (tmp / "apt.conf").write_text("\n".join(lines) + "\n")
    return {**os.environ, "APT_CONFIG": str(tmp / "apt.conf"), "LC_ALL": "C"}


def apt_download(pin: Pin, tmp: Path, log) -> Path:
    """``pin``'s .deb fetched by apt, which checks the chain (InRelease signed by Debian's archive key, the
    Packages hash, the .deb's hash); the signer is logged (gpgv on the InRelease apt kept)."""
    env = apt_config(tmp)
    subprocess.run(["apt-get", "-q", "update"], env=env, check=True, stdout=subprocess.DEVNULL)
    inrelease = next((tmp / "state/lists").glob("*_dists_trixie_InRelease"))
    signed = subprocess.run(["gpgv", "--keyring", KEYRING, str(inrelease)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, check=True).stdout
    log("trixie InRelease: " + "; ".join(line.removeprefix("gpgv: ") for line in signed.splitlines() if "Good signature" in line))
    subprocess.run(["apt-get", "-q", "download", f"{pin.package}={pin.version}"], env=env, cwd=tmp, check=True,
                   stdout=subprocess.DEVNULL)
    return tmp / Path(pin.filename).name


def fetch(cache: Path, log, pin: Pin = PIN, download=apt_download) -> Path:
    """The pinned .deb in ``cache``/nvidia-module, downloaded once; the cached copy is checked again at every use."""
    dest = cache / "nvidia-module" / Path(pin.filename).name
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            got = download(pin, Path(tmp), log)
            check_pin(got, pin)  # before it is cached: a refused file is never kept
            os.replace(got, dest)
        log(f"downloaded {pin.package} {pin.version} ({pin.size} bytes) into {dest}")
    check_pin(dest, pin)
    return dest


def replica_stanza(version: str, package: str = PIN.package) -> dict[str, str]:
    """The fake repository's stanza of ``package`` at driver ``version`` (fakerepo's renumbered Debian stanza)."""
    return next(st for st in fakerepo.renumbered(version) if st["Package"] == package)


def repack_control(real: dict[str, str], replica: dict[str, str]) -> dict[str, str]:
    """The control of the repacked .deb: the replica's fields (name, version, relationships), the real package's
    maintainer, size and description, which says where it came from."""
    desc = real.get("Description", "").split("\n")[0]
    return {**replica, "Maintainer": real["Maintainer"], "Installed-Size": real["Installed-Size"],
            "Description": f"{desc}\n trainvm test-os: Debian's {real['Package']} {real['Version']} (trixie non-free) "
                           f"repacked as {replica['Package']} {replica['Version']}; data and maintainer scripts unchanged"}


def control_text(fields: dict[str, str]) -> str:
    return fakerepo.dump([fields], ("Maintainer", "Installed-Size", "Description")).rstrip("\n") + "\n"


def parse_control(text: str) -> dict[str, str]:
    """A DEBIAN/control file's fields (continuation lines kept, joined with newlines)."""
    out: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and key:
            out[key] += "\n" + line
        elif ":" in line:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def repacked(cache: Path, deb: Path, version: str, log) -> tuple[dict[str, str], Path]:
    """(the replica's stanza, the real .deb repacked under it), cached by the pin and the stanza."""
    stanza = replica_stanza(version)
    key = hashlib.sha256((PIN.sha256 + control_text(stanza)).encode()).hexdigest()[:12]
    out = cache / "nvidia-module" / f"{stanza['Package']}_{stanza['Version']}_amd64-{key}.deb"
    if not out.exists():
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True)
            control = tree / "DEBIAN/control"
            control.write_text(control_text(repack_control(parse_control(control.read_text()), stanza)))
            built = Path(tmp) / "out.deb"
            subprocess.run(["dpkg-deb", "-Zgzip", "-z6", "--root-owner-group", "--build", str(tree), str(built)],
                           check=True, stdout=subprocess.DEVNULL)
            os.replace(built, out)
        log(f"repacked {deb.name} as {stanza['Package']} {stanza['Version']}: {out}")
    return stanza, out



def replica_repository(www: Path, cache: Path, log):  # noqa: ANN201 - (DRIVER, osrepo.Repo)
    """(DRIVER, the replica repository built in ``www`` at DRIVER with the real nvidia-kernel-dkms in place of the
    empty one): what the module lanes serve (make test-os-module, test-vm-boot-module, test-vm-local-module)."""
    import osrepo

    stanza, deb = repacked(cache, fetch(cache, log), DRIVER, log)
    return DRIVER, osrepo.build(www, [DRIVER], log, {(stanza["Package"], stanza["Version"]): deb})
