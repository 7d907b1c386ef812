#!/usr/bin/env python3
"""Build trainvm's embedded catalog (provisioner/catalog/data/) from the offer snapshot.

    python scripts/build_catalog.py [SNAPSHOT_DIR] [--out DIR] [--check]

SNAPSHOT_DIR defaults to scripts/catalog-snapshot (in the repository: the SkyPilot v8 snapshot the embedded
catalog is built from, its CSV files gzipped; its README.md says what it holds). A folder of plain CSV files
works too.
The output is deterministic (sorted rows, no timestamps): ``--check`` rebuilds into a temporary
folder and exits 1 when the committed files differ. Every correction and flag is counted in
catalog.json's ``stats`` and explained in the generated data/README.md.
"""

from __future__ import annotations

import argparse
import csv
import filecmp
import hashlib
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from provisioner.catalog import families as F  # noqa: E402
from provisioner.catalog.disks import DISKS_FILE, DiskPrices, read_disk_prices  # noqa: E402
from provisioner.catalog.integrity import SUSPECT_GAP, spot_check, suspect_low  # noqa: E402
from provisioner.catalog.models import COLUMNS, EXCLUDING_FLAGS, SCHEMA_VERSION, Offer  # noqa: E402
from provisioner.catalog.storage import MANIFEST, write_catalog  # noqa: E402
from provisioner.providers.aws import families as AWS  # noqa: E402
from provisioner.providers.azure import families as AZ  # noqa: E402
from provisioner.providers.gcp import families as G  # noqa: E402

DEFAULT_SRC = REPO / "scripts" / "catalog-snapshot"
DEFAULT_OUT = REPO / "provisioner" / "catalog" / "data"
SNAPSHOT_DATE = "2026-09-23"
UPSTREAM_COMMITS = {"gcp": "006059e0", "aws": "00148f2a", "azure": "20291d7e"}
SOURCE = ("SkyPilot catalog v8 snapshot of public list prices "
          "(skypilot-org/skypilot-catalog, catalogs/v8)")
INPUT_COLUMNS = ["cloud", "instance_type", "gpu_name", "gpu_count", "region", "zone", "vcpus",
                 "memory_gib", "gpu_memory_gib", "price_hourly", "spot_price_hourly", "gpu_attach",
                 "host_price_hourly", "gpu_price_hourly", "arch_or_generation", "notes"]


class Build:
    def __init__(self) -> None:
        self.dropped: dict[str, Counter[str]] = defaultdict(Counter)
        self.corrected: dict[str, Counter[str]] = defaultdict(Counter)
        self.input_rows: Counter[str] = Counter()

    def drop(self, cloud: str, why: str) -> None:
        self.dropped[cloud][why] += 1

    def fix(self, cloud: str, what: str) -> None:
        self.corrected[cloud][what] += 1


def snapshot_file(src: Path, cloud: str) -> Path:
    """``CLOUD.csv`` in the snapshot folder, or ``CLOUD.csv.gz`` (as committed in scripts/catalog-snapshot)."""
    plain = src / f"{cloud}.csv"
    return plain if plain.is_file() or not (src / f"{cloud}.csv.gz").is_file() else src / f"{cloud}.csv.gz"


