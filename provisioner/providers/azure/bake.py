"""Azure's ``Baker`` (providers/bake_base.py): a baked image is an **image version in an Azure Compute Gallery**,
captured from the deallocated, generalized builder VM and replicated to the Azure regions of the profile's failover
order (docs/bake.md, "Azure").

* Gallery: ``trainvm_<region>`` in the resource group ``trainvm-gallery-<region>`` of the builder's region (the
  profile's first Azure region), both created when missing and kept (an empty gallery bills nothing; `down` never
  touches it: its group carries no ``trainvm-managed`` tag). An image version is made in its gallery's region from a
  VM in that region, so each first region has its own gallery.
* Image definition per profile: ``trainvm-<profile>`` (publisher ``trainvm``, offer ``baked``, sku the profile),
  Linux, **Generalized**, Hyper-V V2, ``SecurityType=TrustedLaunchSupported`` (the GPU sizes boot with Trusted
  Launch; a definition without it cannot boot them). Generalized, not Specialized: a VM created from a specialized
  image takes no ``osProfile`` (no customData, so no bootstrap, no admin user, no SSH key), and keeps the builder's
  host name, users and machine identity. Generalized needs the guest deprovisioned (the bake cleanup runs
  ``waagent -force -deprovision`` and the seal empties machine-id, host keys and cloud-init state: what
  ``tv_bake_seal`` leaves is the deprovisioned disk) and then ``virtualMachines/generalize`` on the deallocated VM
  (after which Azure never starts that VM again: the builder is only deleted).
* Version ``1.<YYYYMMDD>.<HHMMSS>`` (gallery versions are three 32-bit integers), source
  ``storageProfile.source.virtualMachineId`` = the builder, ``publishingProfile.targetRegions`` = the Azure regions
  of the failover order (the gallery's region first; one Standard_LRS replica each), tagged with the identity.
  ``BakedImage.name`` is ``<definition>-<version>``; ``ref`` the version's ARM id, which every replica region boots
  (``region_refs``: a region without a replica installs as usual).
* The builder is ``Standard_D2s_v5`` (2 vCPUs, 8 GiB, Premium SSD capable, Gen1 and Gen2, Trusted Launch; the
  smallest general-purpose size of the current D family, like AWS's m6i.large): no GPU is needed to build the
  driver's module with DKMS, and it boots the same Marketplace image and kernel as the GPU sizes.
"""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import TYPE_CHECKING

from provisioner import settings
from provisioner.errors import CloudError
from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import Poller, wire
from provisioner.providers.azure.arm import Arm, Props
from provisioner.providers.azure.sdk import Compute
from provisioner.providers.bake_base import BakedImage
from provisioner.providers.base import InstanceRecord
from provisioner.providers.image_identity import KIND_BAKED, LABEL_KIND, ImageIdentity, label_value, mismatch
from provisioner.providers.offer import Offer

if TYPE_CHECKING:
    from provisioner.providers.azure.provider import AzureProvider

BUILDER_SHAPE = "Standard_D2s_v5"
GALLERY_GROUP = "trainvm-gallery-"  # + region: the resource group of a region's gallery
GALLERY = "trainvm_"  # + region: gallery names take letters, digits, "_" and "." (no "-")
ROLE_TAG = {"trainvm-role": "gallery"}
PUBLISHER, OFFER = "trainvm", "baked"
READY = "Succeeded"
REPLICA_STORAGE = "Standard_LRS"


def gallery_of(region: str) -> tuple[str, str]:
    """(resource group, gallery) of the gallery in ``region``."""
    return GALLERY_GROUP + region, GALLERY + region


def definition_for(profile_name: str) -> str:
    """The image definition of a profile's baked images (letters, digits, "-", "_", "."; at most 80)."""
    return ("trainvm-" + label_value(profile_name))[:80]


def _definitions(compute: Compute, grp: str, gallery: str) -> list[object]:
    return list(compute.gallery_images.list_by_gallery(grp, gallery))


def _norm(region: str) -> str:
    return region.lower().replace(" ", "")


