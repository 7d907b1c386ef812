"""What keeping a baked image costs per month (docs/bake.md, "Money and disks"): its stored size x the ``image`` row
of the catalog's disks.csv for its cloud x the stored copies the cloud bills (``BakedImage.copies``). Pure: the
caller passes the catalog's disk prices (``trainvm images`` and ``plan`` both have the catalog loaded)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from provisioner.providers.names import CLOUD_NAMES
from provisioner.providers.registry import cloud

if TYPE_CHECKING:
    from provisioner.catalog.disks import DiskPrices
    from provisioner.providers.bake_base import BakedImage


class StorageDoc(TypedDict):
    """``monthly_cost``'s JSON document (``plan --json`` baked_image.storage, ``images --json`` storage)."""

    monthly: float | None
    copies: int
    price_gib_month: float | None
    source: str | None


def monthly_cost(image: BakedImage, prices: DiskPrices) -> StorageDoc:
    """What storing ``image`` costs per month: its stored size x the catalog's ``image`` price (disks.csv) of its
    cloud (the first storage location's row, else the cloud's ``*``) x the copies the cloud bills
    (``BakedImage.copies``: AWS one per region, Azure one per replica); ``monthly`` None (unknown, never 0) when
    the size or the price is unknown. On a cloud whose images are files on this machine (``CloudSpec.on_host``: the
    local cloud's qcow2) nothing bills: 0, its source saying whose disk holds it."""
    on_host = cloud(image.cloud).on_host if image.cloud in CLOUD_NAMES else None
    if on_host is not None:
        return {"monthly": 0.0, "copies": image.copies, "price_gib_month": 0.0, "source": on_host}
    region = image.regions[0] if image.regions else "*"
    rows = prices.rows_for(image.cloud, region, "image")
    price = rows[0].price_month if rows else None
    monthly = None if price is None or image.size_gib is None else round(price * image.size_gib * image.copies, 2)
    return {"monthly": monthly, "copies": image.copies, "price_gib_month": price,
            "source": rows[0].source if rows else None}