def read_rows(path: Path) -> list[dict[str, str]]:
    import io

    with io.StringIO(read_text(path), newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != INPUT_COLUMNS:
            raise SystemExit(f"{path}: unexpected columns {reader.fieldnames}")
        rows = []
        for lineno, row in enumerate(reader, start=2):
            row["_line"] = f"{path.name.removesuffix('.gz')}:{lineno}"
            rows.append(row)
        return rows


def _f(row: dict[str, str], col: str) -> float | None:
    v = row[col].strip()
    return float(v) if v else None


def _prices(row: dict[str, str], b: Build,
            cloud: str) -> tuple[float, float | None, list[str]] | None:
    """On-demand and spot price with the spot checks shared by every cloud (None: drop row)."""
    price = _f(row, "price_hourly")
    if price is None or price <= 0:
        b.drop(cloud, "no_ondemand_price")
        return None
    spot, flags = spot_check(price, _f(row, "spot_price_hourly"),
                             noted_above="spot price > on-demand" in row["notes"])
    return price, spot, flags


def _memory(row: dict[str, str], nominal: float, b: Build, cloud: str, tolerance: float) -> float:
    src = _f(row, "gpu_memory_gib") or 0.0
    if abs(src - nominal) > tolerance * nominal:
        raise SystemExit(f"{row['_line']}: GPU memory {src} GiB far from nominal {nominal} GiB")
    if round(src, 2) != nominal:
        b.fix(cloud, "gpu_memory_nominal")
    return nominal


def convert_gcp(rows: list[dict[str, str]], b: Build) -> list[Offer]:
    gpu_rows = []
    for r in rows:
        if int(r["gpu_count"]) == 0:
            b.drop("gcp", "cpu_only")
        else:
            gpu_rows.append(r)
    by_gpu: dict[str, dict[int, float]] = defaultdict(dict)
    for i, r in enumerate(gpu_rows):
        by_gpu[r["gpu_name"]][i] = float(r["gpu_price_hourly"]) / int(r["gpu_count"])
    suspect = set().union(*(suspect_low(p) for p in by_gpu.values()))
    out = []
    for i, r in enumerate(gpu_rows):
        mt, zone, count = r["instance_type"], r["zone"], int(r["gpu_count"])
        gpu = F.canonical_gpu(r["gpu_name"])
        fam_name = G.gce_family(mt)
        fam = G.GCE_FAMILIES.get(fam_name)
        if fam is None or fam.gpu_attach != r["gpu_attach"]:
            raise SystemExit(f"{r['_line']}: unknown GCE family or attach mode for {mt}")
        vcpus, mem = float(r["vcpus"]), round(float(r["memory_gib"]), 2)
        if mem != float(r["memory_gib"]):
            b.fix("gcp", "memory_float_artifact")
        if fam.gpu_attach == "attachable":
            lim = G.n1_gpu_limits(gpu, count, zone)
            if lim is None:
                raise SystemExit(f"{r['_line']}: {gpu} x{count} cannot be attached to N1")
            if vcpus > lim[0] or mem > lim[1]:
                b.drop("gcp", "n1_host_over_gpu_limit")
                continue
        if not zone.startswith(r["region"] + "-"):
            raise SystemExit(f"{r['_line']}: zone {zone} is not in region {r['region']}")
        prices = _prices(r, b, "gcp")
        if prices is None:
            continue
        price, spot, flags = prices
        if float(r["host_price_hourly"] or 0) <= 0:
            flags.append("host_price_zero")
        if i in suspect:
            flags.append("suspect_price")
        out.append(Offer(
            cloud="gcp", instance_type=mt, family=fam_name, gpu_name=gpu, gpu_count=count,
            gpu_memory_gib=_memory(r, F.GPU_MEMORY_GIB[gpu], b, "gcp", 0.01), vcpus=vcpus,
            memory_gib=mem, region=r["region"], zone=zone, price_hourly=price,
            spot_price_hourly=spot, gpu_attach=fam.gpu_attach, disk_types=fam.disk_types,
            local_nvme_max_gib=G.gce_local_ssd_gib(mt), arch="x86_64", hyperv_gen="",
            flags=tuple(sorted(flags))))
    return out


def convert_azure(rows: list[dict[str, str]], b: Build) -> list[Offer]:
    gpu_rows = [r for r in rows if int(r["gpu_count"]) > 0]
    for _ in range(len(rows) - len(gpu_rows)):
        b.drop("azure", "cpu_only")
    suspect = _suspect_by_type(gpu_rows)
    out = []
    for i, r in enumerate(gpu_rows):
        size = r["instance_type"]
        series = AZ.azure_series(size)
        if series is None or series.gpu_name != F.canonical_gpu(r["gpu_name"]):
            raise SystemExit(f"{r['_line']}: no Azure series fact for {size} ({r['gpu_name']})")
        count = int(r["gpu_count"])
        flags: list[str] = []
        if size in AZ.AZURE_GPU_COUNT_FIXES and count != AZ.AZURE_GPU_COUNT_FIXES[size]:
            count = AZ.AZURE_GPU_COUNT_FIXES[size]
            flags.append("gpu_count_corrected")
            b.fix("azure", "gpu_count")
        mem = series.gpu_memory_gib
        if size in AZ.AZURE_FRACTIONAL:
            mem = round(mem * AZ.AZURE_FRACTIONAL[size], 2)
            flags.append("fractional_gpu")
        if series.name == "NCads_H100_v5":
            flags.append("h100_nvl")
        if AZ.azure_retirement(size):
            flags.append("retired_size")
        if r["zone"]:
            raise SystemExit(f"{r['_line']}: Azure offers are regional, found zone {r['zone']}")
        prices = _prices(r, b, "azure")
        if prices is None:
            continue
        price, spot, pflags = prices
        if i in suspect:
            flags.append("suspect_price")
        gens = "|".join(g.strip().lstrip("V") for g in r["arch_or_generation"].split(",") if g)
        out.append(Offer(
            cloud="azure", instance_type=size, family=series.name, gpu_name=series.gpu_name,
            gpu_count=count, gpu_memory_gib=_memory(r, mem, b, "azure", 0.01),
            vcpus=float(r["vcpus"]), memory_gib=round(float(r["memory_gib"]), 2),
            region=r["region"], zone=None, price_hourly=price, spot_price_hourly=spot,
            gpu_attach="bundled", disk_types=AZ.azure_disk_types(size),
            local_nvme_max_gib=AZ.AZURE_LOCAL_NVME_GIB.get(size, 0), arch="x86_64",
            hyperv_gen=gens, flags=tuple(sorted(flags + pflags))))
    return out


def convert_aws(rows: list[dict[str, str]], b: Build) -> list[Offer]:
    gpu_rows = [r for r in rows if int(r["gpu_count"]) > 0]
    for _ in range(len(rows) - len(gpu_rows)):
        b.drop("aws", "cpu_only")
    suspect = _suspect_by_type(gpu_rows)
    out = []
    for i, r in enumerate(gpu_rows):
        it, zone, region = r["instance_type"], r["zone"], r["region"]
        gpu = F.canonical_gpu(r["gpu_name"])
        if not aws_zone_in_region(zone, region):
            raise SystemExit(f"{r['_line']}: AZ ID {zone} does not belong to {region}")
        prices = _prices(r, b, "aws")
        if prices is None:
            continue
        price, spot, flags = prices
        if len(zone.split("-")) > 2:
            flags.append("local_zone")
        if i in suspect:
            flags.append("suspect_price")
        arch = r["arch_or_generation"]
        out.append(Offer(
            cloud="aws", instance_type=it, family=it.split(".")[0], gpu_name=gpu,
            gpu_count=int(r["gpu_count"]),
            gpu_memory_gib=_memory(r, F.GPU_MEMORY_GIB[gpu], b, "aws", 0.08),
            vcpus=float(r["vcpus"]), memory_gib=round(float(r["memory_gib"]), 2), region=region,
            zone=zone, price_hourly=price, spot_price_hourly=spot, gpu_attach="bundled",
            disk_types=F.DISK_TYPES, local_nvme_max_gib=AWS.AWS_LOCAL_NVME_GIB.get(it, 0),
            arch=arch, hyperv_gen="", flags=tuple(sorted(flags))))
    return out


def _suspect_by_type(rows: list[dict[str, str]]) -> set[int]:
    by_type: dict[str, dict[int, float]] = defaultdict(dict)
    for i, r in enumerate(rows):
        by_type[r["instance_type"]][i] = float(r["price_hourly"] or 0) or 1e-9
    return set().union(*(suspect_low(p) for p in by_type.values()))


_DIRS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
         "northeast": "ne", "southeast": "se", "northwest": "nw", "southwest": "sw"}


