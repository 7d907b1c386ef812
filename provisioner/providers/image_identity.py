"""The identity of a baked image and the decision whether ``up`` may boot it. Pure and offline.

A baked image holds what the install phases of the startup script put on the disk: the driver set (built by
DKMS for the image's kernel), the CUDA toolkit/cuDNN, the uv-managed Python, the venv with every locked
package and the data tools' SDK venvs. It is reusable exactly when all of these are what the profile would
install, so its identity is:

* ``stack``: sha256 of every rendered value the install phases read (``stack_doc``), 32 hex;
* ``lock``: the sha256 of the lock the packages came from (64 hex, split over two labels: GCE label values
  hold at most 63 characters);
* ``script``: ``SCRIPT_VERSION``, bumped whenever the install phases or the bake cleanup change what they
  leave on the disk;
* ``base``: the OS image the builder booted (a GCE image name, an AMI id, an Azure URN), as a label value.

Labels use the strictest rules of the three clouds (GCE: lowercase letters, digits, ``_`` and ``-``, at most
63 characters), so the same dict works as GCE labels, Azure tags and EC2 tags.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: bumped when the install phases or templates/phases/_bake_clean.sh.j2 change what a bake leaves on the disk
SCRIPT_VERSION = 4  # 2: the seal after the finish (status, report, logs, payload) and the random seed go;
# 3: a profile with local NVMe scratch gets mdadm in the image (a baked boot installs nothing to stripe it);
# 4: no kernel headers metapackage (nor the newest kernel's headers it named): only the running kernel's headers

LABEL_STACK = "trainvm-stack"
LABEL_LOCK_A = "trainvm-lock-a"
LABEL_LOCK_B = "trainvm-lock-b"
LABEL_SCRIPT = "trainvm-script"
LABEL_BASE = "trainvm-base"
LABEL_PROFILE = "trainvm-profile"
LABEL_KIND = "trainvm-kind"
KIND_BAKED = "baked-image"

#: the ScriptContext fields the install phases (preflight, driver, cuda, python, packages, data tools) read
STACK_FIELDS = (
    "os_name", "nvidia_repo", "keyring_sha256", "driver", "driver_pkgs", "driver_pkgvers", "modules",
    "fabricmanager_pkg", "kernel_hold", "cuda", "cuda_toolkit", "toolkit_pkg",
    "cudnn_pkg", "cudnn_dev_pkg", "cudnn_prefix", "cudnn_contains", "python", "uv_version", "uv_sha256",
    "packages", "pypi_index", "torch_index", "stack_pyproject", "lock_sha256", "packages_fingerprint",
)

_LABEL_VALUE_RE = re.compile(r"[^a-z0-9_-]")


def label_value(text: str) -> str:
    """``text`` as a label value valid on every cloud: lowercase, other characters as ``_``, at most 63."""
    value = _LABEL_VALUE_RE.sub("_", text.lower())
    if len(value) > 63:  # keep it unique: a prefix and a digest of the whole
        value = value[:46] + "-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return value


def stack_doc(values: Mapping[str, Any]) -> dict[str, Any]:
    """The install-relevant values, JSON-ready, from ScriptContext field names to values (``STACK_FIELDS``,
    ``datatools`` and ``nvme``): a rendered context's (``stack_fields``) or the record's phases' alone
    (provisioner.render.context ``stack_fields``)."""
    doc: dict[str, Any] = {}
    for name in STACK_FIELDS:
        value = values[name]
        doc[name] = list(value) if isinstance(value, tuple) else value
    doc["datatools"] = sorted([t.scheme, t.lock] for t in values["datatools"])
    doc["raid_tools"] = values["nvme"] != "none"  # the bake installs mdadm for the data phase's RAID0 (_bake_clean)
    return doc


def stack_fields(ctx: Any) -> dict[str, Any]:
    """The install-relevant values of a ScriptContext (provisioner.render.context), JSON-ready."""
    return stack_doc({name: getattr(ctx, name) for name in (*STACK_FIELDS, "datatools", "nvme")})


def doc_hash(doc: Mapping[str, Any]) -> str:
    """32 hex of the sha256 of a ``stack_doc`` (canonical JSON): the ``stack`` of an ImageIdentity."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def stack_hash(ctx: Any) -> str:
    """32 hex of the sha256 of ``stack_fields(ctx)`` (canonical JSON)."""
    return doc_hash(stack_fields(ctx))


