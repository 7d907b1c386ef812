"""What the catalog accepts as an Azure offer (Azure's ``catalog_check`` hook, provisioner/hooks/, run by
catalog/storage.py ``validate_offers``). Pure: importing it imports no SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provisioner.providers.offer import Offer


def check_offer(o: Offer) -> list[str]:
    """Azure prices a size per region: an Azure row names no zone."""
    if o.zone is not None:
        return [f"{o.cloud} {o.instance_type} {o.zone}: Azure offers are regional (zone must be empty)"]
    return []
