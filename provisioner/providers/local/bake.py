"""The local cloud's ``Baker`` (providers/bake_base.py): a baked image is a standalone qcow2 file in the local
cloud's folder, ``STATE/images/NAME.qcow2``, with a JSON sidecar ``NAME.json`` carrying the labels every cloud's
baked image carries (the image identity of providers/image_identity.py: kind, stack, lock, script version, base
image, profile), which ``images``, ``find`` and ``images delete`` read.

* Capture: ``qemu-img convert -O qcow2`` of the stopped builder's overlay (the builder is an overlay on the OS base
  file). Convert reads through the backing chain and writes one file that has no backing file: the image no longer
  depends on the base (which the user may replace or delete), and the zero clusters are not written (convert's
  default ``-S 4k``), so the image holds the base's data plus what the install phases wrote. Not ``qemu-img rebase
  -b ""`` of the builder's overlay: that rewrites the builder's disk in place (a rebase interrupted half way leaves
  a disk that is neither), and keeps every cluster the guest ever allocated. The convert writes a temporary file
  first; a failed or interrupted capture removes it and leaves nothing.
* The base's identity (``trainvm-base``): the OS name and the sha256 of the base file's content (the file a
  ``TRAINVM_LOCAL_IMAGE_*`` setting names), since a path says nothing of what is in it: a new download in its place
  is another base, as a new GCE image name is. The digest is kept per (path, size, mtime, inode) in
  ``images/.base-digests.json``, so a base is read once.
* A VM that boots a baked image has an overlay on it (providers/local/request.py ``base_image``): ``delete_image``
  refuses while a VM's overlay is backed by the image (deleting it would break that VM's disk).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner import settings
from provisioner.errors import CloudError, ConflictError, InvalidRequestError, ProviderError
from provisioner.providers.bake_base import BakedImage
from provisioner.providers.base import InstanceRecord
from provisioner.providers.image_identity import KIND_BAKED, LABEL_KIND, ImageIdentity, label_value, mismatch
from provisioner.providers.local import request, vms
from provisioner.providers.local.host import REGION, host_offers
from provisioner.providers.local.request import VmFiles
from provisioner.providers.offer import Offer

if TYPE_CHECKING:
    from provisioner.providers.local.provider import LocalProvider

IMAGES = "images"
DIGESTS = ".base-digests.json"
NAME_RE = re.compile(r"trainvm-[a-z0-9_-]{1,100}")
READY = "READY"
MISSING = "MISSING_DISK"  # a sidecar whose qcow2 is gone: listed (so that it can be deleted), never booted


def image_name(profile_name: str, stack: str, now: float | None = None) -> str:
    """``trainvm-<profile>-<stack>-<UTC time>-<hex>``: unique per bake, a file name and a label value."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(now))
    return f"trainvm-{label_value(profile_name)[:30]}-{stack[:10]}-{stamp}-{secrets.token_hex(2)}"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def base_id(os_name: str, sha256: str) -> str:
    """The base image as the identity names it: the OS and 32 hex of its content's sha256 (a valid label value)."""
    return f"{os_name}-sha256-{sha256[:32]}"


def convert_argv(source: Path | str, target: Path | str) -> list[str]:
    """A standalone qcow2 of ``source`` and its backing chain (no backing file; zero clusters left out)."""
    return ["qemu-img", "convert", "-f", "qcow2", "-O", "qcow2", str(source), str(target)]


