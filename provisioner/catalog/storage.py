"""Reading and writing catalog folders.

A catalog folder holds ``catalog.json`` (schema version, column list, file list, provenance) and
one CSV per cloud whose header equals the column list. The embedded snapshot lives in
``provisioner/catalog/data/`` (schema 2); ``trainvm catalog refresh`` writes schema 3 (schema 2's
columns plus per-row ``source``/``fetched_at``) under the user's cache (``refreshed_dir()``);
``TRAINVM_CATALOG`` names another folder in either format.
Which folder: TRAINVM_CATALOG, else the refreshed catalog when it loads, else the embedded one.
Loading uses the csv module only (no pandas): the embedded data loads in a few tens of ms.
"""

from __future__ import annotations

import csv
import json
from collections import deque
from dataclasses import fields, replace
from datetime import date
from itertools import repeat
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from provisioner import hooks, settings
from provisioner.cache import cache_dir
from provisioner.cache import cached as disk_cached
from provisioner.catalog import families as F
from provisioner.catalog.disks import DISKS_FILE, DiskPrice, read_disk_prices, write_disk_prices
from provisioner.catalog.families import ARCHES, CLOUDS, DISK_TYPES
from provisioner.catalog.models import (
    COLUMNS,
    PROVENANCE_COLUMNS,
    SCHEMA_VERSION,
    SCHEMA_WITH_PROVENANCE,
    STALE_AFTER_DAYS,
    Catalog,
    CatalogError,
    Offer,
)

ENV_VAR = "TRAINVM_CATALOG"
MANIFEST = "catalog.json"
EMBEDDED_DIR = Path(__file__).resolve().parent / "data"

_CACHE: dict[tuple[Any, ...], Catalog] = {}


REFRESHED = "refreshed"
#: the file in the refreshed-catalog folder that names the current generation (replaced atomically)
POINTER = "CURRENT"


def refreshed_root() -> Path:
    """Where ``catalog refresh`` keeps its catalogs: ``$XDG_CACHE_HOME/trainvm/catalog`` (~/.cache/...)."""
    return cache_dir() / "catalog"


def refreshed_dir() -> Path | None:
    """The current refreshed catalog folder, or None when there is none."""
    root = refreshed_root()
    try:
        name = (root / POINTER).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not name or "/" in name or name.startswith("."):
        return None
    return root / name


def catalog_dir(folder: Path | str | None = None) -> tuple[Path, str]:
    """The folder to read and where that choice came from (argument, env var, refreshed or embedded)."""
    if folder is not None:
        return Path(folder), "argument"
    env = settings.text(ENV_VAR)
    if env:
        return Path(env).expanduser(), ENV_VAR
    refreshed = refreshed_dir()
    if refreshed is not None:
        return refreshed, REFRESHED
    return EMBEDDED_DIR, "embedded"


def load_catalog(folder: Path | str | None = None) -> Catalog:
    """Load a catalog folder (default: ``$TRAINVM_CATALOG``, else the refreshed catalog, else the embedded snapshot).

    Raises CatalogError (naming the file and line) for a missing folder or manifest, an
    unsupported schema version, a column list that differs from this trainvm's, or a bad row.
    A refreshed catalog that does not load is passed over for the embedded one (the plan says so).
    Results are cached per folder and file modification times.
    """
    path, origin = catalog_dir(folder)
    if origin == REFRESHED:
        try:
            return _load(path, origin)
        except CatalogError as e:
            return replace(_load(EMBEDDED_DIR, "embedded"),
                           note=f"the refreshed catalog was not used ({e}); using the embedded one")
    return _load(path, origin)


