"""GCP's price source for ``trainvm catalog refresh``: the Cloud Billing Catalog API v1.

``GET https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus?currencyCode=USD&pageSize=5000``
(Compute Engine's service id), following ``nextPageToken``; an API key (``TRAINVM_GCP_PRICES_API_KEY``, sent as
the ``x-goog-api-key`` header, never in the URL) or else application-default credentials (a bearer token).
Sources: docs.cloud.google.com/billing/v1/how-tos/catalog-api (key, paging, 5,000 per page);
googleapis google/cloud/billing/v1/cloud_catalog.proto (fields; units + nanos; pricingInfo chronological);
cloud.google.com/billing/quotas (300 calls/min: a pull is a few pages).

A GCE price is assembled: ``core × vCPUs + RAM × GiB + GPU × count`` for the machine series' SKUs whose
``serviceRegions`` hold the offer's region (the location words in descriptions are never read). On-demand:
``usageType OnDemand``; spot: ``usageType Preemptible`` *and* a spot description, spelled one of two ways: the
GPUs' "<GPU> attached to Spot Preemptible VMs running in <place>" (the Pricing API how-to's own example SKU,
"Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Warsaw":
cloud.google.com/billing/docs/how-to/get-pricing-information-api) and the cores'/RAM's prefix "Spot Preemptible
<series> Instance Core|Ram running in <place>" (or the older "Preemptible ..."). A spot description tagged
OnDemand is dropped, reported. Never read as a price: commitments, DWS and
calendar-mode GPUs (about half the ordinary price, tagged OnDemand), reserved, premium, custom, sole-tenancy and
extended-memory SKUs, a SKU whose unit is not ``h``/``GiBy.h``, or with more than one tier. Several SKUs for one
(series, part, region, usage) at different prices: the highest, reported. A missing part drops the offer
(counted), never prices it 0.

Shapes: ``machineTypes``/``acceleratorTypes`` need credentials and a project; this source prices the machine types
the catalog already knows. Series whose description prefix is not in SERIES (below) are not priced: reported.

Disks (``resourceFamily Storage``, ``usageUnit GiBy.mo``): "Storage PD Capacity" (standard), "Balanced PD
Capacity" (balanced), "SSD backed PD Capacity" (ssd), "SSD backed Local Storage" (local_ssd), optionally followed
by " in <location>" (these descriptions are from billing-export samples, not from a recorded page). Hyperdisk
(the A3 Ultra / A4 boot disk) is priced by capacity, IOPS and throughput and is not written.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import datetime
from typing import TypedDict

from provisioner import settings
from provisioner.errors import CloudError
from provisioner.providers import http
from provisioner.providers.offer import Offer
from provisioner.providers.price_rows import DiskPrice, SourceResult
from provisioner.wording import failure_words

API = "https://cloudbilling.googleapis.com"
SERVICE = "services/6F81-5844-456A"  # Compute Engine
SOURCE = "Cloud Billing Catalog API v1 (Compute Engine SKUs)"
MAX_PAGES = 100
#: catalog family -> the series words before " Instance Core|Ram" (SkyPilot's SERIES_TO_DESCRIPTION; A3 Mega is
#: "A3Plus" per a third-party parser). A3 Ultra (H200) and A4 (B200) are left out: their description prefixes are
#: not established, so their rows are dropped and reported rather than priced from a guess.
SERIES = {"n1": "N1 Predefined", "a2-highgpu": "A2", "a2-megagpu": "A2", "a2-ultragpu": "A2",
          "a3-highgpu": "A3", "a3-edgegpu": "A3", "a3-megagpu": "A3Plus", "g2-standard": "G2"}
#: catalog GPU name -> description tokens before " GPU running in" (an instance type may narrow it: MEGA)
GPU_TOKENS = {"T4": ("T4",), "V100": ("V100",), "P100": ("P100",), "P4": ("P4",), "L4": ("L4",), "A100": ("A100",),
              "A100-80GB": ("A100 80GB",), "H100": ("H100 80GB",), "H200": ("H200 141GB",)}
MEGA_TOKENS = ("H100 80GB Mega", "H100 Mega 80GB", "H100 80GB Plus")
EXCLUDED = re.compile(r"DWS|Calendar Mode|Commitment|Reserved|Premium|Custom|custom|Sole Tenancy|sole tenancy"
                      r"|Extended|Upgrade")
_HOST = re.compile(r"^(?P<series>.+?) Instance (?P<part>Core|Ram) running in .+$")
_GPU = re.compile(r"^(?:Nvidia )?(?:Tesla )?(?P<tok>.+?) GPU running in .+$")
_SPOT = re.compile(r"^(?:Spot )?Preemptible ")
_SPOT_ATTACHED = " attached to Spot Preemptible VMs running in "  # GPUs: "<GPU> attached to Spot Preemptible VMs ..."
DISKS = {"Storage PD Capacity": "standard", "Balanced PD Capacity": "balanced", "SSD backed PD Capacity": "ssd",
         "SSD backed Local Storage": "local_ssd"}
_DISK = re.compile(r"^(?P<d>" + "|".join(DISKS) + r")(?: in .+)?$")
UNITS = {"Core": "h", "Ram": "GiBy.h", "GPU": "h"}


class Money(TypedDict, total=False):
    currencyCode: str
    units: str  # int64, as a JSON string
    nanos: int


class TieredRate(TypedDict, total=False):
    startUsageAmount: float
    unitPrice: Money


class PricingExpression(TypedDict, total=False):
    usageUnit: str
    tieredRates: list[TieredRate]


class PricingInfo(TypedDict, total=False):
    pricingExpression: PricingExpression


class Category(TypedDict, total=False):
    resourceFamily: str  # Compute, Storage, Network, ...
    usageType: str  # OnDemand, Preemptible, Commit1Yr, ...


class Sku(TypedDict, total=False):
    """The fields read of one SKU of the Cloud Billing Catalog API (``services.skus.list``: cloud.google.com/billing/
    docs/reference/rest/v1/services.skus); every one optional, as the answer may omit it."""

    skuId: str
    description: str
    category: Category
    serviceRegions: list[str]
    pricingInfo: list[PricingInfo]


class SkuPage(TypedDict, total=False):
    skus: list[Sku]
    nextPageToken: str


#: what a price belongs to: ("host", series, "Core"|"Ram"), ("gpu", token) or ("disk", type)
Part = tuple[str, ...]


def base_url() -> str:
    return (settings.text("TRAINVM_GCP_BILLING_URL") or API).rstrip("/")


def auth_headers() -> dict[str, str]:
    key = settings.text("TRAINVM_GCP_PRICES_API_KEY")
    if key:
        return {"x-goog-api-key": key}
    try:
        import google.auth
        import google.auth.transport.requests

        creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        creds.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call]  # google-auth: unannotated
    except Exception as e:  # noqa: BLE001 - DefaultCredentialsError, RefreshError, transport errors
        raise CloudError(f"{SOURCE}: no API key and no application-default credentials ({failure_words(e)})",
                         hint="set TRAINVM_GCP_PRICES_API_KEY to an API key with the Cloud Billing API enabled, "
                              "or run `gcloud auth application-default login`; `--cloud azure --cloud aws` "
                              "refreshes the other clouds without it") from None
    return {"Authorization": f"Bearer {creds.token}"}


def skus() -> list[Sku]:
    headers = auth_headers()
    out: list[Sku] = []
    token = ""
    for _ in range(MAX_PAGES):
        q = {"currencyCode": "USD", "pageSize": "5000", **({"pageToken": token} if token else {})}
        page: SkuPage = http.get_json(f"{base_url()}/v1/{SERVICE}/skus?{urllib.parse.urlencode(q)}", headers)
        out.extend(page.get("skus") or [])
        token = page.get("nextPageToken") or ""
        if not token:
            return out
    raise CloudError(f"{SOURCE}: more than {MAX_PAGES} pages")


def unit_price(sku: Sku, unit: str) -> float | None:
    """USD per unit from the latest pricingInfo; None unless it has exactly one tier, in USD, in ``unit``."""
    infos = sku.get("pricingInfo") or []
    if not infos:
        return None
    expr = infos[-1].get("pricingExpression") or PricingExpression()
    tiers = expr.get("tieredRates") or []
    if expr.get("usageUnit") != unit or len(tiers) != 1 or float(tiers[0].get("startUsageAmount") or 0) != 0:
        return None
    money = tiers[0].get("unitPrice") or Money()
    if money.get("currencyCode", "USD") != "USD":
        return None
    return int(money.get("units") or 0) + int(money.get("nanos") or 0) / 1e9


class Prices:
    """(usage, part, region) -> [(USD, skuId)]; part is ("host", series, "Core"|"Ram"), ("gpu", token) or
    ("disk", type)."""

    def __init__(self) -> None:
        self.cands: dict[tuple[str, Part, str], list[tuple[float, str]]] = defaultdict(list)

    def add(self, sku: Sku, regions: set[str], dropped: Counter[str]) -> None:
        cat = sku.get("category") or Category()
        desc = str(sku.get("description", ""))
        usage = cat.get("usageType")
        if usage not in ("OnDemand", "Preemptible") or EXCLUDED.search(desc):
            return
        spot_text = bool(_SPOT.match(desc)) or _SPOT_ATTACHED in desc
        if (usage == "Preemptible") != spot_text:
            dropped["mistagged_spot_sku"] += 1
            return
        desc = _SPOT.sub("", desc).replace(_SPOT_ATTACHED, " running in ")
        kind = "spot" if spot_text else "ondemand"
        where = regions & set(sku.get("serviceRegions") or [])
        if not where:
            return
        part: Part | None = None
        unit = ""
        if cat.get("resourceFamily") == "Compute":
            if m := _HOST.match(desc):
                part, unit = ("host", m["series"], m["part"]), UNITS[m["part"]]
            elif m := _GPU.match(desc):
                part, unit = ("gpu", m["tok"]), "h"
        elif cat.get("resourceFamily") == "Storage" and kind == "ondemand" and (m := _DISK.match(desc)):
            part, unit = ("disk", DISKS[m["d"]]), "GiBy.mo"
        if part is None:
            return
        price = unit_price(sku, unit)
        if price is None or price <= 0:
            dropped["unusable_sku_price"] += 1
            return
        for r in where:
            self.cands[(kind, part, r)].append((price, str(sku.get("skuId", "?"))))

    def pick(self, kind: str, part: Part, region: str, ambiguous: list[str]) -> tuple[float, str] | None:
        c = self.cands.get((kind, part, region))
        if not c:
            return None
        best = max(c)
        distinct = sorted({p for p, _ in c})
        if len(distinct) > 1:
            msg = (f"{' '.join(map(str, part[1:]))} {region} {kind}: {len(c)} SKUs at "
                   f"{', '.join(f'{p:g}' for p in distinct)}; took {best[0]:g} ({best[1]})")
            if msg not in ambiguous:
                ambiguous.append(msg)
        return best


def price_of(o: Offer, kind: str, p: Prices, ambiguous: list[str]) -> tuple[float, list[str]] | None:
    series = SERIES.get(o.family)
    if series is None:
        return None
    core = p.pick(kind, ("host", series, "Core"), o.region, ambiguous)
    ram = p.pick(kind, ("host", series, "Ram"), o.region, ambiguous)
    tokens = MEGA_TOKENS if o.family == "a3-megagpu" else GPU_TOKENS.get(o.gpu_name, ())
    gpus = [g for t in tokens if (g := p.pick(kind, ("gpu", t), o.region, ambiguous))]
    if core is None or ram is None or not gpus:
        return None
    gpu = max(gpus)
    total = core[0] * o.vcpus + ram[0] * o.memory_gib + gpu[0] * o.gpu_count
    return round(total, 6), [core[1], ram[1], gpu[1]]


def fetch(known: list[Offer], regions: list[str], now: datetime) -> SourceResult:
    res = SourceResult(offers=[], row_source={}, source=SOURCE, notes=[
        "shapes: the machine types the catalog already knows (machineTypes/acceleratorTypes need credentials "
        "and a project; not asked)"])
    if not regions:
        return res
    prices = Prices()
    wanted = set(regions)
    for sku in skus():
        prices.add(sku, wanted, res.dropped)
    unpriced: set[str] = set()
    for o in known:
        on = price_of(o, "ondemand", prices, res.ambiguous)
        if o.family not in SERIES:
            res.unmodelled.add(o.key())
        if on is None:
            res.dropped["no_ondemand_price"] += 1
            unpriced.add(o.family)
            continue
        spot = price_of(o, "spot", prices, res.ambiguous)
        res.offers.append(replace(o, price_hourly=on[0], spot_price_hourly=spot[0] if spot else None))
        res.row_source[o.key()] = f"{SOURCE} SKUs {'+'.join(on[1])}"
    if unpriced:
        res.notes.append("not priced (no SKU for a part; rows dropped): " + ", ".join(sorted(unpriced)))
    fetched_at = now.date().isoformat()
    for region in sorted(wanted):
        for disk_type in DISKS.values():
            got = prices.pick("ondemand", ("disk", disk_type), region, res.ambiguous)
            if got is not None:
                res.disks.append(DiskPrice("gcp", region, disk_type, None, "gib", got[0],
                                           f"{SOURCE} SKU {got[1]}", fetched_at))
    return res
