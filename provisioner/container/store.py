"""Where validate/plan find an image's facts without touching the network.

Facts are stored by digest (content-addressed, so they never go stale) under
``$XDG_CACHE_HOME/trainvm/images/<digest>.json``. They get there from ``trainvm lock`` (which calls
``record``) or from ``validate --resolve-image`` / ``plan --resolve-image`` (``TRAINVM_RESOLVE_IMAGES=1``),
which ask the registry: tag -> digest, manifest and config. Without either, the image checks are
skipped with a warning that says how to run them."""

from __future__ import annotations

import ipaddress
import json
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner import settings
from provisioner.cache import cache_dir
from provisioner.container.image import ImageFacts
from provisioner.container.reference import ImageRef, parse_image_ref
from provisioner.errors import ProfileError
from provisioner.messages import Message
from provisioner.wording import duration

if TYPE_CHECKING:
    from collections.abc import Callable

    from provisioner.profile.model import Container

PATH = "stack.container.image"
RESOLVE_ENV = "TRAINVM_RESOLVE_IMAGES"


def store_dir() -> Path:
    return cache_dir() / "images"


def record(facts: ImageFacts) -> None:
    """Keep ``facts`` for offline checks (best effort: an unwritable cache only loses speed)."""
    for digest in {facts.digest, facts.manifest_digest}:
        path = store_dir() / f"{digest.replace(':', '-')}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".image-")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(facts.to_record(), fh, sort_keys=True)
            os.replace(tmp, path)
        except OSError:
            pass


def cached_age(digest: str, now: float | None = None) -> float | None:
    """Seconds since the facts of ``digest`` were stored here (None: not stored)."""
    try:
        written = (store_dir() / f"{digest.replace(':', '-')}.json").stat().st_mtime
    except OSError:
        return None
    return max(0.0, (time.time() if now is None else now) - written)


