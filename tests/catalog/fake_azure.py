"""A fake Azure Retail Prices API (behind tests/catalog/price_server.py).

Every field and spelling, with the public page it comes from:

* [doc] https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices : the item field
  names and their types (currencyCode, tierMinimumUnits, retailPrice, unitPrice, armRegionName, location,
  effectiveStartDate, meterId, meterName, productId, productName, skuId, skuName, serviceName, serviceId,
  serviceFamily, unitOfMeasure, type, isPrimaryMeterRegion, armSkuName, reservationTerm), the envelope
  (``BillingCurrency``, ``CustomerEntityId``, ``CustomerEntityType``, ``Items``, ``NextPageLink``, ``Count``),
  ``NextPageLink`` as an absolute URL with ``$skip``, null on the last page, the ``$filter`` syntax (``field eq
  'value'`` joined by ``and``, values case sensitive from 2023-01-01-preview, ``priceType`` filtering the field
  ``type``), ``type`` values Consumption / Reservation / DevTestConsumption, ``unitOfMeasure`` "1 Hour", the doc's
  Windows Spot sample row ("Virtual Machines FS Series Windows", skuName/meterName "F16s Spot", serviceId
  DZH313Z7MMC8, location "US East" style names).
* [incident] https://learn.microsoft.com/en-us/answers/questions/1188465/azure-retail-prices-api-broken-paging :
  NextPageLink null while more pages existed (``last_page``, on request).
* [disks] https://learn.microsoft.com/azure/virtual-machines/disks-types : the S / E / P tiers and their sizes;
  the products "Standard HDD Managed Disks", "Standard SSD Managed Disks", "Premium SSD Managed Disks" and
  ``unitOfMeasure`` "1/Month" as https://azure.microsoft.com/pricing/details/managed-disks/ names them.
* [3p] SkyPilot's fetch_azure.py (https://github.com/skypilot-org/skypilot): " Low Priority" meters, the
  " Windows" product suffix.

Built (not recorded): productName / skuName / meterName spellings beyond the doc's samples (they follow its
"Virtual Machines FS Series Windows" / "F16s Spot" pattern), every id and date, the disk tier rows' names
("P10 LRS" / "P10 LRS Disk", as the portal shows them) and every price (taken from the catalog the test gives).
Not modelled: OData functions other than ``eq``/``and`` (the source sends none), savings-plan blocks.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

from provisioner.catalog.models import Offer

PAGE = 7  # a small page size, so that every region takes several pages
TIERS = {"S": [(4, 32), (10, 128), (30, 1024)], "E": [(4, 32), (10, 128), (30, 1024)],
         "P": [(4, 32), (10, 128), (30, 1024)]}
DISK_PRODUCTS = {"S": "Standard HDD Managed Disks", "E": "Standard SSD Managed Disks", "P": "Premium SSD Managed Disks"}


def item(**kw: Any) -> dict[str, Any]:
    base = {"currencyCode": "USD", "tierMinimumUnits": 0.0, "location": "US East",
            "effectiveStartDate": "2026-10-01T00:00:00Z", "productId": "DZH318Z0BQ00",
            "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8", "serviceFamily": "Compute",
            "unitOfMeasure": "1 Hour", "type": "Consumption", "isPrimaryMeterRegion": True}
    base.update(kw)
    base.setdefault("unitPrice", base["retailPrice"])
    base.setdefault("skuId", base["productId"] + "/" + base["meterId"][-4:])
    return base


def vm_items(offers: Iterable[Offer], prices: dict[tuple[str, str], float] | None = None) -> list[dict[str, Any]]:
    """Linux on-demand and spot rows for ``offers`` (``prices`` overrides (size, region) on-demand prices), and
    for each size the rows a correct classifier must drop: Windows (dearer), Windows Spot, Low Priority, DevTest
    and Reservation (cheaper, so that reading one would change a plan)."""
    out = []
    for n, o in enumerate(offers):
        size = o.instance_type.removeprefix("Standard_").replace("_", " ")
        price = (prices or {}).get((o.instance_type, o.region), o.price_hourly)
        common = {"armRegionName": o.region, "armSkuName": o.instance_type,
                  "productName": f"Virtual Machines {o.family} Series"}
        mid = f"00000000-0000-0000-{n:04d}"
        out.append(item(**common, retailPrice=price, meterId=f"{mid}-000000000001", meterName=size, skuName=size))
        if o.spot_price_hourly is not None:
            out.append(item(**common, retailPrice=o.spot_price_hourly, meterId=f"{mid}-000000000002",
                            meterName=f"{size} Spot", skuName=f"{size} Spot"))
        win = {**common, "productName": f"Virtual Machines {o.family} Series Windows"}
        out.append(item(**win, retailPrice=round(price * 1.4, 4), meterId=f"{mid}-000000000003",
                        meterName=size, skuName=size))
        out.append(item(**win, retailPrice=round(price * 0.2, 4), meterId=f"{mid}-000000000004",
                        meterName=f"{size} Spot", skuName=f"{size} Spot"))
        out.append(item(**common, retailPrice=round(price * 0.1, 4), meterId=f"{mid}-000000000005",
                        meterName=f"{size} Low Priority", skuName=f"{size} Low Priority"))
        out.append(item(**common, retailPrice=round(price * 0.5, 4), meterId=f"{mid}-000000000006",
                        meterName=size, skuName=size, type="DevTestConsumption"))
        out.append(item(**common, retailPrice=round(price * 5000, 2), meterId=f"{mid}-000000000007",
                        meterName=size, skuName=size, type="Reservation", reservationTerm="1 Year"))
    return out


def disk_items(regions: Iterable[str]) -> list[dict[str, Any]]:
    out = []
    for region in regions:
        for letter, tiers in TIERS.items():
            for i, (tier, gib) in enumerate(tiers):
                price = {"S": 0.05, "E": 0.075, "P": 0.15}[letter] * gib
                common = {"armRegionName": region, "serviceName": "Storage", "serviceFamily": "Storage",
                          "productName": DISK_PRODUCTS[letter], "unitOfMeasure": "1/Month"}
                out.append(item(**common, retailPrice=round(price, 4), meterId=f"d{letter}{tier}-{region}-{i:04d}",
                                skuName=f"{letter}{tier} LRS", meterName=f"{letter}{tier} LRS Disk"))
                out.append(item(**common, retailPrice=round(price * 1.25, 4), meterId=f"z{letter}{tier}-{region}",
                                skuName=f"{letter}{tier} ZRS", meterName=f"{letter}{tier} ZRS Disk"))
            out.append(item(armRegionName=region, serviceName="Storage", productName=DISK_PRODUCTS[letter],
                            unitOfMeasure="10K", retailPrice=0.0005, meterId=f"ops{letter}-{region}",
                            skuName=f"{letter}10 LRS", meterName="Disk Operations"))
    return out


_EQ = re.compile(r"^(\w+) eq '([^']*)'$")


def matches(it: dict[str, Any], filter_: str) -> bool:
    for clause in filter_.split(" and "):
        m = _EQ.match(clause.strip())
        assert m, f"the fake models only `field eq 'value'` clauses: {clause!r}"
        field, value = m.groups()
        if str(it.get("type" if field == "priceType" else field)) != value:  # case sensitive, as documented
            return False
    return True


class AzureRetailFake:
    def __init__(self, items: list[dict[str, Any]], last_page: int | None = None) -> None:
        self.items = items
        self.url = ""  # set once the server runs (NextPageLink is absolute)
        #: NextPageLink null after this many pages of a query while items remain: the 2023-03-10 incident
        #: (https://learn.microsoft.com/en-us/answers/questions/1188465/azure-retail-prices-api-broken-paging)
        self.last_page = last_page

    def handle(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        assert path == "/api/retail/prices", path
        assert query.get("api-version") == "2023-01-01-preview"
        f = query.get("$filter", "")
        found = [i for i in self.items if matches(i, f)]
        skip = int(query.get("$skip", "0"))
        page = found[skip:skip + PAGE]
        nxt = None
        if skip + PAGE < len(found) and (self.last_page is None or skip // PAGE + 1 < self.last_page):
            nxt = (f"{self.url}/api/retail/prices?"
                   + urllib.parse.urlencode({"api-version": "2023-01-01-preview", "$filter": f, "$skip": skip + PAGE},
                                            quote_via=urllib.parse.quote))
        body = {"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
                "Items": page, "NextPageLink": nxt, "Count": len(page)}
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()
