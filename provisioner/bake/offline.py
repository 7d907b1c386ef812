"""``plan``'s answer to "will ``up`` boot a baked image?", offline: the profile's identity on the chosen offer
against the local record of bakes (provisioner/bake/records.py), and the expected time to ready (ready_time.py).
No cloud call: the OS image is the lock's pin (an unpinned one is not compared; ``up`` compares it in the cloud)."""

from __future__ import annotations

from typing import Any

from provisioner.bake import records
from provisioner.bake.ready_time import ready_json, ready_line
from provisioner.bake.use import exact_reason, offer_stack
from provisioner.providers.image_identity import (
    LABEL_BASE,
    LABEL_PROFILE,
    SCRIPT_VERSION,
    ImageIdentity,
    label_value,
    mismatch,
)
from provisioner.providers.registry import bakers
from provisioner.provision.launch import locked_images

SOURCE = "from a local record of bakes; `up` confirms in the cloud"


def plan_baked(loaded: Any, offer: Any) -> dict[str, Any]:
    """``{used, name, reason, source, ready}`` for ``offer`` (``ready``: ready_time.ready_json)."""
    name, reason = _decide(loaded, offer)
    return {"used": name is not None, "name": name, "reason": reason, "source": SOURCE,
            "ready": ready_json(offer.cloud, name is not None)}


def plan_lines(doc: dict[str, Any], cloud: str) -> list[str]:
    first = (f"baked image: {doc['name']} ({doc['source']})" if doc["used"]
             else f"baked image: none: {doc['reason']}")
    return [first, ready_line(cloud, doc["used"])]


def _decide(loaded: Any, offer: Any) -> tuple[str | None, str | None]:
    if offer.cloud not in bakers():
        return None, f"trainvm cannot bake images on {offer.cloud} yet"
    why = exact_reason(loaded)
    if why is not None:
        return None, f"a baked image must be exact, and {why}"
    mine = [r for r in records.load() if r.get("cloud") == offer.cloud]
    if not mine:
        return None, f"no local record of a bake on {offer.cloud} (`trainvm bake` makes one)"
    stack, lock = offer_stack(loaded, offer)
    pinned = (locked_images(loaded).get(offer.cloud) or {}).get("image", "")
    near = []
    for r in sorted(mine, key=lambda r: (str(r.get("created", "")), str(r.get("name", ""))), reverse=True):
        labels = {k: str(v) for k, v in r["labels"].items()}
        base = pinned.rsplit("/", 1)[-1] if pinned else labels.get(LABEL_BASE, "")
        try:
            want = ImageIdentity(stack=stack, lock_sha256=lock, script_version=SCRIPT_VERSION, base_image=base or "-")
        except ValueError as exc:
            return None, str(exc)
        if not pinned:  # not compared here: `up` compares it with the family's current image
            labels = {**labels, LABEL_BASE: label_value(base or "-")}
        if mismatch(labels, want) is None:
            return str(r.get("name")), None
        if labels.get(LABEL_PROFILE) == label_value(loaded.profile.name):
            near.append((r, mismatch(labels, want)))
    if near:
        r, reason = near[0]
        return None, f"{r.get('name')} is not this stack: {reason}"
    return None, f"no local record of a bake of this stack on {offer.cloud} (`trainvm bake` makes one)"
