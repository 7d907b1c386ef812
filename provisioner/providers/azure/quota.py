"""Azure quotas for the preflight (provision/quota.py): the Compute usage API per location
(``ComputeManagementClient.usage.list(location)``, ``GET .../providers/Microsoft.Compute/locations/{loc}/usages``,
https://learn.microsoft.com/rest/api/compute/usage/list), each item ``{name: {value}, currentValue, limit}``.

What a VM counts against (https://learn.microsoft.com/azure/virtual-machines/quotas,
https://learn.microsoft.com/azure/virtual-machine-scale-sets/use-spot#pricing): an on-demand VM against its VM
family's vCPU quota and the location's ``cores`` (Total Regional vCPUs); a Spot VM against ``lowPriorityCores``
(Total Regional Low-priority vCPUs) only. Azure lists GPUs under the family's vCPUs: there is no GPU quota.

``FAMILY_QUOTA``: the catalog's Azure series (catalog/families.py) -> the usage name, which is the size's
``family`` in the Resource SKUs API (``az vm list-skus``, e.g. Standard_NC4as_T4_v3 -> standardNCASv3_T4Family).
Names are compared without case (Azure mixes ``standard``/``Standard``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provisioner.catalog.models import Offer
from provisioner.providers.azure.provider import AzureProvider
from provisioner.provision.quota import QuotaNeed, Usage

FAMILY_QUOTA = {
    "NC": "standardNCFamily", "NCv3": "standardNCSv3Family", "NCasT4_v3": "standardNCASv3_T4Family",
    "NC_A100_v4": "StandardNCADSA100v4Family", "NCads_H100_v5": "standardNCadsH100v5Family",
    "ND_A100_v4": "standardNDASv4_A100Family", "NDm_A100_v4": "StandardNDAMSv4_A100Family",
    "ND_H100_v5": "standardNDSH100v5Family", "NDv2": "standardNDSv2Family", "NV": "standardNVFamily",
    "NVv3": "standardNVSv3Family", "NVv4": "standardNVSv4Family", "NVads_A10_v5": "StandardNVADSA10v5Family",
}
INCREASE_HINT = ("request an increase in the Azure portal (Quotas > Compute, filter by the VM family and location) "
                 "or with `az quota update`; new subscriptions often start at 0 for GPU families and Spot")


class AzureQuotas:
    cloud = "azure"
    source = "Azure Compute usages"
    increase_hint = INCREASE_HINT

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.account = f"{provider.settings.endpoint or 'management.azure.com'}/{provider.subscription_id}"

    def read(self, scope: str) -> Usage:
        items = self.provider._call(lambda: list(self.provider.api().compute.usage.list(scope)))
        return {u.name.value: (float(u.limit), float(u.current_value)) for u in items}

    def needs(self, offer: Offer, spot: bool, nodes: int, usage_of: Callable[[str], Usage]) -> list[QuotaNeed]:
        vcpus = offer.vcpus * nodes
        listed = {name.lower(): name for name in usage_of(offer.region)}

        def named(name: str) -> str:  # Azure's own spelling where it lists the name
            return listed.get(name.lower(), name)

        if spot:
            return [QuotaNeed(named("lowPriorityCores"), offer.region, vcpus, "Spot (low-priority) vCPUs")]
        out = [QuotaNeed(named("cores"), offer.region, vcpus, "regional vCPUs")]
        family = FAMILY_QUOTA.get(offer.family)
        if family is not None:
            out.insert(0, QuotaNeed(named(family), offer.region, vcpus, f"{offer.family} family vCPUs"))
        return out


def reader(provider: Any) -> AzureQuotas | None:
    """The quota reader of an Azure provider (None for any other provider, e.g. a test's fake)."""
    return AzureQuotas(provider) if isinstance(provider, AzureProvider) else None