def aws_zone_in_region(az_id: str, region: str) -> bool:
    """``use1-az1`` / ``usw2-lax1-az1`` belong to us-east-1 / us-west-2 (AZ ID prefixes)."""
    geo, direction, num = region.split("-")
    return az_id.split("-")[0] == f"{geo}{_DIRS.get(direction, '?')}{num}"


def read_text(path: Path) -> str:
    import gzip

    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")


def sha256(p: Path) -> str:
    """Of the CSV text (also of a gzipped one: the provenance names the data, not its packing)."""
    return hashlib.sha256(read_text(p).encode("utf-8")).hexdigest()


def disk_prices(src: Path) -> DiskPrices | None:
    """The snapshot's disks.csv (disk prices by hand from the published price pages, each row with its source
    and date), checked by the catalog's own reader and carried into the catalog as is (sorted). None when the
    snapshot folder has none: the catalog then prices no disk (every disk price unknown)."""
    p = src / DISKS_FILE
    return read_disk_prices(p) if p.is_file() else None


def build(src: Path, out: Path) -> dict[str, Any]:
    b = Build()
    offers: list[Offer] = []
    convert = {"gcp": convert_gcp, "azure": convert_azure, "aws": convert_aws}
    for cloud in F.CLOUDS:
        rows = read_rows(snapshot_file(src, cloud))
        b.input_rows[cloud] = len(rows)
        offers.extend(convert[cloud](rows, b))
    keys = Counter((o.cloud, o.region, o.zone, o.instance_type, o.gpu_name, o.gpu_count)
                   for o in offers)
    if any(n > 1 for n in keys.values()):
        raise SystemExit("duplicate offers after conversion")
    flags: dict[str, Counter[str]] = defaultdict(Counter)
    rows_out: Counter[str] = Counter()
    plannable: Counter[str] = Counter()
    for o in offers:
        rows_out[o.cloud] += 1
        flags[o.cloud].update(o.flags)
        plannable[o.cloud] += o.excluded_by() is None
    stats = {
        "input_rows": dict(b.input_rows),
        "rows": dict(rows_out),
        "plannable_rows": dict(plannable),
        "dropped": {c: dict(sorted(v.items())) for c, v in sorted(b.dropped.items())},
        "corrected": {c: dict(sorted(v.items())) for c, v in sorted(b.corrected.items())},
        "flags": {c: dict(sorted(v.items())) for c, v in sorted(flags.items())},
    }
    prov = {
        "upstream": "skypilot-org/skypilot-catalog catalogs/v8",
        "upstream_commits": UPSTREAM_COMMITS,
        "date_note": "inferred: an image in the same upstream catalog is dated " + SNAPSHOT_DATE,
        "generated_by": "scripts/build_catalog.py",
        "input_sha256": {f"{c}.csv": sha256(snapshot_file(src, c)) for c in F.CLOUDS},
        "suspect_gap": SUSPECT_GAP,
    }
    disks = disk_prices(src)
    if disks is not None:
        prov["input_sha256"][DISKS_FILE] = sha256(src / DISKS_FILE)
        prov["disk_prices"] = {"file": DISKS_FILE, "rows": len(disks.rows),
                               "fetched_at": sorted({r.fetched_at.isoformat() for r in disks.rows}),
                               "source": "published list prices by hand, each row's source column names its page"}
    write_catalog(out, offers, source=SOURCE, catalog_date=SNAPSHOT_DATE, extra_provenance=prov, stats=stats,
                  disk_prices=None if disks is None else disks.rows)
    (out / "README.md").write_text(render_readme(stats, disks), encoding="utf-8")
    return stats