@dataclass(frozen=True)
class ImageIdentity:
    """What a baked image holds; equal identities mean the image is the profile's installed stack."""

    stack: str  # 32 hex (stack_hash)
    lock_sha256: str  # 64 hex
    script_version: int
    base_image: str  # the OS image the builder booted, as given by the provider (name, AMI id, URN)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[0-9a-f]{32}", self.stack):
            raise ValueError(f"stack hash must be 32 lowercase hex digits, got {self.stack!r}")
        if not re.fullmatch(r"[0-9a-f]{64}", self.lock_sha256):
            raise ValueError(f"lock sha256 must be 64 lowercase hex digits, got {self.lock_sha256!r}")
        if not self.base_image:
            raise ValueError("the base OS image is empty")

    def labels(self, profile_name: str = "") -> dict[str, str]:
        """The labels/tags a baked image carries (``profile_name``: informative, never matched)."""
        labels = {
            LABEL_KIND: KIND_BAKED,
            LABEL_STACK: self.stack,
            LABEL_LOCK_A: self.lock_sha256[:32],
            LABEL_LOCK_B: self.lock_sha256[32:],
            LABEL_SCRIPT: str(self.script_version),
            LABEL_BASE: label_value(self.base_image),
        }
        if profile_name:
            labels[LABEL_PROFILE] = label_value(profile_name)
        return labels


def identity_of(ctx: Any, base_image: str) -> ImageIdentity:
    """The identity a bake of ``ctx`` (a ScriptContext) on ``base_image`` produces."""
    return ImageIdentity(stack=stack_hash(ctx), lock_sha256=ctx.lock_sha256, script_version=SCRIPT_VERSION,
                         base_image=base_image)


def mismatch(labels: Mapping[str, str], want: ImageIdentity) -> str | None:
    """None when an image with ``labels`` is exactly ``want``; else why it must not be used, in words."""
    if labels.get(LABEL_KIND) != KIND_BAKED:
        return "it is not a trainvm baked image"
    expected = want.labels()
    checks = (
        (LABEL_SCRIPT, "it was baked by startup script version {have}, this trainvm bakes version {want}"),
        (LABEL_BASE, "it was built from OS image {have}, the profile now boots {want}"),
    )
    for key, message in checks:
        have = labels.get(key, "")
        if have != expected[key]:
            return message.format(have=have or "(none)", want=expected[key])
    # the lock before the stack: the lock's sha256 is one of the stack's fields, so a new lock changes both
    lock = labels.get(LABEL_LOCK_A, "") + labels.get(LABEL_LOCK_B, "")
    if lock != want.lock_sha256:
        return f"lock sha256 differs: it was baked from {lock[:12] or '(none)'}, the profile's lock is {want.lock_sha256[:12]}"
    have = labels.get(LABEL_STACK, "")
    if have != expected[LABEL_STACK]:
        return (f"its installed stack {have or '(none)'} differs from the profile's {expected[LABEL_STACK]} "
                "(driver, CUDA, Python or packages changed)")
    return None


def identity_from_labels(labels: Mapping[str, str]) -> ImageIdentity | None:
    """The identity recorded in ``labels`` (base image as its label value), or None when they are not a baked image's."""
    try:
        return ImageIdentity(stack=labels[LABEL_STACK], lock_sha256=labels[LABEL_LOCK_A] + labels[LABEL_LOCK_B],
                             script_version=int(labels[LABEL_SCRIPT]), base_image=labels[LABEL_BASE])
    except (KeyError, ValueError):
        return None
