"""Azure's price source for ``trainvm catalog refresh``: the Retail Prices API (no credentials).

``GET https://prices.azure.com/api/retail/prices?api-version=2023-01-01-preview&$filter=...`` (filter values are
case sensitive from that version on), one region at a time, following ``NextPageLink`` until it is null or a page
has no ``Items`` (page size not assumed: 100 in older docs, 1,000 in current ones; MAX_PAGES guards the loop).
Source: learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices (fields, paging, filters).

VM rows kept (the classification SkyPilot's fetch_azure.py uses, checked against the documented fields):
``type == "Consumption"``, ``unitOfMeasure == "1 Hour"``, ``currencyCode == "USD"``, ``tierMinimumUnits == 0``,
price > 0, ``armSkuName`` starting ``Standard_``, not Windows (``productName`` ending `` Windows`` or containing
`` Win``), not Cloud Services, not `` Low Priority``; ``skuName`` ending `` Spot`` is the spot price. Several
meters for one (size, kind): the primary-meter-region ones win, then the highest price (never understate a
bill), reported as ambiguous. Spot prices are per region (Azure has no zonal spot price).

Shapes: Resource SKUs needs an Azure credential and a subscription; this source does not ask it and prices the
sizes the catalog already knows (a size without a price is dropped and counted, never priced 0). Every other
size it prices in the region is handed back (``SourceResult.extra``): catalog/discover.py places it when another
region's row gives its shape (Azure rows are regional), else counts it as skipped.

Managed disks (``serviceName eq 'Storage'``, one ``productName`` each): Standard HDD (profile ``standard``, S
tiers), Standard SSD (``balanced``, E tiers), Premium SSD (``ssd``, P tiers), LRS, ``unitOfMeasure "1/Month"``,
priced per disk for the tier's size (learn.microsoft.com/azure/virtual-machines/disks-types, "disk size" tables).
Azure's local NVMe/temp disk is part of the VM's price: no ``local_ssd`` row.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import defaultdict
from dataclasses import replace
from datetime import datetime
from typing import TypedDict, cast

from provisioner import settings
from provisioner.errors import CloudError
from provisioner.providers import http
from provisioner.providers.offer import Offer
from provisioner.providers.price_rows import DiskPrice, SourceResult

API = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
SOURCE = f"Azure Retail Prices API ({API_VERSION})"
MAX_PAGES = 200
#: profile disk type -> Retail Prices productName, tier letter
DISK_PRODUCTS = {"standard": ("Standard HDD Managed Disks", "S"),
                 "balanced": ("Standard SSD Managed Disks", "E"),
                 "ssd": ("Premium SSD Managed Disks", "P")}
#: tier number -> disk size GiB (the same numbers for S, E and P; S has no tier below 4)
TIER_GIB = {1: 4, 2: 8, 3: 16, 4: 32, 6: 64, 10: 128, 15: 256, 20: 512, 30: 1024, 40: 2048, 50: 4096,
            60: 8192, 70: 16384, 80: 32767}


class PriceItem(TypedDict, total=False):
    """One item of a Retail Prices answer (learn.microsoft.com/rest/api/cost-management/retail-prices/
    azure-retail-prices: "API response examples"): the fields trainvm reads. The API's JSON is untyped; ``items`` is
    the adapter, and every field is checked where it is read (a row without a price is dropped, counted)."""

    currencyCode: str
    tierMinimumUnits: float
    retailPrice: float
    unitPrice: float
    armRegionName: str
    location: str
    meterId: str
    meterName: str
    productName: str
    skuName: str
    serviceName: str
    unitOfMeasure: str
    type: str
    isPrimaryMeterRegion: bool
    armSkuName: str


class PricePage(TypedDict, total=False):
    """One page of a Retail Prices answer: its items and the next page's URL (null on the last)."""

    Items: list[PriceItem]
    NextPageLink: str | None


def base_url() -> str:
    return settings.text("TRAINVM_AZURE_PRICES_URL") or API


def items(filter_: str) -> list[PriceItem]:
    """Every item the filter matches, page after page."""
    url: str | None = base_url() + "?" + urllib.parse.urlencode(
        {"api-version": API_VERSION, "$filter": filter_}, quote_via=urllib.parse.quote)
    out: list[PriceItem] = []
    for _ in range(MAX_PAGES):
        if not url:
            return out
        page = cast(PricePage, http.get_json(url))
        batch = page.get("Items") or []
        out.extend(batch)
        url = page.get("NextPageLink") if batch else None
    raise CloudError(f"{SOURCE}: more than {MAX_PAGES} pages for {filter_!r}")


