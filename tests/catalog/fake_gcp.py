"""A fake Cloud Billing Catalog API v1 (behind tests/catalog/price_server.py).

Every field and spelling, with the public page or spec it comes from:

* [how-to] https://docs.cloud.google.com/billing/v1/how-tos/catalog-api : the path
  ``/v1/services/6F81-5844-456A/skus``, the API key, ``pageSize`` / ``pageToken`` / ``nextPageToken`` (5,000 a page).
* [proto] https://github.com/googleapis/googleapis/blob/master/google/cloud/billing/v1/cloud_catalog.proto : the
  SKU fields ``name``, ``skuId``, ``description``, ``category.{serviceDisplayName, resourceFamily, resourceGroup,
  usageType}``, ``serviceRegions``, ``pricingInfo[].{summary, pricingExpression.{usageUnit, usageUnitDescription,
  baseUnit, baseUnitDescription, baseUnitConversionFactor, displayQuantity, tieredRates[{startUsageAmount,
  unitPrice{currencyCode, units (int64: a string in JSON), nanos}}]}, currencyConversionRate, effectiveTime}``,
  ``serviceProviderName``; ``currencyCode`` as a request parameter.
* [rec] opencost/opencost, pkg/cloud/gcp provider test ``TestParsePage`` (a page recorded 2023-03-24,
  https://github.com/opencost/opencost): the three A2 / A100 SKUs verbatim (ids, descriptions, resourceGroup
  ``GPU`` / ``CPU`` / ``RAM``, usageUnit ``h`` / ``GiBy.h``, prices, serviceRegions us-central1/us-east1/us-west1).
* [pricing] https://cloud.google.com/billing/docs/how-to/get-pricing-information-api : the spot GPU spelling,
  its example SKU "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Warsaw" (and the Pricing API
  sample "L4 GPU attached to Spot Preemptible VMs running in Hong Kong", category "GPUs Preemptible"); the same
  example is in the Cloud Billing API discovery document (BillingAccountSku: "Nvidia Tesla K80 GPU attached to
  Spot Preemptible VMs running in Warsaw", https://cloudbilling.googleapis.com/$discovery/rest?version=v1beta).
* [export] https://docs.cloud.google.com/billing/docs/how-to/export-data-bigquery-tables/ (usage-table examples): on-demand
  descriptions "N1 Predefined Instance Core running in Americas", "Nvidia Tesla T4 GPU running in Americas"
  (resourceGroup ``N1Standard`` for N1 cores and RAM).
* [3p] spellings only third-party parsers of the live API show (not on a Google page): the cores'/RAM's spot
  prefix "Spot Preemptible <series> Instance Core|Ram running in ..." (e.g. "Spot Preemptible E2 Instance Core
  running in Salt Lake City", "Spot Preemptible N2 Instance Core running in Americas"), the DWS / Calendar Mode
  / "Commitment v1:" descriptions and a "Spot Preemptible ..." GPU SKU tagged ``OnDemand``; the disk
  descriptions ("Storage PD Capacity", "Balanced PD Capacity", "SSD backed PD Capacity", "SSD backed Local
  Storage", "Storage PD Snapshot in ...", from billing-export samples).

Built (not recorded): every other SKU id and price, and the page size (5 here; 5,000 for real).
Not modelled: ``geoTaxonomy``, ``pricingInfo`` timelines with several entries, the Pricing API (v1beta/v2beta),
machineTypes / acceleratorTypes (the refresh does not ask them without credentials).
"""

from __future__ import annotations

import json
from typing import Any

PAGE = 5
US = ["us-central1", "us-east1", "us-west1"]
_n = 0


def sku(desc: str, price: float, *, usage: str = "OnDemand", group: str = "CPU", family: str = "Compute",
        regions: list[str] | None = None, unit: str = "h", tiers: int = 1, sku_id: str | None = None) -> dict[str, Any]:
    global _n
    _n += 1
    units, nanos = int(price), round((price - int(price)) * 1e9)
    rates = [{"startUsageAmount": i * 100, "unitPrice": {"currencyCode": "USD", "units": str(units), "nanos": nanos}}
             for i in range(tiers)]
    sid = sku_id or f"F{_n:03d}-0000-{_n:04d}"
    return {"name": f"services/6F81-5844-456A/skus/{sid}", "skuId": sid, "description": desc,
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": family,
                         "resourceGroup": group, "usageType": usage},
            "serviceRegions": regions or US,
            "pricingInfo": [{"summary": "", "pricingExpression": {
                "usageUnit": unit, "displayQuantity": 1, "tieredRates": rates, "usageUnitDescription": "hour",
                "baseUnit": "s", "baseUnitDescription": "second", "baseUnitConversionFactor": 3600},
                "currencyConversionRate": 1, "effectiveTime": "2026-11-01T10:52:50.681Z"}],
            "serviceProviderName": "Google"}


