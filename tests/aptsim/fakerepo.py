"""A fake NVIDIA CUDA repository for debian12, and the apt configuration to resolve against it.

What is real and what is modelled (say so wherever a result depends on it):

- **Real** (tests/fixtures/nvidia-repo/, see its NOTICE): Debian's packaging of the driver, every
  binary of ``src:nvidia-graphics-drivers`` (libcuda1, firmware-nvidia-gsp, libglx-nvidia0, ...)
  and of ``src:nvidia-settings/-modprobe/-persistenced``, with their exact-version dependency graph
  as bookworm ships it, **renumbered** to each driver version under test (``535.309.01-0+deb12u1``
  becomes ``V-1``, ``535.309.01`` becomes ``V``, branch floors ``(>= 535)`` become ``(>= BRANCH)``).
  The Debian packages they need (libc6, dkms, xserver-xorg-core, ...) come from the same snapshot.
- **Modelled** (``modelled()`` below, not NVIDIA's metadata, which this workplace cannot reach):
  NVIDIA's own top-level names ``nvidia-open``, ``cuda-drivers``, ``nvidia-kernel-open-dkms``,
  ``nvidia-driver-cuda``, ``nvidia-driver-pinning-<V>`` (branches >= 580), fabric manager and
  ``cuda-keyring``. They are modelled unkindly: the metapackages depend with ``>=`` (so only the
  pin keeps them at V) and each has a source package of its own (so a pin must find them all).

Every version of the repository is present at once, plus ``NEWER_DRIVER``, so "a newer driver is
also available" holds for every version under test, as it does in NVIDIA's repository.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/nvidia-repo"
NEWER_DRIVER = "610.10.01"  # modelled: a branch newer than any in the facts
KEEP = ("Package", "Source", "Version", "Architecture", "Multi-Arch", "Essential", "Priority", "Section",
        "Provides", "Pre-Depends", "Depends", "Recommends", "Conflicts", "Breaks", "Replaces")
MIN_BRANCH = 525  # the real Debian packaging needs nvidia-legacy-check (>= 495); debian12 repo drivers start later


def parse(text: str) -> list[dict[str, str]]:
    out = []
    for block in re.split(r"\n\s*\n", text):
        st = dict(re.findall(r"^([\w-]+):[ \t]*(.*)$", block, re.M))
        if st.get("Package"):
            out.append(st)
    return out


def dump(stanzas: list[dict[str, str]], extra: tuple[str, ...] = ()) -> str:
    return "".join("".join(f"{k}: {st[k]}\n" for k in KEEP + extra if k in st) + "\n" for st in stanzas)


def _driver_base() -> list[dict[str, str]]:
    return parse((FIXTURES / "debian12-driver.Packages").read_text(encoding="utf-8"))


def archive() -> list[dict[str, str]]:
    """The Debian packages the driver needs (real stanzas, bookworm)."""
    return parse((FIXTURES / "debian12-archive.Packages").read_text(encoding="utf-8"))


def renumbered(version: str) -> list[dict[str, str]]:
    """The real Debian driver stanzas at ``version`` (see the module docstring)."""
    base = _driver_base()
    branch = version.split(".")[0]
    fulls = sorted({st["Version"] for st in base}, key=len, reverse=True)
    ups = sorted({v.split("-")[0] for v in fulls}, key=len, reverse=True)
    base_branch = ups[0].split(".")[0]
    out = []
    for st in base:
        new = {}
        for key, value in st.items():
            for old in fulls:
                value = value.replace(old, f"{version}-1")
            for old in ups:
                value = re.sub(rf"(?<![\d.]){re.escape(old)}(?![\d.])", version, value)
            value = value.replace(f"(>= {base_branch})", f"(>= {branch})")
            new[key] = value
        out.append(new)
    return out


def modelled(version: str) -> list[dict[str, str]]:
    """NVIDIA's own names at ``version`` (modelled; see the module docstring)."""
    v, branch = f"{version}-1", int(version.split(".")[0])
    fm = "nvidia-fabricmanager" if branch >= 580 else f"nvidia-fabricmanager-{branch}"
    stanzas = [
        {"Package": "nvidia-kernel-open-dkms", "Source": "nvidia-open-gpu-kernel-modules", "Version": v,
         "Architecture": "amd64", "Section": "non-free/kernel",
         "Provides": f"nvidia-open-kernel-{version}, nvidia-open-kernel-dkms-any (= {version})",
         "Depends": f"firmware-nvidia-gsp (= {version}) | firmware-nvidia-gsp-{version}, nvidia-kernel-support--v1, dkms (>= 3.0.3-4~)",
         "Conflicts": "nvidia-kernel-dkms"},
        {"Package": "nvidia-driver-cuda", "Source": "nvidia-driver-cuda", "Version": v, "Architecture": "amd64",
         "Depends": f"nvidia-alternative (= {v}), libcuda1 (>= {version}), nvidia-smi (>= {version}), "
                    f"libnvidia-ml1 (>= {version}), nvidia-persistenced (>= {branch}), nvidia-modprobe (>= {branch})"},
        {"Package": "nvidia-open", "Source": "nvidia-open", "Version": v, "Architecture": "amd64",
         "Depends": f"nvidia-kernel-open-dkms (>= {version}), nvidia-driver-cuda (>= {version}), nvidia-driver (>= {version})"},
        {"Package": "cuda-drivers", "Source": "cuda-drivers", "Version": v, "Architecture": "amd64",
         "Depends": f"nvidia-kernel-dkms (>= {version}), nvidia-driver-cuda (>= {version}), nvidia-driver (>= {version})"},
        {"Package": fm, "Source": fm, "Version": v, "Architecture": "amd64", "Depends": "libc6 (>= 2.34)"},
    ]
    if branch >= 580:
        stanzas.append({"Package": f"nvidia-driver-pinning-{version}", "Source": "nvidia-driver-pinning",
                        "Version": v, "Architecture": "all"})
    return stanzas


