"""AWS's price source for ``trainvm catalog refresh``: the Price List bulk offer files (no credentials).

``GET https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/region_index.json`` names each
region's current offer file (``regions.<code>.currentVersionUrl``, a path ending ``index.json``); the CSV twin
(``index.csv``: 5 metadata lines, then a header) is read as it streams, row by row, keeping only the rows of the
instance types the catalog knows, so memory stays small however large the file (hundreds of MB per region);
a file over MAX_BYTES is an error. Sources: docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/
using-the-aws-price-list-bulk-api.html and reading-the-offer-index.html; the CSV columns as in offer files
published 2017-2025 (column order is not relied on: columns are read by name).

On-demand rows kept (Linux, shared tenancy, no licence or pre-installed software, capacity actually used, in the
Region itself): ``TermType OnDemand``, ``Product Family`` ``"Compute Instance"`` or ``"Compute Instance (bare
metal)"`` (the ``*.metal`` sizes), ``Location Type "AWS Region"`` (a region's file also holds its Local Zones' and
Wavelength Zones' rows, ``AWS Local Zone`` / ``AWS Wavelength Zone``, under the same instance type: never the
Region's price), ``Operating System Linux``, ``Tenancy Shared``,
``License Model "No License required"``, ``Pre Installed S/W NA``, ``CapacityStatus Used``, ``operation
RunInstances`` (``:0002`` Windows, ``:0010`` RHEL, ``:0800`` BYOL are not), ``Unit Hrs``, ``Currency USD``,
price > 0. ``UnusedCapacityReservation`` rows sit under OnDemand too, cheaper: they are dropped. Several rows for
one type: the highest price, reported. The price is regional; the catalog's rows are per AZ and all get it.

Spot prices are not in the Price List (price-changes.html: "doesn't include EC2 Spot Instances"); they come from
``DescribeSpotPriceHistory`` (credentials: boto3's default chain), per region for the known types,
``ProductDescriptions ["Linux/UNIX"]`` and ``StartTime`` now, which returns the price in force per (type, AZ)
(the last change before the start time); the newest per AZ ID wins (``AvailabilityZoneId``, else the account's
zone name mapped by ``DescribeAvailabilityZones``). A (type, AZ) without a spot price has none (``no_spot_price``).
Without credentials this is not asked: a row keeps the current catalog's spot price (rechecked against the new
on-demand price) and says so in its provenance and the notes. Shapes (GPU name and memory:
``DescribeInstanceTypes``) are the catalog's; the file's other instance types (those with GPUs when it has a
``GPU`` column) are handed back in ``SourceResult.extra`` and counted by catalog/discover.py (rows are per AZ:
never placed without the shapes API).

Disks: EBS ``gp3`` (trainvm's boot disk for every profile disk type: registry ``disk_types``), ``Product Family
Storage``, ``Volume API Name gp3``, ``Unit GB-Mo`` -> one ``gib`` row per profile disk type. Instance store is part
of the instance price: no ``local_ssd`` row.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import replace
from datetime import datetime
from typing import IO, TYPE_CHECKING

from provisioner import settings
from provisioner.errors import CloudError, CredentialsError
from provisioner.providers import http
from provisioner.providers.aws.api import AwsApi, AwsCredentialsError
from provisioner.providers.aws.errors import classify
from provisioner.providers.aws.sdk import Ec2Prices
from provisioner.providers.offer import Offer
from provisioner.providers.price_rows import DiskPrice, SourceResult

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

API = "https://pricing.us-east-1.amazonaws.com"
INDEX = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
SOURCE = "AWS Price List bulk API (AmazonEC2 offer file)"
MAX_BYTES = 4 * 2**30
METADATA_LINES = 5
KEEP = {"TermType": "OnDemand", "Location Type": "AWS Region", "Operating System": "Linux", "Tenancy": "Shared",
        "License Model": "No License required", "Pre Installed S/W": "NA",
        "CapacityStatus": "Used", "operation": "RunInstances", "Unit": "Hrs", "Currency": "USD"}
#: the product families of instance rows (the bare-metal sizes have their own)
COMPUTE_FAMILIES = frozenset({"Compute Instance", "Compute Instance (bare metal)"})
EBS = {"TermType": "OnDemand", "Product Family": "Storage", "Location Type": "AWS Region", "Volume API Name": "gp3",
       "Unit": "GB-Mo", "Currency": "USD"}
NEEDED = sorted({*KEEP, *EBS, "Product Family", "Instance Type", "PricePerUnit", "SKU"})
PROFILE_DISK_TYPES = ("standard", "balanced", "ssd")  # all gp3 on AWS


def base_url() -> str:
    return (settings.text("TRAINVM_AWS_PRICES_URL") or API).rstrip("/")


class _Capped(io.RawIOBase):
    """A byte stream that fails past ``cap`` bytes (a bulk file is never read whole, nor without end)."""

    def __init__(self, raw: IO[bytes], cap: int, name: str) -> None:
        self.raw, self.cap, self.name, self.seen = raw, cap, name, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: WriteableBuffer) -> int:
        view = memoryview(b).cast("B")
        data = self.raw.read(len(view))
        self.seen += len(data)
        if self.seen > self.cap:
            raise CloudError(f"{self.name}: larger than {self.cap // 2**20} MiB; not read further")
        view[:len(data)] = data
        return len(data)


def region_files() -> dict[str, str]:
    doc = http.get_json(base_url() + INDEX)
    regions = doc.get("regions")
    if not isinstance(regions, dict):
        raise CloudError(f"{SOURCE}: region_index.json has no 'regions' object")
    return {code: str(r.get("currentVersionUrl", "")) for code, r in regions.items() if isinstance(r, dict)}


def scan(lines: IO[str], types: set[str], name: str,
         others: dict[str, list[tuple[float, str]]] | None = None,
         ) -> tuple[dict[str, list[tuple[float, str]]], list[tuple[float, str]], int]:
    """(instance type -> [(USD/h, SKU)], gp3 [(USD/GiB-month, SKU)], rows with a zero or unreadable price).
    ``others`` gets the same for the GPU types not in ``types`` (every type when the file has no ``GPU`` column)."""
    reader = csv.reader(lines)
    for _ in range(METADATA_LINES):
        next(reader, None)
    header = next(reader, None) or []
    col = {h: i for i, h in enumerate(header)}
    missing = [h for h in NEEDED if h not in col]
    if missing:
        raise CloudError(f"{name}: the offer file has no column {', '.join(missing)}")
    keep = [(col[k], v) for k, v in KEEP.items()]
    ebs = [(col[k], v) for k, v in EBS.items()]
    it_i, price_i, sku_i, fam_i = col["Instance Type"], col["PricePerUnit"], col["SKU"], col["Product Family"]
    gpu_i = col.get("GPU")
    vm: dict[str, list[tuple[float, str]]] = defaultdict(list)
    gp3: list[tuple[float, str]] = []
    bad = 0
    for row in reader:
        if len(row) != len(header):
            continue
        is_vm = row[fam_i] in COMPUTE_FAMILIES and all(row[i] == v for i, v in keep)
        if is_vm and row[it_i] not in types:
            if others is not None and (gpu_i is None or row[gpu_i] not in ("", "0", "NA")):
                try:
                    others.setdefault(row[it_i], []).append((float(row[price_i]), row[sku_i]))
                except ValueError:
                    pass
            continue
        if not is_vm and not all(row[i] == v for i, v in ebs):
            continue
        try:
            price = float(row[price_i])
        except ValueError:
            price = 0.0
        if not price > 0:
            bad += 1
            continue
        (vm[row[it_i]] if is_vm else gp3).append((price, row[sku_i]))
    return vm, gp3, bad


def _pick(cands: list[tuple[float, str]], what: str, ambiguous: list[str]) -> tuple[float, str]:
    best = max(cands)
    distinct = sorted({p for p, _ in cands})
    if len(distinct) > 1:
        ambiguous.append(f"{what}: {len(cands)} rows at {', '.join(f'{p:g}' for p in distinct)}; took {best[0]:g}")
    return best


def ec2_client(region: str) -> Ec2Prices | None:
    """An EC2 client with the user's credentials (boto3's default chain), or None when there are none."""
    try:
        return AwsApi(regions=[region]).ec2(region)  # clients.Ec2 has Ec2Prices' operations
    except (CredentialsError, AwsCredentialsError):
        return None


def spot_prices(client: Ec2Prices, types: set[str], now: datetime) -> dict[tuple[str, str], tuple[float, str]]:
    """(instance type, AZ ID) -> (USD/h, "DescribeSpotPriceHistory <timestamp>") in force at ``now``."""
    try:
        names: dict[str, str] = {}
        newest: dict[tuple[str, str], tuple[datetime, float]] = {}
        pages = client.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=sorted(types), ProductDescriptions=["Linux/UNIX"], StartTime=now)
        for page in pages:
            for p in page.get("SpotPriceHistory", []):
                az_id = p.get("AvailabilityZoneId")
                if not az_id:
                    if not names:
                        names = {z["ZoneName"]: z["ZoneId"] for z in
                                 client.describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"]}
                    az_id = names.get(p.get("AvailabilityZone", ""), "")
                key = (p.get("InstanceType", ""), az_id)
                try:
                    price = float(p.get("SpotPrice", ""))
                except ValueError:
                    continue
                if az_id and price > 0 and (key not in newest or p["Timestamp"] > newest[key][0]):
                    newest[key] = (p["Timestamp"], price)
    except Exception as e:  # noqa: BLE001 - botocore's errors, classified like every AWS call
        raise classify(e) from None
    return {k: (price, f"DescribeSpotPriceHistory {ts:%Y-%m-%dT%H:%M:%SZ}") for k, (ts, price) in newest.items()}


def fetch(known: list[Offer], regions: list[str], now: datetime) -> SourceResult:
    res = SourceResult(offers=[], row_source={}, source=SOURCE, notes=[
        "shapes: the instance types the catalog already knows (DescribeInstanceTypes needs credentials; not asked)"])
    if not regions:
        return res
    no_spot_api = False
    files = region_files()
    fetched_at = now.date().isoformat()
    for region in regions:
        path = files.get(region)
        if not path or not path.endswith("/index.json"):
            raise CloudError(f"{SOURCE}: region_index.json names no offer file for {region}")
        url = base_url() + path.removesuffix("index.json") + "index.csv"
        here = [o for o in known if o.region == region]
        with http.stream(url) as resp:
            text = io.TextIOWrapper(io.BufferedReader(_Capped(resp, MAX_BYTES, url)), encoding="utf-8", newline="")
            others: dict[str, list[tuple[float, str]]] = {}
            vm, gp3, bad = scan(text, {o.instance_type for o in here}, url, others)
        if bad:
            res.dropped["zero_or_missing_price"] += bad
        picked = {t: _pick(c, f"{t} {region}", res.ambiguous) for t, c in sorted(vm.items())}
        client = ec2_client(region) if picked else None
        spot = spot_prices(client, set(picked), now) if client is not None else None
        no_spot_api = no_spot_api or (spot is None and bool(picked))
        for o in here:
            if o.instance_type not in picked:
                res.dropped["no_ondemand_price"] += 1
                continue
            price, sku = picked[o.instance_type]
            if spot is None:
                res.offers.append(replace(o, price_hourly=price))
                res.row_source[o.key()] = (f"{SOURCE} SKU {sku}"
                                           + ("; spot from the previous catalog" if o.spot_price_hourly else ""))
                continue
            s = spot.get((o.instance_type, o.zone or ""))
            res.offers.append(replace(o, price_hourly=price, spot_price_hourly=s[0] if s else None))
            res.row_source[o.key()] = f"{SOURCE} SKU {sku}" + (f"; spot {s[1]}" if s else "")
        for t, cands in sorted(others.items()):  # placed or counted by catalog/discover.py (AWS rows are per AZ)
            if (best := max(cands))[0] > 0:
                res.extra[(region, t)] = (best[0], None, f"{SOURCE} SKU {best[1]}")
        if gp3:
            price, sku = _pick(gp3, f"gp3 {region}", res.ambiguous)
            res.disks.extend(DiskPrice("aws", region, t, None, "gib", price, f"{SOURCE} SKU {sku} (EBS gp3)",
                                       fetched_at) for t in PROFILE_DISK_TYPES)
    res.notes.append("spot: the current catalog's spot prices, rechecked against the new on-demand prices (no AWS "
                     "credentials for DescribeSpotPriceHistory)" if no_spot_api else
                     "spot: DescribeSpotPriceHistory (Linux/UNIX, in force now, per AZ)")
    return res