def _load(path: Path, origin: str) -> Catalog:
    where = f" (from {ENV_VAR})" if origin == ENV_VAR else ""
    if not path.is_dir():
        raise CatalogError(f"catalog folder {path}{where} does not exist or is not a folder")
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise CatalogError(f"{manifest_path}{where}: missing; a catalog folder needs {MANIFEST} "
                           f"(schema_version, columns, files, provenance) next to its CSV files")
    manifest = _read_manifest(manifest_path)
    listed = [path / name for name in manifest["files"]]
    files = [p for p in listed if p.name != DISKS_FILE]  # offer CSVs; disks.csv holds disk prices
    try:
        sig = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size)
                    for p in [manifest_path, *listed])
    except FileNotFoundError as e:
        raise CatalogError(
            f"{manifest_path}: lists {Path(e.filename).name}, which is missing") from None
    key = (str(path.resolve()), origin, sig)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    def parse() -> list[tuple[Any, ...]]:  # plain tuples unpickle ~10x faster than dataclasses
        interned: dict[str, Any] = {}
        return [astuple_fast(o) for f in files
                for o in _read_csv(f, interned, manifest["schema_version"])]

    offers = offers_from_rows(disk_cached("catalog", [manifest_path, *files], parse))
    prov = manifest["provenance"]
    disks = [p for p in listed if p.name == DISKS_FILE]
    catalog = Catalog(offers=offers, source=str(prov["source"]), date=prov["_date"],
                      schema_version=manifest["schema_version"], path=path,
                      provenance={k: v for k, v in prov.items() if k != "_date"}, origin=origin,
                      stale_after_days=Catalog.stale_after_days)
    if origin != "embedded":
        catalog = replace(catalog, stale_after_days=catalog.stale_allowance(catalog_stale_days()))
    if disks:
        catalog = replace(catalog, disk_prices=read_disk_prices(disks[0]))
    _CACHE.clear()  # keep one catalog: the CLI loads one per process, tests switch folders
    _CACHE[key] = catalog
    return catalog


_FIELDS = tuple(f.name for f in fields(Offer))


def cloud_regions(cloud: str) -> list[str]:
    """The regions of ``cloud``'s rows in the catalog (``load_catalog()``): where trainvm can create its VMs, hence
    where a provider that lists region by region looks for them (``providers.get_provider(candidate_regions=...)``)."""
    return sorted({o.region for o in load_catalog().offers if o.cloud == cloud})


def astuple_fast(o: Offer) -> tuple[Any, ...]:
    return tuple(getattr(o, n) for n in _FIELDS)


def offers_from_rows(rows: Sequence[tuple[Any, ...]]) -> tuple[Offer, ...]:
    """``tuple(Offer(*row) for row in rows)``, field by field: each slot of every offer is set by its descriptor,
    driven by ``map`` (no Python call per offer). A frozen dataclass's ``__init__`` goes through
    ``object.__setattr__`` once per field, 18 Python-level calls per offer: about half the time for the 7,151 embedded
    offers (issue 26). Offer has no ``__post_init__``; if it gains one, this falls back to the constructor."""
    if hasattr(Offer, "__post_init__"):
        return tuple(Offer(*row) for row in rows)
    offers = list(map(object.__new__, repeat(Offer, len(rows))))
    for name, column in zip(_FIELDS, zip(*rows)):
        deque(map(Offer.__dict__[name].__set__, offers, column), maxlen=0)
    return tuple(offers)


def row_provenance(catalog: Catalog) -> dict[tuple[Any, ...], tuple[str, str]]:
    """Offer.key() -> (source, fetched_at) of a schema-3 folder's rows (read again: loading drops them); a
    schema-2 catalog's rows all come from its manifest's source and date."""
    out: dict[tuple[Any, ...], tuple[str, str]] = {}
    if catalog.schema_version != SCHEMA_WITH_PROVENANCE:
        return out
    manifest = _read_manifest(catalog.path / MANIFEST)
    for name in manifest["files"]:
        if name == DISKS_FILE:  # disk prices carry their own source and date
            continue
        with (catalog.path / name).open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            next(reader, None)
            for row in reader:
                key = (row[0], row[8], row[9], row[1], row[3], int(row[4]))
                out[key] = (row[18], row[19])
    return out


def catalog_stale_days() -> int:
    return STALE_AFTER_DAYS


def columns_of(schema_version: int) -> tuple[str, ...]:
    return COLUMNS + PROVENANCE_COLUMNS if schema_version == SCHEMA_WITH_PROVENANCE else COLUMNS