def lookup(digest: str) -> ImageFacts | None:
    path = store_dir() / f"{digest.replace(':', '-')}.json"
    try:
        if path.stat().st_size > 1_000_000:
            return None
        facts = ImageFacts.from_record(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
    return facts if digest in (facts.digest, facts.manifest_digest) else None


UNREACHABLE = 3  # RegistryError.exit_code of a registry that refused, timed out or answered nonsense (1: no such image)


class RegistryFailure:
    """Why an explicit resolution failed: the message and the exit code of the registry error."""

    def __init__(self, message: str, exit_code: int) -> None:
        self.message, self.exit_code = message, exit_code


# What an explicit --resolve-image got from the registry in this command, by image: the profile is
# checked more than once per command (validate, then the planner's GPU table), the registry asked once.
_asked: dict[str, tuple[ImageFacts | None, tuple[Message, ...], RegistryFailure | None]] = {}


def forget() -> None:
    """Start a command afresh: what the registry said to an earlier command (in-process) is not reused."""
    _asked.clear()


def registry_failure() -> RegistryFailure | None:
    """The failure of an explicit resolution in this command, if one failed (plan maps it to an exit code)."""
    return next((f for _, _, f in _asked.values() if f is not None), None)


def unreachable_messages() -> set[str]:
    """The error texts of the registries this command could not read (validate: such an error alone is exit 3,
    "not checked", not an invalid profile)."""
    return {f.message for _, _, f in _asked.values() if f is not None and f.exit_code == UNREACHABLE}


def _ask_registry(image: str, ref: ImageRef, cached: ImageFacts | None) -> tuple[ImageFacts | None, tuple[Message, ...], RegistryFailure | None]:
    """An explicit --resolve-image: the facts (from the cache when the digest's are known: they cannot
    change) and, for TAG@DIGEST, where the tag points now (that can). A failure is an error, never a
    silent skip."""
    from provisioner.container.registry import RegistryError, registry_client  # lazy: startup

    if cached is not None and not ref.tag:
        return cached, (), None
    client = registry_client()
    try:
        facts = cached or client.resolve(ref)
        if cached is None:
            record(facts)
        moved = client.tag_moved(ref) if ref.digest and ref.tag else None
    except RegistryError as exc:
        age = cached_age(ref.digest) if cached is not None and ref.digest else None
        if exc.exit_code == UNREACHABLE and cached is not None and age is not None:  # the warm cache answers
            return cached, (Message(PATH, f"the registry {ref.registry} could not be read (--resolve-image: {exc}); using the facts "
                                          f"cached {duration(age)} ago for {ref.digest}; whether the tag {ref.tag} still points at it "
                                          f"was not checked", level="warning"),), None
        if exc.exit_code == UNREACHABLE:  # the registry, not the profile: validate and plan exit 3
            text = (f"the registry {ref.registry} could not be read (--resolve-image), so the image was not checked: {exc}; "
                    "this does not make the profile invalid (no facts of this image are cached here)")
        else:
            text = f"could not read the image from its registry {ref.registry} (--resolve-image): {exc}"
        return None, (Message(PATH, text),), RegistryFailure(text, exc.exit_code)
    if moved:
        return facts, (Message(PATH, f"the tag {ref.tag} now points at {moved}, not at the pinned {ref.digest}; the pinned digest is what runs (re-pin to move)", level="warning"),), None
    return facts, (), None


LOOPBACK = "is this workstation's loopback address: a VM cannot pull from it"


def loopback_warning(image: str, ref: ImageRef | None = None) -> Message | None:
    """A warning when the image's registry is a loopback address (127.0.0.0/8, ::1, localhost): it answers
    here, so validate and lock read it, but on the VM that address is the VM itself (``ref``: ``image`` parsed,
    parsed here when not given)."""
    registry = (ref or parse_image_ref(image)).registry
    host = registry[1:registry.index("]")] if registry.startswith("[") and "]" in registry else registry.rsplit(":", 1)[0]
    try:
        loopback = host.lower() == "localhost" or host.lower().endswith(".localhost") or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return None
    return Message(PATH, f"{registry} {LOOPBACK}, so `up` would fail to pull the image; push it to a registry the VM can reach", level="warning")


def image_facts(image: str, ref: ImageRef | None = None) -> tuple[ImageFacts | None, list[Message]]:
    """The facts of ``image`` and what to tell the user; ``ref``: ``image`` as the profile's record parsed it
    (``LoadedProfile.resolved.image``), parsed here once when not given."""
    ref = ref or parse_image_ref(image)
    facts, out = _image_facts(image, ref)
    near = loopback_warning(image, ref)
    return facts, ([near] if near else []) + out


def _image_facts(image: str, ref: ImageRef) -> tuple[ImageFacts | None, list[Message]]:
    """The facts of ``image`` (stored, or resolved when TRAINVM_RESOLVE_IMAGES=1) and what to tell the user.
    Asked explicitly, a registry that cannot be read is an error (located at the image line)."""
    cached = lookup(ref.digest) if ref.digest else None
    if settings.text(RESOLVE_ENV) == "1":
        if image not in _asked:
            _asked[image] = _ask_registry(image, ref, cached)
        facts, said, failure = _asked[image]
        if failure is not None:
            return None, list(said)
        out = list(said)
    else:
        facts, out = cached, []
    if not ref.digest:
        hint = f"; it resolves to {facts.digest} now: pin {facts.image}" if facts else " (run `trainvm validate --resolve-image` or `trainvm lock` to resolve it)"
        out.append(Message(PATH, f"{image} is a tag without a digest: what it points at can change, so `up` refuses it{hint}", level="warning"))
    elif facts is None:
        out.append(Message(PATH, "the image's facts (CUDA, cuDNN, framework, arch list, size) are not known offline; driver, GPU and disk checks against the image were skipped (run `trainvm validate --resolve-image` or `trainvm lock`)", level="warning"))
    return facts, out


def require_pinned_image(container: Container | None, image: ImageRef | None,
                         where: Callable[[tuple[str | int, ...]], tuple[str | None, int | None]]) -> None:
    """``up`` runs only images pinned by digest (validate only warns): a tag can move between two VMs. ``container``:
    the profile's ``stack.container``, ``image``: its reference as the record parsed it (``Resolved.image``),
    ``where``: where a field was written (``LoadedProfile.where``), for the error."""
    if container is None or image is None or image.digest:
        return
    file, line = where(("stack", "container", "image"))  # from the first read of the YAML
    raise ProfileError([Message(PATH, f"{container.image} has no digest; `up` runs only images pinned as REPO:TAG@sha256:DIGEST (run `trainvm validate --resolve-image` or `trainvm lock` to get it)", file=file, line=line)])
