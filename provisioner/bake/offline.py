"""``plan``'s answer to "will ``up`` boot a baked image?", offline: the profile's identity on the chosen offer
against the local record of bakes (provisioner/bake/records.py), and the expected time to ready (ready_time.py).
No cloud call: the OS image is the lock's pin (an unpinned one is not compared; ``up`` compares it in the cloud).
Light to import (issue 37): the identity match, the stack hash (which renders the profile's context) and the image
record are imported only when there is a record to compare, so ``plan`` of a profile with nothing to look up never
loads the bake machinery (bake/run.py, the planner it drives, the providers' base)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from provisioner.bake import records
from provisioner.bake.cost import StorageDoc, monthly_cost
from provisioner.bake.exact import exact_reason
from provisioner.bake.ready_time import ReadyDoc, ready_json, ready_line
from provisioner.hooks import bakers

if TYPE_CHECKING:
    from provisioner.bake.records import BakeRecord
    from provisioner.catalog.disks import DiskPrices
    from provisioner.catalog.models import Offer
    from provisioner.profile import LoadedProfile

SOURCE = "from a local record of bakes; `up` confirms in the cloud"


class BakedPlanDoc(TypedDict):
    """``plan_baked``'s document (``plan --json`` baked_image), which ``plan_lines`` reads back."""

    used: bool
    name: str | None
    reason: str | None
    source: str
    ready: ReadyDoc
    storage: NotRequired[StorageDoc]


def plan_baked(loaded: LoadedProfile, offer: Offer, prices: DiskPrices | None = None) -> BakedPlanDoc:
    """``{used, name, reason, source, ready}`` for ``offer`` (``ready``: ready_time.ready_json), and ``storage``
    (cost.monthly_cost) when an image is used and the catalog's disk ``prices`` are given."""
    record, reason = _decide(loaded, offer)
    name = None if record is None else str(record.get("name"))
    doc: BakedPlanDoc = {"used": name is not None, "name": name, "reason": reason, "source": SOURCE,
                           "ready": ready_json(loaded, offer.cloud, name is not None)}
    if record is not None and prices is not None:
        doc["storage"] = _storage(record, prices)
    return doc


def _storage(record: BakeRecord, prices: DiskPrices) -> StorageDoc:
    """What keeping the recorded image costs per month (cost.monthly_cost, from the record's size and copies)."""
    size = record.get("size_gib")
    copies = record.get("copies")
    regions = record.get("regions")
    from provisioner.providers.bake_base import BakedImage  # lazy: startup (only with a recorded image)

    image = BakedImage(name=str(record.get("name")), cloud=str(record.get("cloud")), ref="", labels={},
                       size_gib=float(size) if isinstance(size, int | float) else None,
                       regions=tuple(str(r) for r in regions) if isinstance(regions, list) else (),
                       replicas=copies if isinstance(copies, int) and copies > 0 else None)
    return monthly_cost(image, prices)


def plan_lines(doc: BakedPlanDoc, cloud: str) -> list[str]:
    first = (f"baked image: {doc['name']} ({doc['source']})" if doc["used"]
             else f"baked image: none: {doc['reason']}")
    lines = [first]
    storage = doc.get("storage")
    if storage is not None:
        copies = f"{storage['copies']} cop{'y' if storage['copies'] == 1 else 'ies'}"
        month = f"${storage['monthly']:.2f}/month" if storage["monthly"] is not None else "$/month unknown"
        lines.append(f"baked image storage: {month} ({copies}) until `trainvm images delete {doc['name']}`")
    return [*lines, ready_line(doc["ready"], cloud)]


def _decide(loaded: LoadedProfile, offer: Offer) -> tuple[BakeRecord | None, str | None]:
    if offer.cloud not in bakers():
        return None, f"trainvm cannot bake images on {offer.cloud} yet"
    why = exact_reason(loaded)
    if why is not None:
        return None, f"a baked image must be exact, and {why}"
    mine = [r for r in records.load() if r.get("cloud") == offer.cloud]
    if not mine:
        return None, f"no local record of a bake on {offer.cloud} (`trainvm bake` makes one)"
    return _match(loaded, offer, mine)


def _match(loaded: LoadedProfile, offer: Offer, mine: list[BakeRecord]) -> tuple[BakeRecord | None, str | None]:
    """The newest of ``mine`` (records of ``offer``'s cloud) whose identity is the profile's on ``offer``, else why not."""
    from provisioner.bake.use import offer_stack  # lazy: startup (renders the context: only with a record to compare)
    from provisioner.providers.image_identity import (  # lazy: startup (only with a record to compare)
        LABEL_BASE,
        LABEL_PROFILE,
        SCRIPT_VERSION,
        ImageIdentity,
        label_value,
        mismatch,
    )
    from provisioner.provision.launch import locked_images  # lazy: startup (only with a record to compare)

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
            return r, None
        if labels.get(LABEL_PROFILE) == label_value(loaded.profile.name):
            near.append((r, mismatch(labels, want)))
    if near:
        r, reason = near[0]
        return None, f"{r.get('name')} is not this stack: {reason}"
    return None, f"no local record of a bake of this stack on {offer.cloud} (`trainvm bake` makes one)"