def _count(stats: dict[str, Any], section: str, key: str, clouds: Iterable[str] = F.CLOUDS) -> int:
    return sum(stats[section].get(c, {}).get(key, 0) for c in clouds)


def render_readme(s: dict[str, Any], disks: DiskPrices | None = None) -> str:
    rows = " / ".join(f"{c} {s['rows'].get(c, 0)}" for c in F.CLOUDS)
    plannable = " / ".join(f"{c} {s['plannable_rows'].get(c, 0)}" for c in F.CLOUDS)
    excl = ", ".join(f"`{f}` → `{r}`" for f, r in EXCLUDING_FLAGS.items())
    c = lambda sec, k, cl=F.CLOUDS: _count(s, sec, k, cl)  # noqa: E731
    return f"""# Embedded offer catalog (generated — do not edit)

Generated by `scripts/build_catalog.py` from `scripts/catalog-snapshot/` (in the repository).
Source: {SOURCE}; GCP at {UPSTREAM_COMMITS['gcp']}, AWS at {UPSTREAM_COMMITS['aws']}, Azure at
{UPSTREAM_COMMITS['azure']}. Snapshot date **{SNAPSHOT_DATE}** (inferred; plans warn when the
catalog is older than 90 days). Rebuild with `python scripts/build_catalog.py`; `--check` verifies
that the committed files are up to date.
`TRAINVM_CATALOG=/some/folder` makes trainvm read another folder in this format instead.

## Format (schema_version {SCHEMA_VERSION})
`catalog.json` holds `schema_version`, the exact `columns` list, `files`, `provenance` (`source`,
`date`, upstream commits, input SHA-256s) and `stats`. Each CSV's header equals `columns`:
{', '.join(f'`{x}`' for x in COLUMNS)}.
One row = one offer (instance type × region × zone). Prices are USD/h for the whole VM (GCE = host
+ GPUs); `spot_price_hourly` is empty when unknown or unreliable; `zone` is empty where the offer
is regional (Azure); `disk_types` uses the profile vocabulary `standard|balanced|ssd`;
`local_nvme_max_gib` is the largest local NVMe scratch the shape can have (0 = none);
`flags` are `;`-separated.

Rows: {rows}; without an excluding flag: {plannable}.
Whether trainvm can create a VM on a cloud is not stored here: the planner asks the cloud registry
(`provisioner/providers/registry.py`) at plan time; offers of other clouds are shown as "not provisionable yet".

## Decisions on the snapshot's known defects
Rows with an excluding flag stay in the files (visible in `catalog show`, and in `plan --explain`
as near misses) but the planner rejects them: {excl}. Other flags are informational.

| defect | decision | rows |
|---|---|---|
| CPU-only rows (`gpu_count` 0) | dropped: trainvm only plans GPU VMs | {c('dropped', 'cpu_only')} |
| Rows without an on-demand price (or ≤ 0) | dropped: nothing to rank by | {c('dropped', 'no_ondemand_price')} |
| Rows without a spot price (GCP GPU spot missing, Azure `_Promo`, AWS) | kept, `spot_price_hourly` empty, flag `no_spot_price`; a spot plan rejects them as `spot_unavailable` | {c('flags', 'no_spot_price')} |
| GCP `a4-highgpu-8g` host price 0.0 (whole price in the GPU part) | flag `host_price_zero` → excluded (`flagged_price`): the total cannot be trusted to include the host | {c('flags', 'host_price_zero', ['gcp'])} |
| GCP GPU spot price above on-demand | spot price dropped, flag `spot_above_ondemand` (every such row is also in a suspect low-price region) | {c('flags', 'spot_above_ondemand', ['gcp'])} |
| Spot equal to on-demand (AWS, Azure H100) | spot price treated as unknown, flag `spot_equals_ondemand` | {c('flags', 'spot_equals_ondemand')} |
| Suspiciously low regional GPU prices (GCP H100/H100-MEGA/H200/B200/A100/A100-80GB ≈2× lower in some regions) | flag `suspect_price` → excluded (`flagged_price`). Rule: per GPU (GCP: GPU part per GPU; Azure/AWS: offer price per instance type) sort the distinct regional prices; if the largest step between neighbours is ≥ {SUSPECT_GAP}×, every price below the step is suspect (legitimate spreads ≤ 1.30×, defective ≥ 1.40×) | {c('flags', 'suspect_price')} |
| Azure `Standard_ND96isr_H100_v5` listed with 12 GPUs | corrected to 8 (Azure size table), flag `gpu_count_corrected` | {c('corrected', 'gpu_count', ['azure'])} |
| Azure fractional MI25 sizes listed as 1 GPU | `gpu_memory_gib` = the slice (2/4/8 GiB), flag `fractional_gpu` → excluded | {c('flags', 'fractional_gpu', ['azure'])} |
| Azure sizes retired by Microsoft (NC/NC_Promo K80 and NV/NV_Promo M60: 2023-09-06; NC24rs_v3: 2025-03-31; NC6s/12s/24s_v3: 2025-09-30) | flag `retired_size` → excluded (`retired`) | {c('flags', 'retired_size', ['azure'])} |
| GCP P100×4 hosts above 64 vCPUs / 208 GiB in us-east1-c, europe-west1-b/d | dropped: GCE rejects them there | {c('dropped', 'n1_host_over_gpu_limit', ['gcp'])} |
| GCP n1-highcpu float artifacts (14.400390625) | memory rounded to 2 decimals | {c('corrected', 'memory_float_artifact', ['gcp'])} |
| AWS usable GPU memory (L4/A10G 22.35, L40S 44.70 GiB) | stored as nominal 24/48 GiB so `min_gpu_memory_gib` means the same on every cloud | {c('corrected', 'gpu_memory_nominal', ['aws'])} |
| Azure H100 NVL (NCads_H100_v5) | `gpu_name` H100 with 94 GiB, flag `h100_nvl` (informational) | {c('flags', 'h100_nvl', ['azure'])} |
| AWS Local Zones (`usw2-lax1-az1`) | kept, flag `local_zone` (informational) | {c('flags', 'local_zone', ['aws'])} |

GCP `host below SkyPilot default` notes are not flags: those N1 hosts are valid on GCE; the
planner's per-GPU `min_vcpus`/`min_memory_gib` defaults keep them out when a profile omits sizes.

## Offer semantics
- GPU names are trainvm's canonical names: `H100-MEGA` → `H100` (instance type `a3-megagpu-8g`
  keeps the distinction), `Radeon MI25` → `MI25`, `T4g` → `T4G`.
- GCE N1 + T4/V100/P100/P4 rows are `gpu_attach=attachable` and respect GCE's per-GPU-count
  vCPU/RAM maxima (`providers/gcp/families.py` `N1_GPU_LIMITS`); A2/A3/A4/G2 bundle their GPUs.
- Disk types per GCE family (`providers/gcp/families.py` `GCE_FAMILIES`): N1 and A2 Standard all three; A2 Ultra, A3
  High/Mega/Edge and G2 have no pd-standard; A3 Ultra and A4 accept Hyperdisk only, mapped as
  `balanced`/`ssd` → `hyperdisk-balanced` (no `standard`). Azure: Standard HDD/SSD everywhere,
  Premium SSD (`ssd`) only on premium-capable (`s`) sizes.
- Local NVMe: GCE Local SSD per machine type (375 GiB disks; N1 up to 24 disks; `-nolssd` none);
  Azure NVMe sizes from the size tables; AWS instance store.
- Azure GPU memory comes from the per-series lookup (`providers/azure/families.py` `AZURE_SERIES`).

{_disks_text(disks)}
## Stats
```
{_stats_text(s)}
```
"""