def _read_manifest(p: Path) -> dict[str, Any]:
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CatalogError(f"{p}: not readable JSON ({e})") from None
    if not isinstance(m, dict):
        raise CatalogError(f"{p}: expected a JSON object")
    version = m.get("schema_version")
    if version not in (SCHEMA_VERSION, SCHEMA_WITH_PROVENANCE):
        raise CatalogError(f"{p}: schema_version {version!r} is not supported (this trainvm reads "
                           f"schema_version {SCHEMA_VERSION} and {SCHEMA_WITH_PROVENANCE})")
    cols = m.get("columns")
    want = columns_of(version)
    if cols != list(want):
        raise CatalogError(f"{p}: columns differ from schema {version}: "
                           f"{_col_diff(cols, want)}; expected {', '.join(want)}")
    files = m.get("files")
    if not (isinstance(files, list) and files and all(isinstance(x, str) and "/" not in x
                                                     and x.endswith(".csv") for x in files)):
        raise CatalogError(f"{p}: 'files' must be a non-empty list of CSV file names in the folder")
    prov = m.get("provenance")
    if not isinstance(prov, dict) or not prov.get("source") or not prov.get("date"):
        raise CatalogError(f"{p}: 'provenance' needs at least 'source' and 'date' (YYYY-MM-DD)")
    try:
        prov["_date"] = date.fromisoformat(str(prov["date"]))
    except ValueError:
        raise CatalogError(f"{p}: provenance.date {prov['date']!r} is not YYYY-MM-DD") from None
    return m


def _col_diff(cols: Any, want: tuple[str, ...] = COLUMNS) -> str:
    if not isinstance(cols, list):
        return "'columns' is missing or not a list"
    missing = [c for c in want if c not in cols]
    extra = [c for c in cols if c not in want]
    parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
        [f"unknown {', '.join(map(str, extra))}"] if extra else [])
    return "; ".join(parts) or "same names in another order"


def _read_csv(p: Path, interned: dict[str, Any], schema_version: int = SCHEMA_VERSION) -> list[Offer]:
    try:
        fh = p.open(newline="", encoding="utf-8")
    except OSError as e:
        raise CatalogError(f"{p}: cannot read ({e.strerror})") from None
    out: list[Offer] = []
    with fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        want = columns_of(schema_version)
        if header != list(want):
            raise CatalogError(f"{p}:1: header differs from the manifest's columns: "
                               f"{_col_diff(header, want)}")
        ncols = len(want)
        s = interned.setdefault
        disks_ok = set(DISK_TYPES)
        for lineno, row in enumerate(reader, start=2):
            if len(row) != ncols:
                raise CatalogError(f"{p}:{lineno}: {len(row)} fields, expected {ncols}")
            (cloud, it, fam, gpu, gc, gm, vc, mem, region, zone, price, spot, attach, disks,
             nvme, arch, hv, flags) = row[:18]  # schema 3: + source, fetched_at (not kept in memory)
            try:
                disk_t = interned.get("d:" + disks)
                if disk_t is None:
                    disk_t = tuple(disks.split("|")) if disks else ()
                    if not set(disk_t) <= disks_ok:
                        raise ValueError(f"disk_types {disks!r}: allowed {'|'.join(DISK_TYPES)}")
                    interned["d:" + disks] = disk_t
                flag_t = interned.get("f:" + flags)
                if flag_t is None:
                    flag_t = interned["f:" + flags] = tuple(flags.split(";")) if flags else ()
                o = Offer(s(cloud, cloud), s(it, it), s(fam, fam), s(gpu, gpu), int(gc), float(gm),
                          float(vc), float(mem), s(region, region), s(zone, zone) or None,
                          float(price), float(spot) if spot else None, s(attach, attach), disk_t,
                          int(nvme), s(arch, arch), s(hv, hv), flag_t)
                if cloud not in CLOUDS:
                    raise ValueError(f"cloud {cloud!r}: expected one of {', '.join(CLOUDS)}")
                if not it or not gpu or not region:
                    raise ValueError("instance_type, gpu_name and region must not be empty")
                if o.gpu_count < 1 or o.gpu_memory_gib <= 0:
                    raise ValueError("gpu_count must be >= 1 and gpu_memory_gib > 0 "
                                     "(GPU offers only)")
                if not (o.price_hourly > 0) or (o.spot_price_hourly is not None
                                                and not o.spot_price_hourly > 0):
                    raise ValueError("prices must be > 0 "
                                     "(leave spot_price_hourly empty when unknown)")
                if arch not in ARCHES:
                    raise ValueError(f"arch must be {'/'.join(ARCHES)}")
            except ValueError as e:
                raise CatalogError(f"{p}:{lineno}: {e}") from None
            out.append(o)
    return out


