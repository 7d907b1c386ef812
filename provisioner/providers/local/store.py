"""The local cloud's payload store (the providers/store.py contract): a content-addressed folder on this machine,
``STATE/store/payloads/SHA256.tar.gz``; a VM reads the objects its record names through its endpoint
(providers/local/endpoint.py). Nothing expires on its own: ``down`` releases what no other VM uses."""

from __future__ import annotations

import os
from pathlib import Path

from provisioner.errors import ProviderError
from provisioner.providers.store import PAYLOAD_PREFIX, PayloadRef, payload_key

URL = "http://10.0.2.100/{key}"


class LocalStore:
    def __init__(self, root: Path) -> None:
        self.folder = root / "store"

    def stage(self, region: str, data: bytes, sha256: str) -> PayloadRef:
        key = payload_key(sha256)
        path = self.folder / key
        uploaded = not (path.is_file() and path.stat().st_size == len(data))
        if uploaded:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)  # never a half-written object
        return PayloadRef(cloud="local", region=region, store=str(self.folder), key=key, url=URL.format(key=key),
                          sha256=sha256, size=len(data), access="named in the VM's own record (its endpoint)",
                          uploaded=uploaded)

    def release(self, region: str, sha256: str) -> bool:
        path = self.folder / payload_key(sha256)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:  # the store contract's error: down reports it and goes on
            raise ProviderError(f"could not remove {path}: {exc.strerror or exc}") from exc
        return True

    def stored(self, region: str) -> list[str]:
        folder = self.folder / PAYLOAD_PREFIX
        return sorted(p.name.removesuffix(".tar.gz") for p in folder.glob("*.tar.gz")) if folder.is_dir() else []