def _disks_text(disks: DiskPrices | None) -> str:
    if not disks:
        return ""
    per = Counter((r.cloud, r.disk_type) for r in disks.rows)
    kinds = "; ".join(f"{c} {k} ({n} row{'s' if n > 1 else ''})" for (c, k), n in per.items())
    dates = ", ".join(sorted({r.fetched_at.isoformat() for r in disks.rows}))
    return f"""## Disk prices (`{DISKS_FILE}`)
Header `cloud,region,disk_type,size_max_gib,unit,price_month,source,fetched_at` (`trainvm catalog refresh`
writes the same file). `disk_type` is the profile's boot-disk vocabulary plus `local_ssd` and `image` (a baked
image's stored GiB per month, times the copies its cloud bills: docs/bake.md); `unit` `gib` = USD per
GiB-month, `disk` = USD per disk-month for a disk up to `size_max_gib` (Azure's tiers: a disk is billed at the
smallest tier at least its size); `region` `*` = every region of the cloud not listed. Rows: {kinds}.
Recorded {dates} by hand from the pages each row's `source` names (`scripts/catalog-snapshot/disks.csv`), at the
US reference region (GCE us-central1, Azure East US, AWS us-east-1) for every region (`*`): other regions
cost up to about a third more. Cross-checked: GCE's page's worked example (200 GB pd-standard $8.00, pd-ssd
$34.00 a month); Azure P15 $38.01 and P30 $135.17 (East US Retail Prices API rows recorded in public test
fixtures). `image` rows: the basis from each cloud's page (GCE image storage; AWS standard EBS snapshot
storage per region's copy; Azure gallery replicas billed as Standard HDD snapshots), the number cross-checked
with infracost's price-API golden tests (each row's source says which); `catalog refresh` writes no `image`
row (unknown after a refresh). The others are as recorded; `catalog refresh` replaces them with the price APIs'
numbers.
Not in the table, so shown as unknown: AWS `ssd` (gp3 with provisioned IOPS and throughput: its price depends
on them, not only on the size), GCE Hyperdisk (A3 Ultra, A4 boot disks), the Local SSD that A2 Ultra, A3 and
A4 bring with the machine type. `local_ssd` at 0 (AWS instance store, Azure local NVMe) is part of the
instance price, as the row's source says. Standard HDD/SSD transactions (Azure) are not priced.
"""


