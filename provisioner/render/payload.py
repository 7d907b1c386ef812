"""The provisioning payload: everything a VM runs, as one deterministic tar.gz addressed by its sha256.

User data carries only the bootstrap (render/bootstrap.py); the payload is staged in the cloud's own
object store (providers/store.py) and fetched by the VM with its own identity. Its size does not matter to
any cloud limit, so nothing in it is minified, spilled or left out to save bytes.

Layout (``files``):

    startup.sh        the provisioning script (the phases, the embedded helper files), run by the bootstrap
                      and installed as /usr/local/sbin/trainvm-provision
    agent/...         the agent (provisioner/agent: the one probe and comparison, with the pure-Python
                      ``packaging`` it needs), run as ``PYTHONPATH=agent python3 -m provisioner.agent``
    manifest.json     the sha256 of every other file, the profile and its hash, the machine it is for

The archive is reproducible: the same files give the same bytes (sorted names, mtime 0, root-owned, fixed
modes, gzip without a timestamp), so the same profile on the same shape stages the same object once.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from provisioner.agent.bundle import bundle_files
from provisioner.cache import cached_bytes

SCHEMA = "trainvm.payload/1"
_EXECUTABLE = frozenset({"startup.sh"})
#: compressed payloads kept in the parsed-data cache (~200 KB each); the oldest go first
PAYLOADS_CACHED = 32


@dataclass(frozen=True)
class Payload:
    """One payload: its files (path -> bytes), the archive and the archive's sha256."""

    files: Mapping[str, bytes]
    data: bytes = field(repr=False)
    sha256: str

    @property
    def size(self) -> int:
        return len(self.data)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest(files: Mapping[str, bytes], meta: Mapping[str, str]) -> bytes:
    doc = {"schema": SCHEMA, **meta, "files": {name: _sha(data) for name, data in sorted(files.items())}}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def archive(files: Mapping[str, bytes]) -> bytes:
    """A reproducible tar.gz of ``files`` (ustar, sorted, mtime 0, uid/gid 0, 0644 or 0755, gzip mtime 0)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for name in sorted(files):
            parts = name.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(info)
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            info.mode = 0o755 if name in _EXECUTABLE else 0o644
            tar.addfile(info, io.BytesIO(data))
    plain = raw.getvalue()

    # gzip -9 of the payload costs ~50 ms (`plan --json`, each offer `up` tries); the same tar (and zlib) gives the
    # same bytes, so the result is cached by them (at most PAYLOADS_CACHED, ~200 KB each)
    return cached_bytes("payload-gz", [plain, zlib.ZLIB_RUNTIME_VERSION.encode()],
                        lambda: gzip.compress(plain, compresslevel=9, mtime=0), keep=PAYLOADS_CACHED)


def build_payload(startup_sh: str, meta: Mapping[str, str], extra: Mapping[str, bytes] | None = None) -> Payload:
    """The payload of ``startup_sh`` plus the agent and ``extra`` files, with its manifest."""
    files: dict[str, bytes] = {"startup.sh": startup_sh.encode("utf-8")}
    files.update({f"agent/{name}": data for name, data in agent_files().items()})
    files.update(extra or {})
    files["manifest.json"] = manifest(files, meta)
    data = archive(files)
    return Payload(files=files, data=data, sha256=_sha(data))


def agent_files() -> dict[str, bytes]:
    """The agent's files (provisioner/agent), relative to the folder the VM puts on PYTHONPATH."""
    return bundle_files()


def unpack(data: bytes) -> dict[str, bytes]:
    """The files of a payload archive (for ``render --out`` and tests)."""
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                fh = tar.extractfile(member)
                if fh is not None:
                    out[member.name] = fh.read()
    return out
