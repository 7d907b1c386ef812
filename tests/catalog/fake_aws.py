"""A fake AWS Price List bulk API (behind tests/catalog/price_server.py).

Every field and spelling, with the public page or recording it comes from:

* [bulk] https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-the-aws-price-list-bulk-api.html and
  https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/reading-the-offer-index.html : the URL layout
  (``/offers/v1.0/aws/AmazonEC2/current/region_index.json``, ``regions.<code>.{regionCode, currentVersionUrl}``
  with a versioned ``.../<region>/index.json`` path, its ``index.csv`` twin), the CSV's metadata lines
  (FormatVersion, Disclaimer, Publication Date, Version, OfferCode) then a header.
* [rec-index] cloudmesh's AwsFlavor test (https://github.com/cloudmesh/cloudmesh-cloud), a recorded
  region_index.json: ``formatVersion``, ``disclaimer``, ``publicationDate``, the versioned path.
* [rec-offer] opencost's AWS provider test (https://github.com/opencost/opencost, offer version 2023-03): the
  attribute values ``Compute Instance``, ``AWS Region``, ``Shared``, ``Linux``, ``No License required``, ``NA``,
  ``Used``, ``RunInstances`` / ``RunInstances:0800`` (Windows BYOL), ``Hrs``, ``JRTCKXETXF`` (the on-demand term
  code), ``$<price> per On Demand Linux <type> Instance Hour``; the CSV column names are the JSON attributes'
  display names as offer files published 2017-2025 spell them (``Instance Type``, ``Product Family``,
  ``Location Type``, ``Pre Installed S/W``, ``CapacityStatus``, ``Volume API Name``, ``Region Code``, ...).
* [rec-ucr] grafana/cloudcost-exporter, pkg/aws/services/ec2 test (https://github.com/grafana/cloudcost-exporter,
  recorded 2024-05-08): the ``UnusedCapacityReservation`` row under OnDemand, "per Unused Reservation Linux ...".
* [3p] spellings third-party readers of the offer files show: ``RunInstances:0002`` (Windows), ``Tenancy
  Dedicated``, ``Pre Installed S/W`` "SQL Std", ``GB-Mo`` with ``Volume API Name`` gp3/gp2 for EBS; ``Product
  Family`` "Compute Instance (bare metal)" for the ``*.metal`` sizes (public offer-file readers accept both it and
  "Compute Instance"; AmazonEC2's productFamily values also list it); ``Location Type`` "AWS Local Zone" (values
  AWS Region / AWS Local Zone / AWS Wavelength Zone / AWS Outposts) with a zone-prefixed usage type
  (``USW2-LAX1-BoxUsage:<type>``) in the parent region's file. A Local Zone is an extension of its parent Region
  (https://aws.amazon.com/about-aws/global-infrastructure/localzones/); that its rows carry the parent's ``Region
  Code`` is issue 36's report from a real file, and the harsher case for a parser.

Built: every SKU, the row set, and every price (taken from the catalog the test gives). Columns not read by
trainvm are left out or empty (column order is not relied on: the fake puts ``Instance Type`` after ``Operating
System``, unlike the real file). Not modelled: the JSON offer file, ``index.csv`` of the whole service, savings
plans, China regions (CNY), the ``GPU`` / ``GPU Memory`` columns (without ``GPU`` the source counts every
unknown type, not only GPU ones).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from provisioner.catalog.models import Offer

HEADER = ["SKU", "OfferTermCode", "RateCode", "TermType", "PriceDescription", "EffectiveDate", "StartingRange",
          "EndingRange", "Unit", "PricePerUnit", "Currency", "LeaseContractLength", "PurchaseOption",
          "Product Family", "serviceCode", "Location", "Location Type", "Operating System", "Instance Type",
          "vCPU", "Memory", "Volume API Name", "Tenancy", "License Model", "usageType", "operation",
          "CapacityStatus", "Pre Installed S/W", "Region Code"]
VERSION = "20261101000000"


def row(**kw: str) -> dict[str, str]:
    base = {"OfferTermCode": "JRTCKXETXF", "TermType": "OnDemand", "EffectiveDate": "2026-11-01",
            "StartingRange": "0", "EndingRange": "Inf", "Unit": "Hrs", "Currency": "USD",
            "Product Family": "Compute Instance", "serviceCode": "AmazonEC2", "Location Type": "AWS Region",
            "Operating System": "Linux", "Tenancy": "Shared", "License Model": "No License required",
            "operation": "RunInstances", "CapacityStatus": "Used", "Pre Installed S/W": "NA"}
    base.update(kw)
    return base


def family(instance_type: str) -> str:
    return "Compute Instance (bare metal)" if instance_type.endswith(".metal") else "Compute Instance"


def offer_rows(offers: Iterable[Offer], region: str, prices: dict[str, float] | None = None) -> list[dict[str, str]]:
    """One Linux on-demand row per instance type (``prices`` overrides), and the traps beside it (a Local Zone's
    dearer row for the same type among them)."""
    out = []
    seen = set()
    for o in offers:
        if o.region != region or o.instance_type in seen:
            continue
        seen.add(o.instance_type)
        n = len(seen)
        price = (prices or {}).get(o.instance_type, o.price_hourly)
        common = {"Instance Type": o.instance_type, "Region Code": region, "vCPU": f"{o.vcpus:g}",
                  "Memory": f"{o.memory_gib:g} GiB", "Product Family": family(o.instance_type)}
        out.append(row(**common, SKU=f"LIN{n:05d}", PricePerUnit=f"{price:.10f}",
                       PriceDescription=f"${price} per On Demand Linux {o.instance_type} Instance Hour"))
        out.append(row(**common, SKU=f"WIN{n:05d}", PricePerUnit=f"{price * 1.5:.10f}", **{"Operating System": "Windows"},
                       operation="RunInstances:0002"))
        out.append(row(**common, SKU=f"BYL{n:05d}", PricePerUnit=f"{price * 0.9:.10f}", **{"Operating System": "Windows",
                       "License Model": "Bring your own license"}, operation="RunInstances:0800"))
        out.append(row(**common, SKU=f"DED{n:05d}", PricePerUnit=f"{price * 1.1:.10f}", Tenancy="Dedicated"))
        out.append(row(**common, SKU=f"UCR{n:05d}", PricePerUnit=f"{price * 0.6:.10f}",
                       CapacityStatus="UnusedCapacityReservation",
                       PriceDescription=f"${price * 0.6} per Unused Reservation Linux {o.instance_type} Instance Hour"))
        out.append(row(**common, SKU=f"LCZ{n:05d}", PricePerUnit=f"{price * 1.2:.10f}",
                       **{"Location Type": "AWS Local Zone"}, Location="US West (Los Angeles)",
                       usageType=f"USW2-LAX1-BoxUsage:{o.instance_type}"))
        out.append(row(**common, SKU=f"SQL{n:05d}", PricePerUnit=f"{price * 2:.10f}", **{"Pre Installed S/W": "SQL Std"}))
        out.append(row(**common, SKU=f"LIN{n:05d}", OfferTermCode="HU7G6KETJZ", TermType="Reserved",
                       PricePerUnit=f"{price * 0.4:.10f}", LeaseContractLength="1yr", PurchaseOption="No Upfront"))
    out.append(row(SKU="GP3STORAGE", **{"Product Family": "Storage", "Volume API Name": "gp3"}, Unit="GB-Mo",
                   PricePerUnit="0.0800000000", operation="", **{"Region Code": region}))
    out.append(row(SKU="GP2STORAGE", **{"Product Family": "Storage", "Volume API Name": "gp2"}, Unit="GB-Mo",
                   PricePerUnit="0.1000000000", operation="", **{"Region Code": region}))
    return out


def offer_csv(rows: list[dict[str, str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for k, v in (("FormatVersion", "v1.0"), ("Disclaimer", "This pricing list is for informational purposes only."),
                 ("Publication Date", "2026-11-01T00:00:00Z"), ("Version", VERSION), ("OfferCode", "AmazonEC2")):
        w.writerow([k, v])
    w.writerow(HEADER)
    for r in rows:
        w.writerow([r.get(h, "") for h in HEADER])
    return buf.getvalue().encode()


class AwsBulkFake:
    def __init__(self, files: dict[str, list[dict[str, str]]]) -> None:
        self.files = files  # region -> rows

    def handle(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if path == "/offers/v1.0/aws/AmazonEC2/current/region_index.json":
            doc: dict[str, Any] = {"formatVersion": "v1.0", "disclaimer": "…", "publicationDate": "2026-11-01T00:00:00Z",
                                   "regions": {r: {"regionCode": r, "currentVersionUrl":
                                                   f"/offers/v1.0/aws/AmazonEC2/{VERSION}/{r}/index.json"}
                                               for r in self.files}}
            return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()
        prefix = f"/offers/v1.0/aws/AmazonEC2/{VERSION}/"
        if path.startswith(prefix) and path.endswith("/index.csv"):
            region = path[len(prefix):-len("/index.csv")]
            if region in self.files:
                return 200, {"Content-Type": "text/csv"}, offer_csv(self.files[region])
        return 404, {}, b"<Error><Code>NoSuchKey</Code></Error>"