def validate_offers(offers: Iterable[Offer]) -> list[str]:
    """Deeper consistency checks than loading does (for ``TRAINVM_CATALOG`` folders and tests):
    canonical GPU names, unique offers, GCE zones inside their region, Azure offers regional, N1
    hosts within GCE's per-GPU limits, disk types a GCE family supports (each cloud's own checks:
    the ``catalog_check`` hooks, provisioner/hooks/). Returns problems."""
    problems: list[str] = []
    seen: set[tuple[Any, ...]] = set()
    for o in offers:
        where = f"{o.cloud} {o.instance_type} {o.zone or o.region}"
        if o.key() in seen:
            problems.append(f"{where}: duplicate offer")
        seen.add(o.key())
        if o.gpu_name not in F.CANONICAL_GPUS:
            problems.append(f"{where}: unknown GPU name {o.gpu_name!r}")
        check = hooks.of(o.cloud).catalog_check
        if check is not None:
            problems += check(o)
    return problems


# ---------------------------------------------------------------------------------------------
# Writing (used by scripts/build_catalog.py and by tests that build TRAINVM_CATALOG folders)
# ---------------------------------------------------------------------------------------------
def fmt_number(x: float | int | None) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return "1" if x else "0"
    if float(x).is_integer():
        return str(int(x))
    return repr(round(float(x), 6))


def offer_row(o: Offer) -> list[str]:
    return [o.cloud, o.instance_type, o.family, o.gpu_name, str(o.gpu_count),
            fmt_number(o.gpu_memory_gib), fmt_number(o.vcpus), fmt_number(o.memory_gib), o.region,
            o.zone or "", fmt_number(o.price_hourly), fmt_number(o.spot_price_hourly),
            o.gpu_attach, "|".join(o.disk_types), str(o.local_nvme_max_gib), o.arch,
            o.hyperv_gen, ";".join(o.flags)]


def sort_key(o: Offer) -> tuple[Any, ...]:
    return (o.cloud, o.region, o.zone or "", o.instance_type, o.gpu_name, o.gpu_count)


def write_catalog(folder: Path | str, offers: Iterable[Offer], *, source: str,
                  catalog_date: date | str, extra_provenance: Mapping[str, Any] | None = None,
                  stats: Mapping[str, Any] | None = None,
                  provenance_of: Callable[[Offer], tuple[str, str]] | None = None,
                  disk_prices: Iterable[DiskPrice] | None = None) -> list[Path]:
    """Write ``offers`` as a catalog folder (one CSV per cloud, rows sorted; ``disk_prices`` as disks.csv,
    listed in ``files``). Deterministic.
    With ``provenance_of`` (offer -> (source, fetched_at)) it is schema 3, with per-row provenance."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    by_cloud: dict[str, list[Offer]] = {}
    for o in offers:
        by_cloud.setdefault(o.cloud, []).append(o)
    names = [c for c in CLOUDS if c in by_cloud] + sorted(set(by_cloud) - set(CLOUDS))
    written = []
    for cloud in names:
        p = folder / f"{cloud}.csv"
        with p.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(COLUMNS + (PROVENANCE_COLUMNS if provenance_of else ()))
            w.writerows(offer_row(o) + (list(provenance_of(o)) if provenance_of else [])
                        for o in sorted(by_cloud[cloud], key=sort_key))
        written.append(p)
    files = [f"{c}.csv" for c in names]
    if disk_prices is not None:
        written.append(write_disk_prices(folder / DISKS_FILE, disk_prices))
        files.append(DISKS_FILE)
    d = catalog_date if isinstance(catalog_date, str) else catalog_date.isoformat()
    manifest: dict[str, Any] = {
        "schema_version": SCHEMA_WITH_PROVENANCE if provenance_of else SCHEMA_VERSION,
        "columns": list(COLUMNS + (PROVENANCE_COLUMNS if provenance_of else ())),
        "files": files,
        "provenance": {"source": source, "date": d, **(extra_provenance or {})},
    }
    if stats is not None:
        manifest["stats"] = stats
    mp = folder / MANIFEST
    mp.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return [mp, *written]


