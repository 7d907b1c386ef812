"""GCE's ``Baker`` (providers/bake_base.py): a baked image is ``images.insert`` from the stopped builder's boot
disk (``sourceDisk``), in the image family ``trainvm-<profile>``, labelled with the image identity
(provisioner/providers/image_identity.py). Calls go through the provider's ``GceApi`` (retries, global operation waits).

The builder shape is ``n1-standard-4`` (4 vCPUs, 15 GB; N1 is offered in the zones of the GPU shapes and takes
every boot disk type trainvm uses): no GPU is needed to build the driver's kernel module with
DKMS, and it boots the same public images (and kernel) as the GPU shapes. Compute Engine creates an image from a
disk attached to a running VM only with ``forceCreate``; trainvm never forces it: the builder is stopped first.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from typing import TYPE_CHECKING

from provisioner.errors import CloudError
from provisioner.providers.bake_base import BakedImage
from provisioner.providers.base import InstanceRecord
from provisioner.providers.gcp.request import fit_name
from provisioner.providers.image_identity import (
    KIND_BAKED,
    LABEL_KIND,
    LABEL_STACK,
    ImageIdentity,
    label_value,
    mismatch,
)
from provisioner.providers.offer import Offer

if TYPE_CHECKING:
    from provisioner.providers.gcp.provider import GcpProvider
    from provisioner.providers.gcp.sdk_types import Image

BUILDER_SHAPE = "n1-standard-4"


def family_for(profile_name: str) -> str:
    """The image family of a profile's baked images: ``trainvm-<profile>`` within GCE's 63 characters."""
    base = "trainvm-" + label_value(profile_name).replace("_", "-").strip("-")
    return fit_name(base.rstrip("-"), "")


class GceBaker:
    builder_shape = BUILDER_SHAPE

    def __init__(self, provider: GcpProvider) -> None:
        self.provider = provider
        self.gce = provider.gce

    def builder_offer(self, gpu_offer: Offer) -> Offer:
        return dataclasses.replace(gpu_offer, instance_type=BUILDER_SHAPE, family="n1", gpu_count=0,
                                   gpu_attach="attachable", local_nvme_max_gib=0, spot_price_hourly=None, flags=())

    def base_image(self, os_name: str, locked: dict[str, str] | None, region: str | None = None) -> str:
        image = (locked or {}).get("image") or self.provider.resolve_image(os_name)
        return image.rsplit("/", 1)[-1]

    def capture(self, builder: InstanceRecord, identity: ImageIdentity, profile_name: str,
                regions: tuple[str, ...] = ()) -> BakedImage:  # a GCE image is global: ``regions`` needs no copy
        api = self.gce.clients()
        zone = builder.zone or ""
        inst = self.gce.get(zone, builder.name)
        if inst is None:
            raise CloudError(f"the builder {builder.name} is gone; nothing to capture")
        boot = next((d for d in inst.disks if d.boot), None)
        if boot is None:
            raise CloudError(f"the builder {builder.name} has no boot disk")
        # unique per bake: the stack, then the UTC time of the capture (a re-bake of a changed stack never collides)
        name = fit_name(f"{family_for(profile_name)}-{identity.stack[:10]}", time.strftime("-%Y%m%d%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2))
        description = (f"trainvm baked image of profile {profile_name}: stack {identity.stack}, lock sha256 "
                       f"{identity.lock_sha256}, script version {identity.script_version}, built from {identity.base_image}")
        body = api.v1.Image(name=name, family=family_for(profile_name), source_disk=boot.source,
                            labels=identity.labels(profile_name), description=description)
        op = self.gce.call(lambda: api.images.insert_unary(project=api.project, image_resource=body, retry=None,
                                                           timeout=self.gce.http_timeout))
        done = self.gce.wait(None, op, self.gce.deadline())
        if done.error and done.error.errors:
            e = done.error.errors[0]
            raise CloudError(f"GCE could not create image {name} from {builder.name}'s disk: {e.code}: {e.message}")
        return self._baked(self.gce.call(lambda: api.images.get(project=api.project, image=name, retry=None,
                                                                timeout=self.gce.http_timeout)))

    def _baked(self, image: Image) -> BakedImage:
        size = int(image.archive_size_bytes or 0)
        return BakedImage(name=image.name, cloud="gcp", ref=f"projects/{self.gce.project}/global/images/{image.name}",
                          labels=dict(image.labels), created=image.creation_timestamp or "",
                          size_gib=round(size / 2**30, 2) if size else None,
                          regions=tuple(image.storage_locations), family=image.family or "", status=image.status or "")

    def _list(self, flt: str) -> list[BakedImage]:
        api = self.gce.clients()
        req = api.v1.ListImagesRequest(project=api.project, filter=flt)
        pager = self.gce.call(lambda: api.images.list(request=req, retry=None, timeout=self.gce.http_timeout))
        return [self._baked(i) for i in pager]

    def images(self) -> list[BakedImage]:
        return self._list(f'labels.{LABEL_KIND} = "{KIND_BAKED}"')

    def find(self, identity: ImageIdentity) -> BakedImage | None:
        found = [i for i in self._list(f'labels.{LABEL_STACK} = "{identity.stack}"')
                 if i.status == "READY" and mismatch(i.labels, identity) is None]
        return max(found, key=lambda i: (i.created, i.name)) if found else None

    def delete_image(self, name: str) -> bool:
        api = self.gce.clients()
        image = self.gce.call(lambda: api.images.get(project=api.project, image=name, retry=None,
                                                     timeout=self.gce.http_timeout), missing=None)
        if image is None:
            return False
        if dict(image.labels).get(LABEL_KIND) != KIND_BAKED:
            raise CloudError(f"image {name} is not a trainvm baked image (no {LABEL_KIND}={KIND_BAKED} label); not deleting it")
        op = self.gce.call(lambda: api.images.delete_unary(project=api.project, image=name, retry=None,
                                                           timeout=self.gce.http_timeout), missing=None)
        if op is None:
            return False
        self.gce.wait(None, op, self.gce.deadline())
        return True
