"""Image references as docker reads them (distribution/reference): ``[REGISTRY/]REPO[:TAG][@sha256:HEX]``.

The first path component is a registry when it contains ``.`` or ``:`` or is ``localhost``;
otherwise the image is on Docker Hub (``registry-1.docker.io``, one-component names under ``library/``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB = "registry-1.docker.io"
DOCKER_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_REGISTRY_RE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class ImageRef:
    registry: str  # host[:port] the API is served on
    repository: str  # path inside the registry (library/ added for Docker Hub)
    tag: str | None
    digest: str | None

    @property
    def pinned(self) -> bool:
        return self.digest is not None

    @property
    def reference(self) -> str:
        """What the manifest endpoint is asked for: the digest when pinned, else the tag."""
        return self.digest or self.tag or "latest"

    def with_digest(self, digest: str) -> ImageRef:
        return ImageRef(self.registry, self.repository, self.tag, digest)

    def __str__(self) -> str:
        text = f"{self.registry}/{self.repository}"
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_image_ref(text: str) -> ImageRef:
    """Parse ``text``; ``ValueError`` with a user-facing message when it is not a reference."""
    if not text or len(text) > 512 or any(c.isspace() for c in text):
        raise ValueError(f"{text!r} is not an image reference")
    rest, digest = text, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not DIGEST_RE.match(digest):
            raise ValueError(f"{text!r}: {digest!r} is not a sha256 digest (sha256: and 64 lower-case hex digits)")
    tag = None
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1:]
        if not _TAG_RE.match(tag):
            raise ValueError(f"{text!r}: {tag!r} is not a valid tag")
    first, sep, remainder = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, remainder
        if not _REGISTRY_RE.match(registry):
            raise ValueError(f"{text!r}: {registry!r} is not a registry host")
    else:
        registry, repository = DOCKER_HUB, rest
    if registry in DOCKER_HUB_ALIASES:
        registry = DOCKER_HUB
        if "/" not in repository:
            repository = f"library/{repository}"
    if not _REPO_RE.match(repository) or len(repository) > 255:
        raise ValueError(f"{text!r}: {repository!r} is not a repository name (lower-case letters, digits and ._-/ separators)")
    return ImageRef(registry, repository, tag, digest)