def _stats_text(s: dict[str, Any]) -> str:
    lines = []
    for sec in ("input_rows", "rows", "plannable_rows"):
        lines.append(f"{sec}: " + ", ".join(f"{c}={s[sec].get(c, 0)}" for c in F.CLOUDS))
    for sec in ("dropped", "corrected", "flags"):
        for cloud, counts in s[sec].items():
            lines.append(f"{sec}.{cloud}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="fail when --out is not up to date")
    args = ap.parse_args(argv)
    missing = [c for c in F.CLOUDS if not snapshot_file(args.src, c).is_file()]
    if not args.src.is_dir() or missing:
        print(f"snapshot folder {args.src}: no {', '.join(f'{c}.csv' for c in missing) or 'such folder'} "
              "(the default, scripts/catalog-snapshot, is in the repository)", file=sys.stderr)
        return 2
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            build(args.src, Path(tmp))
            names = sorted(p.name for p in Path(tmp).iterdir())
            _, mismatch, errors = filecmp.cmpfiles(args.out, tmp, names, shallow=False)
            if mismatch or errors:
                print(f"out of date: {', '.join(mismatch + errors)}", file=sys.stderr)
                return 1
        print(f"{args.out} is up to date")
        return 0
    stats = build(args.src, args.out)
    rows = ", ".join(f"{c} {n}" for c, n in stats["rows"].items())
    print(f"wrote {args.out}/{MANIFEST}: {rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
