"""The Marketplace image an Azure VM boots (a part of ``AzureProvider``): the newest version published in a region
(cached per process), the lock's pinned version, and what ``trainvm lock`` records (``pin_image``)."""

from __future__ import annotations

from collections.abc import Iterable

from provisioner import settings
from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi, wire
from provisioner.providers.base import LaunchSpec, ProviderError
from provisioner.providers.offer import Offer
from provisioner.providers.registry import image_refs


def _order(version: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in version.split("."))


class AzureImages:
    def __init__(self, api: AzureApi) -> None:
        self.api = api
        self._versions: dict[tuple[str, str, str, str], str] = {}

    def resolve(self, location: str, image: R.ImageRef) -> R.ImageRef:
        """``image`` pinned to the highest version published in ``location`` now (cached)."""
        key = (location, image.publisher, image.offer, image.sku)
        if key not in self._versions:
            found: Iterable[object] = self.api.call(lambda: self.api.clients().compute.virtual_machine_images.list(
                location, image.publisher, image.offer, image.sku), missing=[])
            versions = sorted((wire(v).get("name") or "" for v in found), key=_order)
            if not versions or not versions[-1]:  # another region may have it: not a reason to stop failover
                raise ProviderError(f"no version of image {image.urn} is published in {location}",
                                    code="PlatformImageNotFound")
            self._versions[key] = versions[-1]
        return R.ImageRef(image.publisher, image.offer, image.sku, self._versions[key])

    def pin(self, os_name: str) -> dict[str, str]:
        """What ``trainvm lock`` records: the newest version of the OS's (Gen2) image, as published in
        ``TRAINVM_AZURE_IMAGE_LOCATION`` (default eastus; Marketplace versions are the same names everywhere)."""
        ref = image_refs(os_name).get("azure")
        if not ref:
            raise R.InvalidRequestError(f"no Azure image is known for OS {os_name!r}", code="ImageUnknown")
        location = settings.text("TRAINVM_AZURE_IMAGE_LOCATION", "eastus")
        found = self.resolve(location, R.ImageRef(ref["publisher"], ref["offer"], ref["sku"]))
        return {"version": found.version, "location": location}

    def image_for(self, spec: LaunchSpec, offer: Offer) -> R.ImageRef:
        """NAME.lock's pinned version when the lock pinned this very image (a Gen1-only size boots another
        SKU), else the newest version published in the offer's region."""
        wanted = R.image_for(spec.os, offer)
        pin = spec.locked_images.get("azure", {})
        if pin.get("version") and (pin.get("publisher"), pin.get("offer"), pin.get("sku")) == (wanted.publisher, wanted.offer, wanted.sku):
            return R.ImageRef(wanted.publisher, wanted.offer, wanted.sku, pin["version"])
        return self.resolve(offer.region, wanted)