def keyring() -> dict[str, str]:
    return {"Package": "cuda-keyring", "Version": "1.1-1", "Architecture": "all"}


def nvidia_stanzas(versions: list[str]) -> list[dict[str, str]]:
    out = [keyring()]
    for version in [*versions, NEWER_DRIVER]:
        out += renumbered(version) + modelled(version)
    return out


def _with_files(stanzas: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{**st, "Filename": f"pool/{st['Package']}_{st['Version'].split(':')[-1]}_{st.get('Architecture', 'amd64')}.deb",
             "Size": "1024"} for st in stanzas]


def write_flat_repo(path: Path, stanzas: list[dict[str, str]], origin: str, label: str) -> None:
    """A flat apt repository (``deb URI ./``): Packages and an unsigned Release."""
    path.mkdir(parents=True, exist_ok=True)
    data = dump(_with_files(stanzas), ("Filename", "Size")).encode()
    (path / "Packages").write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    (path / "Release").write_text(f"Origin: {origin}\nLabel: {label}\nArchitectures: amd64 all\n"
                                  f"SHA256:\n {digest} {len(data)} Packages\n")


class AptWorld:
    """An apt of its own (config, sources, lists, dpkg status) under ``tmp``; usable unprivileged.
    ``env`` runs apt-get/apt-cache against it; preferences come from ``root``/etc/apt/preferences.d,
    where the rendered script writes them with TRAINVM_ROOT=root."""

    def __init__(self, tmp: Path, versions: list[str]) -> None:
        self.tmp, self.root = tmp, tmp / "root"
        self.nvidia = nvidia_stanzas(versions)
        write_flat_repo(tmp / "repo/nvidia", self.nvidia, "NVIDIA", "NVIDIA CUDA")
        write_flat_repo(tmp / "repo/debian", archive(), "Debian", "Debian")
        etc = tmp / "etc"
        for d in (etc / "apt.conf.d", etc / "sources.list.d", self.root / "etc/apt/preferences.d",
                  tmp / "state/lists/partial", tmp / "cache/archives/partial", tmp / "log"):
            d.mkdir(parents=True, exist_ok=True)
        (etc / "sources.list").write_text(
            f"deb [trusted=yes] file:{tmp}/repo/debian ./\ndeb [trusted=yes] file:{tmp}/repo/nvidia ./\n")
        (tmp / "state/status").write_text("")
        (self.root / "etc/os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n')
        conf = {
            "Dir::Etc": etc, "Dir::Etc::PreferencesParts": self.root / "etc/apt/preferences.d",
            "Dir::Etc::Preferences": tmp / "none", "Dir::State": tmp / "state", "Dir::State::status": tmp / "state/status",
            "Dir::Cache": tmp / "cache", "Dir::Log": tmp / "log", "Debug::NoLocking": "true",
            "APT::Sandbox::User": "root" if os.geteuid() == 0 else "", "APT::Architecture": "amd64",
            "Acquire::Languages": "none",
        }
        lines = [f'{k} "{v}";' for k, v in conf.items() if v != ""]
        lines.append('APT::Architectures { "amd64"; };')
        (tmp / "apt.conf").write_text("\n".join(lines) + "\n")
        self.env = {**os.environ, "APT_CONFIG": str(tmp / "apt.conf"), "LC_ALL": "C"}
        self.apt("update")

    def apt(self, *args: str, tool: str = "apt-get", check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([tool, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"{tool} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}")
        return proc

    def driver_names(self) -> set[str]:
        """Every package name the fake NVIDIA repository carries (except cuda-keyring)."""
        return {st["Package"] for st in self.nvidia} - {"cuda-keyring"}

    def install_status(self, installs: dict[str, str], hold: set[str] = frozenset()) -> None:
        """Make ``installs`` (name -> version) the installed set of the dpkg status file."""
        index = {(st["Package"], st["Version"]): st for st in self.nvidia + archive()}
        out = []
        for name, version in sorted(installs.items()):
            st = dict(index[(name, version)])
            st["Status"] = ("hold" if name in hold else "install") + " ok installed"
            out.append(st)
        (self.tmp / "state/status").write_text(dump(out, ("Status",)))


def inst_lines(output: str) -> dict[str, str]:
    """``Inst NAME (VERSION ...)`` lines of ``apt-get -s`` output: name -> version."""
    return dict(re.findall(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) ", output, re.M))
