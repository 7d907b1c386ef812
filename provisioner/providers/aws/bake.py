"""AWS's ``Baker`` (providers/bake_base.py): a baked image is an AMI made by ``CreateImage`` from the stopped builder
(``NoReboot`` false), then ``CopyImage``'d to every other AWS region of the profile's failover order. One bake is one
AMI *name* (``trainvm-<profile>-<stack>-<UTC time>-<hex>``), the same in every region; each region holds its own AMI
id and its own EBS snapshots (``BakedImage.region_refs``).

* Tags: the image identity (provisioner/providers/image_identity.py; AWS tag values take 256 characters, the GCE-safe encoding
  is kept so that one dict works on every cloud) plus ``Name``, on each AMI **and** each of its snapshots, in every
  region. ``CopyImage`` does not copy user tags unless ``CopyImageTags`` is set ("Default: Your user-defined AMI tags
  are not copied", EC2 API reference, CopyImage), and never tags the copy's snapshots; trainvm tags every copy and its
  snapshots itself with ``CreateTags`` (one code path for the source and the copies; the snapshots' ids are known
  once the AMI is ``available``).
* Waits: ``DescribeImages`` through ``providers/poll.py`` (tenacity) until ``available`` (``failed``/``error``: an
  error naming EC2's ``StateReason``), bounded by ``TRAINVM_BAKE_TIMEOUT``.
* Cleanup: a capture that fails or is interrupted (Ctrl-C, SIGTERM) deregisters every AMI it made so far and deletes
  their snapshots, in every region. ``delete_image`` does the same for a finished bake. A deregistered AMI leaves its
  snapshots (and their bill) behind unless they are deleted: ``DeregisterImage`` then ``DeleteSnapshot`` of each
  snapshot of the AMI (its block device mappings, and any snapshot whose description names the AMI id: EC2 describes
  CreateImage's snapshots as "Created by CreateImage(i-...) for ami-..." and CopyImage's as "Copied for
  DestinationAmi ami-...").

The builder shape is ``m6i.large`` (2 vCPUs, 8 GiB, on-demand 0.096 USD/h in us-east-1, aws.amazon.com/ec2/pricing/
on-demand): a Nitro x86_64 shape offered in every region and AZ of the GPU shapes, so the image carries the same ENA and
NVMe drivers the GPU instances boot with; not burstable (a t3's CPU credits run out in a long DKMS/uv build, then it
crawls or bills surplus credits). No GPU is needed: DKMS builds the NVIDIA module for the image's kernel without one.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import time
from functools import partial
from typing import cast

from provisioner import settings
from provisioner.errors import CloudError
from provisioner.providers.aws.clients import Ec2Image
from provisioner.providers.aws.params import Filter, Tag
from provisioner.providers.aws.provider import AwsProvider
from provisioner.providers.bake_base import BakedImage
from provisioner.providers.base import InstanceRecord
from provisioner.providers.image_identity import (
    KIND_BAKED,
    LABEL_KIND,
    LABEL_STACK,
    ImageIdentity,
    label_value,
    mismatch,
)
from provisioner.providers.offer import Offer
from provisioner.providers.poll import poll

BUILDER_SHAPE = "m6i.large"
BUILDER_PRICE_US_EAST_1 = 0.096  # USD/h on-demand, Linux (aws.amazon.com/ec2/pricing/on-demand, 2026-11)
READY, BROKEN = "available", ("failed", "error", "invalid", "deregistered")


def image_name(profile_name: str, stack: str) -> str:
    """The AMI name of a bake (3-128 characters of letters, digits and ``()[] ./-'@_``), unique per bake."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    return f"trainvm-{label_value(profile_name)[:60]}-{stack[:10]}-{stamp}-{secrets.token_hex(2)}"


class Image(Ec2Image, total=False):
    """The fields of EC2's ``Image`` (DescribeImages) that trainvm reads (aws/clients.py ``Ec2Image``), and
    ``_region``: where it was found."""

    _region: str


def _tags(image: Image) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in image.get("Tags") or []}


