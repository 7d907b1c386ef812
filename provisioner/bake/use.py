"""``up`` boots a matching baked image (docs/bake.md): per offer, the cloud's ``Baker.find`` with the identity the
profile would bake on that offer; found, the VM boots that image and its payload is rendered in ``baked`` mode
(verify only); not found, the normal install, and ``up`` says why. Cloud-neutral: a cloud takes part when the
cloud has a ``baker`` hook (provisioner/hooks/) and its provider boots ``LaunchSpec.boot_image``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from provisioner.bake.exact import exact_reason
from provisioner.bake.run import baker_for
from provisioner.errors import TrainvmError
from provisioner.hooks import bakers
from provisioner.providers.image_identity import (
    LABEL_PROFILE,
    SCRIPT_VERSION,
    ImageIdentity,
    doc_hash,
    label_value,
    mismatch,
)
from provisioner.provision.launch import locked_images

if TYPE_CHECKING:
    from provisioner.catalog.models import Offer
    from provisioner.profile import LoadedProfile
    from provisioner.providers.bake_base import BakedImage
    from provisioner.providers.base import Provider
    from provisioner.providers.offer import Shape


@dataclass(frozen=True)
class BakedChoice:
    """What ``up`` does about a baked image on one offer: boot ``image``, or the normal install because of ``reason``."""

    cloud: str
    image: BakedImage | None = None
    reason: str | None = None  # why no baked image is used (None when one is)

    @property
    def image_mode(self) -> str:
        return "baked" if self.image is not None else ""

    def to_json(self) -> dict[str, object]:
        img = self.image
        return {"cloud": self.cloud, "used": img is not None, "name": img.name if img else None,
                "ref": img.ref if img else None, "reason": self.reason}

    def line(self) -> str:
        if self.image is not None:
            return (f"baked image {self.image.name}: the VM boots it and its startup script only verifies "
                    f"(GPU gate, stack check) and stages data")
        return f"baked image not used: {self.reason}; the startup script installs the stack"


def offer_stack(loaded: LoadedProfile, offer: Offer | Shape) -> tuple[str, str]:
    """(stack hash, lock sha256) the profile's install phases have on ``offer``: pure and offline, from the record's
    install phases alone (render/context.py ``stack_fields``): nothing is rendered."""
    from provisioner.render.context import stack_fields, target_from_offer  # lazy: startup
    from provisioner.render.script import rehearsal_for  # lazy: startup

    # on a cloud without a GPU (a rehearsal) the install phases are the profile's GPU's, as render_for_offer renders
    doc = stack_fields(loaded, target_from_offer(offer, rehearsal_for(loaded, offer.cloud)))
    return doc_hash(doc), str(doc["lock_sha256"])


def in_region(choice: BakedChoice, region: str) -> BakedChoice:
    """``choice`` for an offer in ``region``: where each region holds its own copy (``BakedImage.region_refs``, AWS:
    one AMI id per region) the VM boots that region's copy, and a region without one installs as usual."""
    image = choice.image
    if image is None or not image.region_refs:
        return choice
    refs = dict(image.region_refs)
    if region not in refs:
        return BakedChoice(choice.cloud, reason=f"{image.name} has no copy in {region} (it is in {', '.join(sorted(refs))}; "
                                                f"bake with {region} in the failover order)")
    return BakedChoice(choice.cloud, image=dataclasses.replace(image, ref=refs[region]))


class BakedImages:
    """``up``'s lookup of baked images, once per (cloud, stack): ``choose(offer)`` for each offer it tries."""

    def __init__(self, loaded: LoadedProfile, providers: Mapping[str, Provider]) -> None:
        self.loaded = loaded
        self.providers = providers
        self._seen: dict[tuple[str, str], BakedChoice] = {}
        self._base: dict[str, str] = {}
        self._not_exact = exact_reason(loaded)
        #: what ``choose`` said per offer (its cloud, region, zone and shape): ``up`` asks for the first offer twice
        #: (its summary, then the attempt), and an offer's stack is computed once (``offer_stack``)
        self._chosen: dict[tuple[str, str, str, str], BakedChoice | None] = {}

    def choose(self, offer: Offer | Shape) -> BakedChoice | None:
        """None: ``offer``'s cloud cannot bake (nothing to say); else the image to boot or why not. Only the machine is
        read (``up`` passes its candidates' ``Shape``)."""
        where = (offer.cloud, offer.region, offer.zone or "", offer.instance_type)
        if where not in self._chosen:
            self._chosen[where] = self._choose(offer)
        return self._chosen[where]

    def _choose(self, offer: Offer | Shape) -> BakedChoice | None:
        cloud = offer.cloud
        if cloud not in bakers() or cloud not in self.providers:
            return None
        if self._not_exact is not None:
            return BakedChoice(cloud, reason=f"a baked image must be exact, and {self._not_exact}")
        stack, lock = offer_stack(self.loaded, offer)
        key = (cloud, stack)
        if key not in self._seen:
            self._seen[key] = self._find(cloud, stack, lock)
        return in_region(self._seen[key], offer.region)

    def identity(self, cloud: str, stack: str, lock: str) -> ImageIdentity:
        """The ImageIdentity a bake of this stack on ``cloud`` has now (the OS image: the lock's pin, else the
        family's current one, asked once per cloud); raises TrainvmError/ValueError when it cannot be known."""
        if cloud not in self._base:
            baker = baker_for(cloud, self.providers[cloud])
            self._base[cloud] = baker.base_image(self.loaded.profile.stack.os, locked_images(self.loaded).get(cloud))
        return ImageIdentity(stack=stack, lock_sha256=lock, script_version=SCRIPT_VERSION, base_image=self._base[cloud])

    def _find(self, cloud: str, stack: str, lock: str) -> BakedChoice:
        try:
            baker = baker_for(cloud, self.providers[cloud])
            want = self.identity(cloud, stack, lock)
            found = baker.find(want)
            if found is not None:
                return BakedChoice(cloud, image=found)
            mine = label_value(self.loaded.profile.name)
            near = sorted((i for i in baker.images() if i.labels.get(LABEL_PROFILE) == mine),
                          key=lambda i: (i.created, i.name), reverse=True)
        except (TrainvmError, ValueError) as exc:
            return BakedChoice(cloud, reason=f"could not look for one on {cloud} ({exc})")
        if near:
            return BakedChoice(cloud, reason=f"{near[0].name} is not this stack: {mismatch(near[0].labels, want)}")
        return BakedChoice(cloud, reason=f"no baked image for this stack on {cloud} (`trainvm bake` makes one)")
