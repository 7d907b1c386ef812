"""``trainvm images --profile PATH``: the baked images whose identity matches the profile (on any offer of its
plan), and which one ``up`` would boot per cloud and region of the plan (chosen offer, then the failover order), or
why none, in ``up``'s words (provisioner/bake/use.py: the same lookup ``up`` makes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.bake import records
from provisioner.bake.exact import exact_reason
from provisioner.bake.use import BakedImages, in_region, offer_stack
from provisioner.commands.images import image_doc, image_line
from provisioner.errors import TrainvmError
from provisioner.output import emit_json, stdout_console
from provisioner.planner.from_profile import Overrides, make_plan
from provisioner.profile import load_profile
from provisioner.providers.image_identity import mismatch

if TYPE_CHECKING:
    from provisioner.catalog.disks import DiskPrices
    from provisioner.catalog.models import Offer
    from provisioner.planner.core import Plan
    from provisioner.providers.bake_base import BakedImage, Baker
    from provisioner.providers.base import Provider


def _regions(plan: Plan) -> list[Offer]:
    """The first offer of each (cloud, region) in the plan's order: chosen, then failover."""
    seen: dict[tuple[str, str], Offer] = {}
    for offer in (plan.chosen, *plan.failover) if plan.chosen is not None else ():
        seen.setdefault((offer.cloud, offer.region), offer)
    return list(seen.values())


def _matching(chooser: BakedImages, cloud: str, listed: list[BakedImage], offers: list[Offer]) -> list[BakedImage]:
    """The ``listed`` images whose labels match the identity the profile has on one of ``offers`` (its cloud's)."""
    wants = []
    for offer in offers:
        stack, lock = offer_stack(chooser.loaded, offer)
        try:
            wants.append(chooser.identity(cloud, stack, lock))
        except (TrainvmError, ValueError):
            continue  # the boot row says why (could not look)
    if not wants:
        return []
    return [i for i in listed if any(mismatch(i.labels, w) is None for w in wants)]


def run_images_profile(path: str, *, cloud: str | None, json_out: bool, prices: DiskPrices, bakers: dict[str, Baker],
                       providers: dict[str, Provider]) -> int:
    loaded = load_profile(path)
    plan = make_plan(loaded, Overrides((cloud,) if cloud else None, None, None)).plan
    offers = _regions(plan)
    chooser = BakedImages(loaded, {c: p for c, p in providers.items() if c in bakers})
    boot = []
    for offer in offers:
        choice = chooser.choose(offer)
        if choice is None:
            reason = (f"trainvm cannot bake images on {offer.cloud} yet" if offer.cloud not in bakers
                      else f"no credentials for {offer.cloud}")
            boot.append({"cloud": offer.cloud, "region": offer.region, "used": False, "name": None, "ref": None,
                         "reason": reason})
            continue
        doc = in_region(choice, offer.region).to_json()
        boot.append({"cloud": doc.pop("cloud"), "region": offer.region, **doc})
    images = []
    if exact_reason(loaded) is None:
        for c, baker in bakers.items():
            mine = [o for o in offers if o.cloud == c]
            if mine:
                listed = baker.images()
                records.replace_cloud(c, listed)  # the local record of bakes follows the cloud, as `images` does
                images.extend(_matching(chooser, c, listed, mine))
    docs = [image_doc(i, prices) for i in images]
    if json_out:
        emit_json({"profile": loaded.profile.name, "images": docs, "boot": boot,
                   **({} if plan.chosen is not None else {"reason": "the profile has no offer on these clouds"})})
        return 0
    lines = [image_line(d) for d in docs] or [f"no baked image matches profile {loaded.profile.name}"]
    if plan.chosen is None:
        lines.append("the profile has no offer on these clouds: `trainvm plan` says why")
    lines += [f"up boots on {b['cloud']} {b['region']}: {b['name']}" if b["used"]
              else f"up installs on {b['cloud']} {b['region']}: {b['reason']}" for b in boot]
    out = stdout_console()
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0