class AzureBaker:
    builder_shape = BUILDER_SHAPE

    def __init__(self, provider: AzureProvider) -> None:
        self.provider = provider  # the Baker contract: the builder is created, watched and deleted through it
        self.api, self.images_of = provider.client, provider.images

    def _compute(self) -> Compute:
        return self.api.clients().compute

    def builder_offer(self, gpu_offer: Offer) -> Offer:
        return dataclasses.replace(gpu_offer, instance_type=BUILDER_SHAPE, family="DSv5", gpu_count=0,
                                   gpu_attach="attachable", local_nvme_max_gib=0, spot_price_hourly=None, flags=(),
                                   hyperv_gen="1|2")

    def base_image(self, os_name: str, locked: dict[str, str] | None, region: str | None = None) -> str:
        """``publisher:offer:sku:version`` of the Gen2 Marketplace image of ``os_name``: the lock's pinned version,
        else the newest published in ``region`` (TRAINVM_AZURE_IMAGE_LOCATION when none; Marketplace versions
        have the same names in every region)."""
        wanted = R.image_for(os_name, _GEN2)
        pin = locked or {}
        if pin.get("version") and (pin.get("publisher"), pin.get("offer"), pin.get("sku")) == (
                wanted.publisher, wanted.offer, wanted.sku):
            return dataclasses.replace(wanted, version=pin["version"]).urn
        where = region or settings.text("TRAINVM_AZURE_IMAGE_LOCATION", "eastus")
        return self.images_of.resolve(where, wanted).urn

    # ------------------------------------------------------------------ capture
    def capture(self, builder: InstanceRecord, identity: ImageIdentity, profile_name: str,
                regions: tuple[str, ...] = ()) -> BakedImage:
        p, c = self.api, self._compute()
        name, rg = builder.name, R.names(builder.name).rg
        vm = p.get_vm(rg, name, expand=None)
        if vm is None:
            raise CloudError(f"the builder {name} is gone; nothing to capture")
        region = _norm(vm.get("location") or builder.region)
        # generalize needs the VM deallocated (bake/run.py stopped it); Azure never starts it again
        p.call(lambda: c.virtual_machines.generalize(rg, name))
        grp, gallery = self._gallery(region)
        definition = self._definition(grp, gallery, region, profile_name)
        existing = {v.get("name") for v in self._versions(grp, gallery, definition)}
        day, patch = time.strftime("%Y%m%d", time.gmtime()), int(time.strftime("%H%M%S", time.gmtime()))
        while f"1.{day}.{patch}" in existing:  # two bakes of one profile within a second: the next free number
            patch += 1
        version = f"1.{day}.{patch}"
        targets = list(dict.fromkeys([region, *(_norm(r) for r in regions)]))
        body = {"location": region, "tags": identity.labels(profile_name), "properties": {
            "publishingProfile": {"targetRegions": [{"name": r, "regionalReplicaCount": 1,
                                                     "storageAccountType": REPLICA_STORAGE} for r in targets],
                                  "replicaCount": 1, "storageAccountType": REPLICA_STORAGE},
            "storageProfile": {"source": {"virtualMachineId": vm["id"]}}}}
        try:
            poller = p.call(lambda: c.gallery_image_versions.begin_create_or_update(grp, gallery, definition, version, body))
            self._wait(poller, f"image version {definition}/{version}")
            got = self._get(grp, gallery, definition, version)
            if got is None or _props(got).get("provisioningState") != READY:
                state = _props(got or {}).get("provisioningState", "gone")
                raise CloudError(f"the image version {definition}/{version} is {state} after its creation")
        except BaseException:
            self._forget(grp, gallery, definition, version)
            raise
        return self._baked(got, definition)

    def _wait(self, poller: Poller, what: str) -> object:
        timeout = settings.seconds("TRAINVM_BAKE_TIMEOUT", 5400.0)
        result = self.api.call(lambda: poller.result(timeout=timeout))
        if not poller.done():
            raise CloudError(f"{what} was still being created (replicated) after {timeout:g} s (TRAINVM_BAKE_TIMEOUT)")
        return result

    def _gallery(self, region: str) -> tuple[str, str]:
        p, c = self.api, self._compute()
        grp, gallery = gallery_of(region)
        if p.get_group(grp) is None:
            p.call(lambda: p.clients().resource.resource_groups.create_or_update(grp, {"location": region, "tags": ROLE_TAG}))
        if p.call(lambda: c.galleries.get(grp, gallery), missing=None) is None:
            body = {"location": region, "tags": ROLE_TAG, "properties": {
                "description": "trainvm baked images (docs/bake.md): one image definition per profile"}}
            self._wait(p.call(lambda: c.galleries.begin_create_or_update(grp, gallery, body)), f"gallery {gallery}")
        return grp, gallery

    def _definition(self, grp: str, gallery: str, region: str, profile_name: str) -> str:
        p, c = self.api, self._compute()
        name = definition_for(profile_name)
        found = p.call(lambda: c.gallery_images.get(grp, gallery, name), missing=None)
        if found is not None:
            props = _props(wire(found))
            if (props.get("osState"), props.get("hyperVGeneration")) != ("Generalized", "V2"):
                raise CloudError(f"the image definition {gallery}/{name} is {props.get('osState')} "
                                 f"{props.get('hyperVGeneration')}; trainvm bakes Generalized V2 images (delete it)")
            return name
        body = {"location": region, "tags": ROLE_TAG, "properties": {
            "osType": "Linux", "osState": "Generalized", "hyperVGeneration": "V2", "architecture": "x64",
            "identifier": {"publisher": PUBLISHER, "offer": OFFER, "sku": name},
            "features": [{"name": "SecurityType", "value": "TrustedLaunchSupported"}],
            "description": f"trainvm baked images of profile {profile_name}"}}
        self._wait(p.call(lambda: c.gallery_images.begin_create_or_update(grp, gallery, name, body)),
                   f"image definition {name}")
        return name

    def _get(self, grp: str, gallery: str, definition: str, version: str) -> Arm | None:
        c = self._compute()
        got = self.api.call(lambda: c.gallery_image_versions.get(grp, gallery, definition, version), missing=None)
        return None if got is None else wire(got)

    def _versions(self, grp: str, gallery: str, definition: str) -> list[Arm]:
        c = self._compute()
        got = self.api.call(lambda: list(c.gallery_image_versions.list_by_gallery_image(grp, gallery, definition)),
                                  missing=[])
        return [wire(v) for v in got]

    def _forget(self, grp: str, gallery: str, definition: str, version: str) -> None:
        """Delete ``version`` (if it exists) and its definition once it holds no version."""
        p, c = self.api, self._compute()
        if self._get(grp, gallery, definition, version) is not None:
            poller = p.call(lambda: c.gallery_image_versions.begin_delete(grp, gallery, definition, version), missing=None)
            if poller is not None:
                self._wait(poller, f"deleting image version {definition}/{version}")
        if not self._versions(grp, gallery, definition):
            poller = p.call(lambda: c.gallery_images.begin_delete(grp, gallery, definition), missing=None)
            if poller is not None:
                self._wait(poller, f"deleting image definition {definition}")

    # ------------------------------------------------------------------ images, find, delete
    def _baked(self, v: Arm, definition: str) -> BakedImage:
        props = _props(v)
        pub = props.get("publishingProfile") or {}
        regions = tuple(_norm(t.get("name") or "") for t in pub.get("targetRegions") or [])
        size = ((props.get("storageProfile") or {}).get("osDiskImage") or {}).get("sizeInGB")
        # each replica bills as a snapshot (Compute Gallery "Billing"): regionalReplicaCount per target region
        replicas = sum(int(t.get("regionalReplicaCount") or 1) for t in pub.get("targetRegions") or []) or None
        return BakedImage(
            name=f"{definition}-{v.get('name')}", cloud="azure", ref=str(v.get("id")), labels=dict(v.get("tags") or {}),
            created=str(pub.get("publishedDate") or ""), size_gib=float(size) if size else None, regions=regions,
            family=definition, status=str(props.get("provisioningState") or ""),
            region_refs=tuple((r, str(v.get("id"))) for r in regions), replicas=replicas,
            notes=("size_gib is the OS disk image's size; each target region stores one replica (Standard_LRS)",))

    def images(self) -> list[BakedImage]:
        p, c = self.api, self._compute()
        out: list[BakedImage] = []
        for g in (wire(x) for x in p.call(lambda: list(c.galleries.list()))):
            name, gid = str(g.get("name") or ""), str(g.get("id") or "")
            if not name.startswith(GALLERY) or (g.get("tags") or {}).get("trainvm-role") != "gallery":
                continue
            grp = gid.split("/resourceGroups/", 1)[1].split("/", 1)[0] if "/resourceGroups/" in gid else ""
            defs = p.call(partial(_definitions, c, grp, name), missing=[])
            for d in (wire(x) for x in defs):
                out += [self._baked(v, str(d.get("name"))) for v in self._versions(grp, name, str(d.get("name")))
                        if (v.get("tags") or {}).get(LABEL_KIND) == KIND_BAKED]
        return sorted(out, key=lambda i: (i.created, i.name))

    def find(self, identity: ImageIdentity) -> BakedImage | None:
        found = [i for i in self.images() if i.status == READY and mismatch(i.labels, identity) is None]
        return max(found, key=lambda i: (i.created, i.name)) if found else None

    def delete_image(self, name: str) -> bool:
        """The version ``name`` (``<definition>-<version>``, or its ARM id), then its definition once it is empty."""
        want = name.lower()
        found = [i for i in self.images() if want in (i.name.lower(), i.ref.lower())]
        if not found:
            return False
        image = found[0]  # images() lists only versions tagged trainvm-kind=baked-image: another image is never deleted
        parts = image.ref.split("/")
        low = [x.lower() for x in parts]
        grp = parts[low.index("resourcegroups") + 1]
        gallery, definition, version = parts[low.index("galleries") + 1], parts[low.index("images") + 1], parts[-1]
        self._forget(grp, gallery, definition, version)
        return True


def _props(res: Arm) -> Props:
    return res.get("properties") or {}


class _Gen2:
    """Just enough of an Offer for ``request.image_for``: a size that boots Generation 2 images."""

    hyperv_gen = "2"
    instance_type = "builder"


_GEN2 = _Gen2()
