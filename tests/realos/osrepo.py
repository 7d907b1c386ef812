"""The fake NVIDIA CUDA repository of `make test-os` as a real, signed apt repository: empty .debs
with the control data of tests/aptsim/fakerepo.py (what is real and what is modelled is said
there), indexed with dpkg-scanpackages, signed with a throwaway GPG key that cuda-keyring carries,
served over HTTPS on 127.0.0.1:443 with a trustme CA."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import fakerepo

REPO_PATH = "compute/cuda/repos/debian12/x86_64"
LIST_LINE = ("deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
             "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /\n")


@dataclass
class Repo:
    names: set[str]  # every package name of the repository but cuda-keyring
    keyring_sha256: str


def _deb(out: Path, control: dict[str, str], files: dict[str, bytes] | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp)
        (pkg / "DEBIAN").mkdir()
        fields = {**control, "Maintainer": "trainvm test-os <test-os@invalid>",
                  "Description": "trainvm test-os fake of an NVIDIA repository package"}
        (pkg / "DEBIAN/control").write_text(fakerepo.dump([fields], ("Maintainer", "Description")).rstrip("\n") + "\n")
        for rel, data in (files or {}).items():
            (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
            (pkg / rel).write_bytes(data)
        subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "--build", str(pkg), str(out)], check=True,
                       stdout=subprocess.DEVNULL)


def build(www: Path, versions: list[str], log, real: dict[tuple[str, str], Path] | None = None) -> Repo:
    """The repository for ``versions`` (and fakerepo.NEWER_DRIVER): an empty .deb per stanza, except the (name,
    version) pairs of ``real``, which are that .deb file (nvidia_module.py: NVIDIA's real module source repacked
    under the stanza; dpkg-scanpackages indexes its own control)."""
    root = www / REPO_PATH
    root.mkdir(parents=True)
    stanzas = [st for st in fakerepo.nvidia_stanzas(versions) if st["Package"] != "cuda-keyring"]
    log(f"fake NVIDIA repository: {len(stanzas)} packages ({', '.join(versions)} and {fakerepo.NEWER_DRIVER})")
    real = real or {}
    unknown = set(real) - {(st["Package"], st["Version"]) for st in stanzas}
    if unknown:
        raise ValueError(f"not in the fake repository: {sorted(unknown)}")
    for st in stanzas:
        out = root / f"{st['Package']}_{st['Version']}_{st.get('Architecture', 'amd64')}.deb"
        if (st["Package"], st["Version"]) in real:
            shutil.copy(real[st["Package"], st["Version"]], out)
            log(f"fake NVIDIA repository: {out.name} is {real[st['Package'], st['Version']].name} (real content)")
        else:
            _deb(out, st)
    gnupg = www.parent / "gnupg"
    gnupg.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(gnupg)}
    try:
        subprocess.run(["gpg", "--batch", "--quiet", "--passphrase", "", "--quick-gen-key", "trainvm test-os repository",
                        "rsa3072", "sign", "never"], check=True, env=env, stderr=subprocess.DEVNULL)
        key = subprocess.run(["gpg", "--batch", "--export"], check=True, env=env, stdout=subprocess.PIPE).stdout
        keyring = root / "cuda-keyring_1.1-1_all.deb"
        _deb(keyring, fakerepo.keyring(), {"usr/share/keyrings/cuda-archive-keyring.gpg": key,
                                           "etc/apt/sources.list.d/cuda-debian12-x86_64.list": LIST_LINE.encode()})
        packages = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=root, check=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
        (root / "Packages").write_bytes(packages)
        sha = hashlib.sha256(packages).hexdigest()
        (root / "Release").write_text("Origin: NVIDIA\nLabel: NVIDIA CUDA\nArchitecture: x86_64\n"
                                      "Date: Sat, 01 Nov 2026 00:00:00 UTC\nAcquire-By-Hash: no\n"
                                      f"SHA256:\n {sha} {len(packages)} Packages\n")
        subprocess.run(["gpg", "--batch", "--yes", "--clearsign", "-o", str(root / "InRelease"), str(root / "Release")],
                       check=True, env=env, stderr=subprocess.DEVNULL)
    finally:  # the gpg-agent gpg started for this throwaway home would outlive the run
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = www / "trainvm-data"
    data.mkdir()
    (data / "sample.bin").write_bytes(os.urandom(1 << 20))
    return Repo({st["Package"] for st in stanzas}, hashlib.sha256(keyring.read_bytes()).hexdigest())


class _Server:
    def __init__(self, www: Path, tls: Path, ca=None, host: str = "127.0.0.1") -> None:  # noqa: ANN001 - a trustme.CA
        import trustme

        ca = ca or trustme.CA()
        self.ca_pem = ca.cert_pem.bytes()
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("developer.download.nvidia.com").configure_cert(ctx)
        handler = lambda *a, **kw: _Quiet(*a, directory=str(www), **kw)  # noqa: E731
        self.httpd = http.server.ThreadingHTTPServer((host, 443), handler)
        self.seen: list[str] = []  # every path asked for (the bake scenario counts what a baked boot downloads)
        self.httpd.seen = self.seen  # type: ignore[attr-defined]
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)  # handshake in the request thread
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def shutdown(self) -> None:
        self.httpd.shutdown()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def send_head(self):  # noqa: ANN201 - http.server's; GET and HEAD both come here
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        return super().send_head()

    def log_message(self, *args) -> None:  # noqa: D401 - the run log is the script's
        pass


def serve(www: Path, tls: Path, ca=None, host: str = "127.0.0.1") -> _Server:  # noqa: ANN001 - a trustme.CA
    """The repository on ``host``:443 (``ca``: a lane's own CA, kept across runs; else a new one)."""
    return _Server(www, tls, ca, host)