#: unit prices the tests compute expected offer prices from
UNIT = {"A2 core": 0.031611, "A2 ram": 0.004237, "A100": 2.933908, "A100 80GB": 3.93,
        "N1 core": 0.031611, "N1 ram": 0.004237, "T4": 0.35, "T4 dear": 0.36, "V100": 2.48, "P100": 1.46,
        "P4": 0.60, "L4": 0.5603, "G2 core": 0.024988, "G2 ram": 0.002927,
        "A2 core spot": 0.0127, "A2 ram spot": 0.0017, "A100 spot": 1.17,
        "N1 core spot": 0.0071, "N1 ram spot": 0.00095, "T4 spot": 0.14}


def catalog_skus() -> list[dict[str, Any]]:
    u = UNIT
    return [
        # [rec] opencost TestParsePage, verbatim
        sku("Nvidia Tesla A100 GPU running in Americas", u["A100"], group="GPU", sku_id="039F-D0DA-4055"),
        sku("A2 Instance Core running in Americas", u["A2 core"], sku_id="2922-40C5-B19F"),
        sku("A2 Instance Ram running in Americas", u["A2 ram"], group="RAM", unit="GiBy.h", sku_id="2390-DCAF-DA38"),
        # built, in the [export] / [rec] spellings
        sku("Nvidia A100 80GB GPU running in Americas", u["A100 80GB"], group="GPU"),
        sku("N1 Predefined Instance Core running in Americas", u["N1 core"], group="N1Standard"),  # [export]
        sku("N1 Predefined Instance Ram running in Americas", u["N1 ram"], group="N1Standard", unit="GiBy.h"),
        sku("Nvidia Tesla T4 GPU running in Americas", u["T4"], group="GPU"),  # [export]
        sku("Nvidia Tesla T4 GPU running in Iowa", u["T4 dear"], group="GPU", regions=["us-central1"]),  # conflict
        sku("Nvidia Tesla V100 GPU running in Americas", u["V100"], group="GPU"),
        sku("Nvidia Tesla P100 GPU running in Americas", u["P100"], group="GPU"),
        sku("Nvidia Tesla P4 GPU running in Americas", u["P4"], group="GPU"),
        sku("Nvidia L4 GPU running in Americas", u["L4"], group="GPU"),
        sku("G2 Instance Core running in Americas", u["G2 core"]),
        sku("G2 Instance Ram running in Americas", u["G2 ram"], group="RAM", unit="GiBy.h"),
        # spot: cores and RAM with the [3p] prefix, GPUs "attached to Spot Preemptible VMs" [pricing]
        sku("Spot Preemptible A2 Instance Core running in Americas", u["A2 core spot"], usage="Preemptible"),
        sku("Spot Preemptible A2 Instance Ram running in Americas", u["A2 ram spot"], usage="Preemptible",
            group="RAM", unit="GiBy.h"),
        sku("Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas", u["A100 spot"],
            usage="Preemptible", group="GPU"),
        sku("Spot Preemptible N1 Predefined Instance Core running in Americas", u["N1 core spot"],
            usage="Preemptible", group="N1Standard"),
        sku("Spot Preemptible N1 Predefined Instance Ram running in Americas", u["N1 ram spot"],
            usage="Preemptible", group="N1Standard", unit="GiBy.h"),
        sku("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", u["T4 spot"],
            usage="Preemptible", group="GPU"),
        # traps [3p]: none of these is an on-demand or spot price
        sku("Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs running in Americas", 1.47, group="GPU"),
        sku("Reserved Nvidia Tesla A100 GPU in Americas in Calendar Mode", 1.2, group="GPU"),
        sku("Commitment v1: A2 Cpu in Americas for 1 Year", 0.0199, usage="Commit1Yr"),
        sku("Spot Preemptible Nvidia Tesla T4 GPU running in Americas", 0.05, group="GPU"),  # tagged OnDemand
        sku("N1 Predefined Instance Core running in Americas", 0.001, group="N1Standard", tiers=2),
        sku("A2 Instance Core running in Iowa", 0.0, regions=["us-central1"]),  # a zero price
        # disks [3p]
        sku("Storage PD Capacity", 0.04, family="Storage", group="PDStandard", unit="GiBy.mo"),
        sku("Balanced PD Capacity", 0.10, family="Storage", group="SSD", unit="GiBy.mo"),
        sku("SSD backed PD Capacity", 0.17, family="Storage", group="SSD", unit="GiBy.mo"),
        sku("SSD backed Local Storage", 0.08, family="Storage", group="LocalSSD", unit="GiBy.mo"),
        sku("Storage PD Snapshot in Americas", 0.026, family="Storage", group="PDSnapshot", unit="GiBy.mo"),
    ]


class GcpBillingFake:
    def __init__(self, skus: list[dict[str, Any]]) -> None:
        self.skus = skus

    def handle(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if path != "/v1/services/6F81-5844-456A/skus":
            return 404, {}, b'{"error": {"code": 404, "status": "NOT_FOUND"}}'
        if not headers.get("x-goog-api-key") and not headers.get("authorization"):
            return 403, {}, b'{"error": {"code": 403, "status": "PERMISSION_DENIED"}}'
        start = int(query.get("pageToken") or 0)
        body: dict[str, Any] = {"skus": self.skus[start:start + PAGE]}
        if start + PAGE < len(self.skus):
            body["nextPageToken"] = str(start + PAGE)
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()