def _vm_kind(it: PriceItem) -> str | None:
    """"ondemand", "spot", or None for a row that is not a Linux pay-as-you-go VM price."""
    product, sku = str(it.get("productName", "")), str(it.get("skuName", ""))
    if (it.get("type") != "Consumption" or it.get("unitOfMeasure") != "1 Hour"
            or it.get("currencyCode") != "USD" or float(it.get("tierMinimumUnits") or 0) != 0
            or not str(it.get("armSkuName", "")).startswith("Standard_")):
        return None
    if product.endswith(" Windows") or " Win" in product or "Cloud Services" in product:
        return None
    if sku.endswith(" Low Priority"):
        return None
    return "spot" if sku.endswith(" Spot") else "ondemand"


def vm_prices(rows: list[PriceItem], region: str, ambiguous: list[str],
              dropped: dict[str, int]) -> dict[tuple[str, str], tuple[float, str]]:
    """(armSkuName, kind) -> (USD/h, meterId) for one region."""
    cands: dict[tuple[str, str], list[PriceItem]] = defaultdict(list)
    for it in rows:
        kind = _vm_kind(it)
        if kind is None or it.get("armRegionName") != region:
            continue
        price = it.get("retailPrice")
        if not isinstance(price, (int, float)) or price <= 0:
            dropped["zero_or_missing_price"] = dropped.get("zero_or_missing_price", 0) + 1
            continue
        cands[(it["armSkuName"], kind)].append(it)
    out = {}
    for key, lst in cands.items():
        primary = [i for i in lst if i.get("isPrimaryMeterRegion") is True] or lst
        best = max(primary, key=lambda i: (float(i["retailPrice"]), str(i.get("meterId", ""))))
        distinct = sorted({float(i["retailPrice"]) for i in primary})
        if len(distinct) > 1:
            ambiguous.append(f"{key[0]} {region} {key[1]}: {len(primary)} meters at "
                             f"{', '.join(f'{p:g}' for p in distinct)} USD/h; took {float(best['retailPrice']):g}")
        out[key] = (float(best["retailPrice"]), f"{SOURCE} meterId {best.get('meterId', '?')}")
    return out


def disk_prices(rows: list[PriceItem], region: str, disk_type: str, fetched_at: str) -> list[DiskPrice]:
    product, letter = DISK_PRODUCTS[disk_type]
    rx = re.compile(rf"^{letter}(\d+) LRS$")
    best: dict[int, PriceItem] = {}
    for it in rows:
        m = rx.match(str(it.get("skuName", "")))
        price = it.get("retailPrice")
        if (m is None or it.get("productName") != product or it.get("armRegionName") != region
                or it.get("unitOfMeasure") != "1/Month" or it.get("currencyCode") != "USD"
                or it.get("type") != "Consumption" or not isinstance(price, (int, float)) or price <= 0
                or int(m.group(1)) not in TIER_GIB or not str(it.get("meterName", "")).endswith("Disk")):
            continue  # transactions, bursting, reservations, unknown tiers, zero prices
        tier = TIER_GIB[int(m.group(1))]
        if tier not in best or float(price) > float(best[tier]["retailPrice"]):
            best[tier] = it
    return [DiskPrice("azure", region, disk_type, gib, "disk", float(it["retailPrice"]),
                      f"{SOURCE} meterId {it.get('meterId', '?')}", fetched_at)
            for gib, it in sorted(best.items())]


def fetch(known: list[Offer], regions: list[str], now: datetime) -> SourceResult:
    res = SourceResult(offers=[], row_source={}, source=SOURCE, notes=[
        "shapes: the sizes the catalog already knows (Resource SKUs needs Azure credentials; not asked)"])
    fetched_at = now.date().isoformat()
    dropped: dict[str, int] = {}
    for region in regions:
        rows = items(f"serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
                     f"and armRegionName eq '{region}'")
        prices = vm_prices(rows, region, res.ambiguous, dropped)
        for o in (o for o in known if o.region == region):
            on = prices.get((o.instance_type, "ondemand"))
            if on is None:
                dropped["no_ondemand_price"] = dropped.get("no_ondemand_price", 0) + 1
                continue
            spot = prices.get((o.instance_type, "spot"))
            res.offers.append(replace(o, price_hourly=on[0], spot_price_hourly=spot[0] if spot else None))
            res.row_source[o.key()] = on[1]
        here = {o.instance_type for o in known if o.region == region}
        for (size, kind), (price, source) in sorted(prices.items()):
            if kind == "ondemand" and size not in here:
                spot = prices.get((size, "spot"))
                res.extra[(region, size)] = (price, spot[0] if spot else None, source)
        for disk_type, (product, _) in DISK_PRODUCTS.items():
            rows = items(f"serviceName eq 'Storage' and priceType eq 'Consumption' "
                         f"and armRegionName eq '{region}' and productName eq '{product}'")
            res.disks.extend(disk_prices(rows, region, disk_type, fetched_at))
    res.dropped.update(dropped)
    return res
