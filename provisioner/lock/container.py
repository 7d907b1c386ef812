"""``trainvm lock`` for a container profile: the lock of a container stack is its digest.

The image is resolved through the registry (tag -> digest, manifest, config; no layers), its facts
are kept by digest (``store.record``) so validate/plan/verify check the image offline, and the
digest to pin is printed. Once the profile pins the digest, NAME.lock is written with the image's facts
(``container``), the driver's exact apt versions and the OS images (no Python closure: the image is
the closure). A profile without a digest is not rewritten: the command names the exact value to put
in ``stack.container.image`` and exits 1 until it is there."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from provisioner import __version__
from provisioner.compat.facts import load_facts
from provisioner.container.reference import parse_image_ref
from provisioner.container.registry import ImageNotFoundError, RegistryError, registry_client
from provisioner.container.store import lookup, record
from provisioner.lock import lock_path_for
from provisioner.lock.driver import locked_driver
from provisioner.lock.images import resolve_images
from provisioner.lock.model import LOCK_VERSION, LockFile, LockTarget, dumps, inputs_sha256
from provisioner.lock.sources import sources_inputs
from provisioner.lock.target import glibc_of
from provisioner.output import emit_json, escape, notice, stderr_console, stdout_console

if TYPE_CHECKING:
    from provisioner.container.image import ImageFacts
    from provisioner.profile import LoadedProfile


def lock_container(loaded: LoadedProfile, *, json_out: bool) -> int:
    container = loaded.profile.stack.container
    assert container is not None, "commands/lock.py locks a container profile here"
    image = container.image
    ref = parse_image_ref(image)
    client = registry_client()
    notes: list[str] = []
    try:
        facts = client.resolve(ref)
        record(facts)
    except RegistryError as exc:
        # a pinned digest's facts cannot change: when the registry cannot answer, the cached ones are the
        # image's (a digest the registry says it does not have, or a bare tag, still fails)
        cached = lookup(ref.digest) if ref.digest and not isinstance(exc, ImageNotFoundError) else None
        if cached is None:
            raise
        facts = cached
        notes.append(f"the registry could not be read ({exc}); using the facts cached for {ref.digest} "
                     "(content-addressed, so still the image's); whether the tag moved was not checked")
    moved = None
    if ref.digest and ref.tag and not notes:
        try:
            moved = client.tag_moved(ref)
        except RegistryError as exc:
            notes.append(f"whether the tag {ref.tag} moved was not checked: {exc}")
    pinned = bool(ref.digest)
    written = write_container_lock(loaded, facts) if pinned else None
    doc = {"profile": str(loaded.path), "image": image, "resolved": facts.image, "pinned": pinned, "tag_moved_to": moved,
           "facts": facts.to_record(), "lock": str(written) if written else None, "notes": notes}
    if json_out:
        emit_json(doc)
        return 0 if pinned else 1
    out, err = stdout_console(), stderr_console()
    env = facts.env
    fw = facts.framework
    out.print(escape(f"{image}: {facts.image} (linux/amd64 manifest {facts.manifest_digest}), {facts.compressed_size / 1e9:.2f} GB compressed; "
                     f"CUDA {env.get('CUDA_VERSION', '?')}, cuDNN {env.get('CUDNN_VERSION', '?')}, NCCL {env.get('NCCL_VERSION', '?')}"
                     + (f", {fw[0]} {fw[1]}" if fw else "") + (f", arch list {env['TORCH_CUDA_ARCH_LIST']}" if env.get("TORCH_CUDA_ARCH_LIST") else "")),
              highlight=False)
    for note in notes:
        notice("note", escape(note))
    if moved:
        err.print(escape(f"warning: the tag {ref.tag} now points at {moved}; the profile keeps the pinned {ref.digest} (set it to move)"))
    if not pinned:
        err.print(escape(f"error: pin the image: set stack.container.image to {facts.image}"))
        return 1
    out.print(escape(f"wrote {written}"), highlight=False)
    return 0


def write_container_lock(loaded: LoadedProfile, facts: ImageFacts) -> Path:
    """NAME.lock of a pinned container profile: the image's facts, the driver, the OS images."""

    stack = loaded.profile.stack
    lock = LockFile(
        lock_version=LOCK_VERSION, generated_by=f"trainvm {__version__}",
        inputs_sha256=inputs_sha256(loaded.profile, sources_inputs(loaded.sources)),
        target=LockTarget(python="", python_platform="", os=stack.os, glibc=glibc_of(stack.os)),
        indexes={}, uv_version="", driver=locked_driver(stack.driver, load_facts().os_images[stack.os].nvidia_repo),
        images=resolve_images(stack.os), packages=(), container=facts.to_record())
    path = lock_path_for(loaded.path)
    path.write_text(dumps(lock), encoding="utf-8")
    return path
