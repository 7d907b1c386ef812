"""Azure quotas for the preflight (provision/quota.py): the Compute usage API per location
(``ComputeManagementClient.usage.list(location)``, ``GET .../providers/Microsoft.Compute/locations/{loc}/usages``,
https://learn.microsoft.com/rest/api/compute/usage/list), each item ``{name: {value}, currentValue, limit}``.

What a VM counts against (https://learn.microsoft.com/azure/virtual-machines/quotas,
https://learn.microsoft.com/azure/virtual-machine-scale-sets/use-spot#pricing): an on-demand VM against its VM
family's vCPU quota and the location's ``cores`` (Total Regional vCPUs); a Spot VM against ``lowPriorityCores``
(Total Regional Low-priority vCPUs) only. Azure lists GPUs under the family's vCPUs: there is no GPU quota.

``FAMILY_QUOTA``: the catalog's Azure series (catalog/families.py) -> the usage name, which is the size's
``family`` in the Resource SKUs API (``az vm list-skus``, https://learn.microsoft.com/rest/api/compute/resource-skus/list,
e.g. Standard_NC4as_T4_v3 -> standardNCASv3_T4Family, localizedValue "Standard NCASv3_T4 Family vCPUs").
Names are compared without case (Azure mixes ``standard``/``Standard``). A size of a series the table does not know
is matched against the usage names the location lists (``family_usage_name``): the size's name read by Azure's
naming convention (https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions: family letters, vCPUs,
additive features, accelerator, version), compared with each listed name without ``standard``/``Family``, case and
underscores. A family whose usage name is neither in the table nor found in the list (or not listed by the
location) is *not checked* -- never "ok" on the regional ``cores`` alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import combinations

from provisioner.providers.azure.api import AzureApi
from provisioner.providers.azure.provider import AzureProvider
from provisioner.providers.quota_records import QuotaNeed, QuotaShape, Usage

FAMILY_QUOTA = {
    "NC": "standardNCFamily", "NCv3": "standardNCSv3Family", "NCasT4_v3": "standardNCASv3_T4Family",
    "NC_A100_v4": "StandardNCADSA100v4Family", "NCads_H100_v5": "standardNCadsH100v5Family",
    "ND_A100_v4": "standardNDASv4_A100Family", "NDm_A100_v4": "StandardNDAMSv4_A100Family",
    "ND_H100_v5": "standardNDSH100v5Family", "NDv2": "standardNDSv2Family", "NV": "standardNVFamily",
    "NVv3": "standardNVSv3Family", "NVv4": "standardNVSv4Family", "NVads_A10_v5": "StandardNVADSA10v5Family",
}
INCREASE_HINT = ("request an increase in the Azure portal (Quotas > Compute, filter by the VM family and location) "
                 "or with `az quota update`; new subscriptions often start at 0 for GPU families and Spot")


_SIZE_RE = re.compile(r"^(?:Standard|Basic)_([A-Z]+)\d+(?:-\d+)?([a-z]*)(?:_(?!Promo)([A-Z][A-Za-z0-9]*?))?(?:_(v\d+))?(?:_Promo)?$")
_DROPPABLE = "ir"  # additive features a family's usage name leaves out: isolated, RDMA (ND96isr_H100_v5 -> NDSH100v5)


def _key(usage_name: str) -> str:
    """A usage name without ``standard``/``Family``, case and punctuation: standardNCASv3_T4Family -> ncasv3t4."""
    key = re.sub(r"[^a-z0-9]", "", usage_name.lower())
    return key.removeprefix("standard").removesuffix("family")


def _size_keys(size: str) -> set[str]:
    """The usage-name keys a size's family may have, read from the size name by Azure's naming convention."""
    m = _SIZE_RE.match(size)
    if not m:
        return set()
    letters, features, accel, version = (g or "" for g in m.groups())
    drop = [c for c in _DROPPABLE if c in features]
    variants = {"".join(c for c in features if c not in gone) for n in range(len(drop) + 1) for gone in combinations(drop, n)}
    return {f"{letters}{f}{a}{b}".lower() for f in variants for a, b in ((accel, version), (version, accel))}


def family_usage_name(offer: QuotaShape, listed: Iterable[str]) -> str | None:
    """The usage name (Azure's own spelling, from ``listed``) of the family ``offer``'s size counts against, or None
    when it cannot be named: the table's name where the location lists it, else the one listed name the size's
    name maps to (none or several: None)."""
    by_key: dict[str, set[str]] = {}
    for name in listed:
        by_key.setdefault(_key(name), set()).add(name)
    known = FAMILY_QUOTA.get(offer.family)
    if known is not None and _key(known) in by_key:
        return sorted(by_key[_key(known)])[0]
    found = {name for k in _size_keys(offer.instance_type) for name in by_key.get(k, ())}
    return found.pop() if len(found) == 1 else None


class AzureQuotas:
    cloud = "azure"
    source = "Azure Compute usages"
    increase_hint = INCREASE_HINT

    def __init__(self, api: AzureApi) -> None:
        self.api = api
        self.account = f"{api.settings.endpoint or 'management.azure.com'}/{api.subscription_id}"

    def read(self, scope: str) -> Usage:
        items = self.api.call(lambda: list(self.api.clients().compute.usage.list(scope)))
        # name.value is required by the REST API (the SDK annotates it optional)
        return {u.name.value: (float(u.limit), float(u.current_value)) for u in items if u.name.value is not None}

    def needs(self, offer: QuotaShape, spot: bool, nodes: int, usage_of: Callable[[str], Usage]) -> list[QuotaNeed]:
        vcpus = offer.vcpus * nodes
        listed = {name.lower(): name for name in usage_of(offer.region)}

        def named(name: str) -> str:  # Azure's own spelling where it lists the name
            return listed.get(name.lower(), name)

        if spot:
            return [QuotaNeed(named("lowPriorityCores"), offer.region, vcpus, "Spot (low-priority) vCPUs")]
        label = f"{offer.family} family vCPUs"
        family = family_usage_name(offer, listed.values())
        if family is not None:
            need = QuotaNeed(family, offer.region, vcpus, label)
        else:  # cannot be named, so not read: "not checked", never "ok" on the regional cores alone
            need = QuotaNeed(FAMILY_QUOTA.get(offer.family, f"{offer.family} family"), offer.region, vcpus, label,
                             unread=f"Azure's usage list for {offer.region} has no vCPU quota trainvm can match to "
                                    f"{offer.instance_type}'s family ({offer.family})")
        return [need, QuotaNeed(named("cores"), offer.region, vcpus, "regional vCPUs")]


def reader(provider: object) -> AzureQuotas | None:
    """The quota reader of an Azure provider, on its API client (None for any other provider, e.g. a test's fake)."""
    return AzureQuotas(provider.client) if isinstance(provider, AzureProvider) else None