class AwsBaker:
    builder_shape = BUILDER_SHAPE

    def __init__(self, provider: AwsProvider) -> None:
        self.provider = provider  # the Baker contract: the builder is created, watched and deleted through it
        self.api, self.resources, self.instances = provider.api, provider.resources, provider.instances

    # ------------------------------------------------------------------ the builder
    def builder_offer(self, gpu_offer: Offer) -> Offer:
        return dataclasses.replace(gpu_offer, instance_type=BUILDER_SHAPE, family="m6i", gpu_count=0, vcpus=2,
                                   memory_gib=8, local_nvme_max_gib=0, spot_price_hourly=None, arch="x86_64",
                                   price_hourly=BUILDER_PRICE_US_EAST_1, flags=())

    def base_image(self, os_name: str, locked: dict[str, str] | None, region: str | None = None) -> str:
        """The *name* of the AMI a builder in ``region`` boots (the provider's choice: the lock's pin in the region it
        was pinned in, else the OS's SSM parameter there now). AMI ids differ per region, names do not: the identity
        holds the name so that a copy in another region has the same identity."""
        p = self.api
        pin = locked or {}
        where = region or pin.get("region") or p.regions()[0]
        image_id = pin["ami"] if pin.get("ami") and pin.get("region") == where else self.resources.resolve_ami(where, os_name).image_id
        got = p.call(lambda: p.ec2(where).describe_images(ImageIds=[image_id]), missing=None)
        found = (got or {}).get("Images") or []
        return str(found[0].get("Name") or image_id) if found else image_id

    # ------------------------------------------------------------------ capture
    def capture(self, builder: InstanceRecord, identity: ImageIdentity, profile_name: str,
                regions: tuple[str, ...] = ()) -> BakedImage:
        p = self.api
        region, iid = builder.region, builder.cloud_id
        if not iid or self.instances.get(region, iid) is None:
            raise CloudError(f"the builder {builder.name} is gone; nothing to capture")
        name = image_name(profile_name, identity.stack)
        tags = [Tag(Key=k, Value=v) for k, v in sorted({**identity.labels(profile_name), "Name": name}.items())]
        description = (f"trainvm baked image of profile {profile_name}: stack {identity.stack}, lock sha256 "
                       f"{identity.lock_sha256}, script version {identity.script_version}, built from {identity.base_image}")
        made: list[tuple[str, str]] = []
        try:
            ec2 = p.ec2(region)
            ami = p.call(lambda: ec2.create_image(InstanceId=iid, Name=name, Description=description, NoReboot=False,
                                                  TagSpecifications=[{"ResourceType": "image", "Tags": tags}]))["ImageId"]
            made.append((region, ami))
            self._tag_snapshots(region, self._until_available(region, ami), tags)
            listed = set(p.regions())  # a copy where `trainvm images` does not look could never be deleted by it
            for dest in [r for r in dict.fromkeys(regions) if r != region and r in listed]:
                copy = p.call(partial(p.ec2(dest).copy_image, SourceImageId=ami, SourceRegion=region, Name=name,
                                      Description=description, ClientToken=f"{name}-{dest}"))["ImageId"]
                made.append((dest, copy))
                p.call(partial(p.ec2(dest).create_tags, Resources=[copy], Tags=tags))
            for dest, copy in made[1:]:
                self._tag_snapshots(dest, self._until_available(dest, copy), tags)
        except BaseException:
            for where, image_id in reversed(made):
                self._forget(where, image_id)
            raise
        baked = self._group(name)
        if baked is None:
            raise CloudError(f"the baked image {name} is not listed after its capture")
        return baked

    def _until_available(self, region: str, image_id: str) -> Image:
        p = self.api
        timeout = settings.seconds("TRAINVM_BAKE_TIMEOUT", 5400.0)

        def fetch() -> Image:
            got = p.call(lambda: p.ec2(region).describe_images(ImageIds=[image_id]), missing=None)
            found = cast("list[Image]", (got or {}).get("Images") or [])
            return found[0] if found else {"State": "deregistered"}

        def timed_out(last: Image | None) -> BaseException:
            return CloudError(f"AMI {image_id} in {region} was still {(last or {}).get('State', '?')} after "
                              f"{timeout:g} s (TRAINVM_BAKE_TIMEOUT)")

        image = poll(fetch, deadline=time.monotonic() + timeout, timed_out=timed_out,
                     ready=lambda i: i.get("State") in (READY, *BROKEN), interval=p.poll_interval)
        if image.get("State") != READY:
            why = (image.get("StateReason") or {}).get("Message") or "EC2 gave no reason"
            raise CloudError(f"AMI {image_id} in {region} is {image.get('State')}: {why}")
        return image

    def _tag_snapshots(self, region: str, image: Image, tags: list[Tag]) -> None:
        snaps = _snapshots_of(image)
        if snaps:
            self.api.call(lambda: self.api.ec2(region).create_tags(Resources=snaps, Tags=tags))

    def _forget(self, region: str, image_id: str) -> None:
        """Deregister ``image_id`` (if it is still registered) and delete every snapshot of it in ``region``."""
        p = self.api
        ec2 = p.ec2(region)
        got = p.call(lambda: ec2.describe_images(ImageIds=[image_id]), missing=None)
        images = cast("list[Image]", (got or {}).get("Images") or [])
        snaps = set(_snapshots_of(images[0])) if images else set()
        if images:
            p.call(lambda: ec2.deregister_image(ImageId=image_id), missing=None)
        named = p.call(lambda: ec2.describe_snapshots(OwnerIds=["self"], Filters=[
            {"Name": "description", "Values": [f"*{image_id}*"]}]))
        mine = re.compile(rf"\b{re.escape(image_id)}\b")  # an old 8-hex id may be part of a 17-hex one
        snaps |= {s["SnapshotId"] for s in named.get("Snapshots") or [] if mine.search(s.get("Description") or "")}
        for snap in sorted(snaps):
            p.call(partial(ec2.delete_snapshot, SnapshotId=snap), missing=None)

    # ------------------------------------------------------------------ images, find, delete
    def _all(self, filters: list[Filter]) -> list[Image]:
        p = self.api

        def one(region: str) -> list[Image]:
            got = p.call(lambda: p.ec2(region).describe_images(Owners=["self"], Filters=filters))
            return [cast(Image, {**i, "_region": region}) for i in got.get("Images") or []]

        return p.each_region(one)

    def _baked(self, copies: list[Image]) -> BakedImage:
        copies = sorted(copies, key=lambda i: (i.get("CreationDate") or "", i["_region"]))
        first = copies[0]
        states = {i["_region"]: i.get("State", "") for i in copies}
        status = READY if all(s == READY for s in states.values()) else ", ".join(
            f"{r}: {s}" for r, s in states.items() if s != READY)
        size = sum(int((m.get("Ebs") or {}).get("VolumeSize") or 0) for m in first.get("BlockDeviceMappings") or [])
        return BakedImage(
            name=first.get("Name") or first["ImageId"], cloud="aws", ref=first["ImageId"], labels=_tags(first),
            created=first.get("CreationDate") or "", size_gib=float(size) if size else None,
            regions=tuple(i["_region"] for i in copies), family="trainvm-" + _tags(first).get("trainvm-profile", ""),
            status=status, region_refs=tuple((i["_region"], i["ImageId"]) for i in copies),
            notes=("size_gib is the root volume's size; EBS snapshots bill for the blocks they store, per region",))

    def _grouped(self, images: list[Image]) -> list[BakedImage]:
        by_name: dict[str, list[Image]] = {}
        for i in images:
            by_name.setdefault(i.get("Name") or i["ImageId"], []).append(i)
        return [self._baked(v) for _, v in sorted(by_name.items())]

    def _group(self, name: str) -> BakedImage | None:
        found = self._grouped(self._all([{"Name": f"tag:{LABEL_KIND}", "Values": [KIND_BAKED]},
                                         {"Name": "name", "Values": [name]}]))
        return found[0] if found else None

    def images(self) -> list[BakedImage]:
        return self._grouped(self._all([{"Name": f"tag:{LABEL_KIND}", "Values": [KIND_BAKED]}]))

    def find(self, identity: ImageIdentity) -> BakedImage | None:
        found = [i for i in self._grouped(self._all([{"Name": f"tag:{LABEL_STACK}", "Values": [identity.stack]}]))
                 if i.status == READY and mismatch(i.labels, identity) is None]
        return max(found, key=lambda i: (i.created, i.name)) if found else None

    def delete_image(self, name: str) -> bool:
        """Every copy of the bake ``name`` (its AMI name, or one of its AMI ids) in every region, with its snapshots."""
        key = "image-id" if name.startswith("ami-") else "name"
        found = self._all([{"Name": key, "Values": [name]}])
        if not found:
            return False
        foreign = [i["ImageId"] for i in found if _tags(i).get(LABEL_KIND) != KIND_BAKED]
        if foreign:
            raise CloudError(f"image {name} is not a trainvm baked image (no {LABEL_KIND}={KIND_BAKED} tag); not deleting it")
        if key == "image-id":  # one id names the whole bake: every region's copy goes
            found = self._all([{"Name": "name", "Values": [str(found[0].get("Name"))]},
                               {"Name": f"tag:{LABEL_KIND}", "Values": [KIND_BAKED]}])
        for image in found:
            self._forget(image["_region"], image["ImageId"])
        return True


def _snapshots_of(image: Image) -> list[str]:
    return [str(m["Ebs"]["SnapshotId"]) for m in image.get("BlockDeviceMappings") or []
            if (m.get("Ebs") or {}).get("SnapshotId")]