class LocalBaker:
    def __init__(self, provider: LocalProvider) -> None:
        self.provider = provider  # the Baker contract: the builder is created, watched and deleted through it
        self.folder = provider.root / IMAGES
        self.builder_shape = host_offers()[0].instance_type  # this machine's one VM (builder_offer)

    def builder_offer(self, gpu_offer: Offer) -> Offer:
        """This machine's VM, as offered (it has no GPU; a bake needs none): no local NVMe, no spot."""
        return dataclasses.replace(gpu_offer, gpu_count=0, local_nvme_max_gib=0, spot_price_hourly=None, flags=())

    # -- the base image's identity --

    def base_image(self, os_name: str, locked: dict[str, str] | None, region: str | None = None) -> str:
        setting = request.base_setting(os_name)
        given = settings.text(setting)
        if not given:
            raise InvalidRequestError(f"no base image for {os_name} on the local cloud: set {setting} to the path of "
                                      "its qcow2 cloud image")
        path = Path(given)
        try:
            st = path.stat()
        except OSError as exc:
            raise InvalidRequestError(f"{setting}={given}: {exc.strerror or exc}") from None
        key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
        cache = self._digests()
        digest = cache.get(key)
        if not isinstance(digest, str):
            digest = file_sha256(path)
            self._keep_digest(cache, key, digest)
        return base_id(os_name, digest)

    def _digests(self) -> dict[str, object]:
        try:
            doc = json.loads((self.folder / DIGESTS).read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def _keep_digest(self, cache: dict[str, object], key: str, digest: str) -> None:
        try:  # best effort: without it the base is read again next time
            self.folder.mkdir(parents=True, exist_ok=True)
            _write_json(self.folder / DIGESTS, {**cache, key: digest})
        except OSError:
            pass

    # -- capture, list, find, delete --

    def capture(self, builder: InstanceRecord, identity: ImageIdentity, profile_name: str,
                regions: tuple[str, ...] = ()) -> BakedImage:  # one machine: nothing to copy
        files = VmFiles(self.provider.root / builder.name)
        vm = vms.load(files)
        if vm is None or not files.disk.is_file():
            raise CloudError(f"the builder {builder.name} is gone; nothing to capture")
        if vms.pid_of(files) is not None:
            raise CloudError(f"the builder {builder.name} still runs; trainvm captures a stopped disk only")
        if shutil.which("qemu-img") is None:
            raise InvalidRequestError("qemu-img is not installed: the local cloud needs it (Debian package qemu-utils)")
        name = image_name(profile_name, identity.stack)
        disk, sidecar = self.folder / f"{name}.qcow2", self.folder / f"{name}.json"
        tmp = self.folder / f".{name}.qcow2.tmp"
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            _run(convert_argv(files.disk, tmp), settings.seconds("TRAINVM_BAKE_TIMEOUT", 5400.0))
            os.replace(tmp, disk)
            _write_json(sidecar, {
                "name": name, "format": "qcow2", "labels": identity.labels(profile_name),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "family": family_for(profile_name), "builder": builder.name, "base_file": vm.text("base"),
                "description": (f"trainvm baked image of profile {profile_name}: stack {identity.stack}, lock sha256 "
                                f"{identity.lock_sha256}, script version {identity.script_version}, built from "
                                f"{identity.base_image}")})
        except BaseException:
            for p in (tmp, disk, sidecar):
                p.unlink(missing_ok=True)
            raise
        image = self._image(sidecar)
        if image is None:
            raise CloudError(f"the baked image {name} could not be read back from {sidecar}")
        return image

    def _sidecars(self) -> Iterator[Path]:
        return iter(sorted(self.folder.glob("trainvm-*.json"))) if self.folder.is_dir() else iter(())

    def _image(self, sidecar: Path) -> BakedImage | None:
        try:
            doc = json.loads(sidecar.read_text())
        except (OSError, ValueError):
            return None
        labels = doc.get("labels") if isinstance(doc, dict) else None
        if not isinstance(labels, dict) or labels.get(LABEL_KIND) != KIND_BAKED:
            return None
        name = sidecar.name.removesuffix(".json")
        disk = sidecar.with_name(f"{name}.qcow2")
        try:
            size: float | None = round(disk.stat().st_blocks * 512 / 2**30, 2)  # what it takes on this disk
        except OSError:
            size = None
        return BakedImage(name=name, cloud="local", ref=str(disk), labels={str(k): str(v) for k, v in labels.items()},
                          created=str(doc.get("created") or ""), size_gib=size, regions=(REGION,),
                          family=str(doc.get("family") or ""), status=READY if size is not None else MISSING)

    def images(self) -> list[BakedImage]:
        return [i for p in self._sidecars() if (i := self._image(p)) is not None]

    def find(self, identity: ImageIdentity) -> BakedImage | None:
        found = [i for i in self.images() if i.status == READY and mismatch(i.labels, identity) is None]
        return max(found, key=lambda i: (i.created, i.name)) if found else None

    def delete_image(self, name: str) -> bool:
        if not NAME_RE.fullmatch(name):
            return False
        sidecar, disk = self.folder / f"{name}.json", self.folder / f"{name}.qcow2"
        if not sidecar.is_file():
            return False
        if self._image(sidecar) is None:
            raise CloudError(f"{sidecar} is not a trainvm baked image (no {LABEL_KIND}={KIND_BAKED} label); not deleting it")
        users = [r.name for r in self.provider.list() if r.image and Path(r.image).resolve() == disk.resolve()]
        if users:
            raise ConflictError(f"the local VM{'s' if len(users) > 1 else ''} {', '.join(users)} boot{'' if len(users) > 1 else 's'} "
                                f"{name} (its disk is an overlay on the image); `trainvm down` {'them' if len(users) > 1 else 'it'} first")
        disk.unlink(missing_ok=True)
        sidecar.unlink()
        return True


def family_for(profile_name: str) -> str:
    return f"trainvm-{label_value(profile_name)}"[:63]


def _write_json(path: Path, doc: dict[str, object]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _run(argv: list[str], timeout: float) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProviderError(f"{argv[0]} failed: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ProviderError(f"{' '.join(argv[:2])} exited {done.returncode}: {why}")
