"""``trainvm catalog refresh``: renew the catalog's prices from each cloud's official price API.

Cloud-neutral: each cloud's price source is its ``price_source`` hook (provisioner/hooks/,
``providers/<cloud>/prices.py``) and called as ``fetch(known, regions, fetched_at) -> SourceResult``.

* ``known``: the current catalog's offers of that cloud in the asked regions, plus the embedded snapshot's that
  the current catalog lost (catalog/discover.py: a size dropped once can come back). A known shape the source has
  no price for is dropped and reported, never priced 0. A size the source prices where no row has it
  (``SourceResult.extra``) is placed when another region's regional row gives its shape, else skipped and counted
  (the price lists carry no GPU model; the shapes APIs need credentials).
* Every cloud asked must answer: one failure (network, 5xx after retries) writes nothing (exit 3).
* The merged catalog (refreshed rows + the current rows outside the scope) has its price flags recomputed
  (catalog/integrity.py: spot checks, suspiciously low regional prices) and must pass ``check_refreshed``;
  a catalog that does not is not written (exit 1). Either way the current catalog stays in use.
* A truncated answer (a paging link that ends early) looks like a region that lost most of its sizes: a refresh
  that leaves a refreshed (cloud, region) with fewer than SHRINK_KEEP of the rows it had is refused (exit 1,
  nothing written, the counts said) unless ``--accept-shrink`` (``accept_shrink``) says the loss is real.
* Disk prices: the refreshed (cloud, region, disk type)s replace the current ones; every other disk row
  (other clouds and regions, the ``*`` rows, local SSD and image storage) is carried over as it was.
* The manifest's ``provenance.parts`` says which parts were refreshed when (cloud, regions, date, source),
  carried from one refresh to the next; ``Catalog.freshness`` words it for the age warnings.
* The result goes to the user's cache atomically (catalog/publish.py); the embedded snapshot stays the fallback.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, Callable, TypedDict

from provisioner import hooks
from provisioner.catalog.discover import place, restorable
from provisioner.catalog.integrity import check_refreshed, reflag
from provisioner.catalog.models import Catalog, Offer
from provisioner.catalog.publish import publish
from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog, row_provenance
from provisioner.errors import TrainvmError
from provisioner.providers.hook_types import PriceSource
from provisioner.providers.price_rows import SourceResult

SOURCE = "trainvm catalog refresh (official price APIs)"
#: A refreshed region must keep at least this share of the rows it had (else the refresh is refused unless
#: ``--accept-shrink``). Sizes do retire, a few at a time; a truncated page sequence loses most of them.
SHRINK_KEEP = 0.5


class RefreshFailed(TrainvmError):
    """The refreshed catalog failed its integrity checks: exit 1, the current catalog is kept."""

    exit_code = 1


class CloudRefresh(TypedDict):
    """What the refresh did to one cloud's rows (``catalog refresh --json`` ``clouds.<cloud>``; its text reads it back)."""

    source: str
    rows: int
    known_rows: int
    dropped: dict[str, int]  # reason -> rows dropped
    flagged: dict[str, int]  # price flag -> rows
    ambiguous: list[str]
    disk_rows: int
    notes: list[str]
    restored: int
    placed: int
    new_sizes_skipped: dict[str, int]


class RefreshDoc(TypedDict):
    clouds: dict[str, CloudRefresh]
    seconds: float
    path: str | None
    problems: list[str]
    written: bool


@dataclass
class RefreshReport:
    clouds: dict[str, CloudRefresh]
    seconds: float
    path: str | None
    problems: list[str]

    def to_json(self) -> RefreshDoc:
        return {"clouds": self.clouds, "seconds": round(self.seconds, 2), "path": self.path,
                "problems": self.problems, "written": self.path is not None}


#: a cloud's price source (its ``price_source`` hook, provisioner/hooks/)
Fetch = PriceSource


def price_source(cloud: str) -> Fetch | None:
    return hooks.of(cloud).price_source


def shrunk(current: Catalog, merged: list[Offer], in_scope: Callable[[Offer], bool],
           unmodelled: frozenset[tuple[Any, ...]] = frozenset()) -> list[str]:
    """``cloud region: n of m rows left`` for each refreshed (cloud, region) that kept less than SHRINK_KEEP of its
    rows (rows the source says it cannot price are not counted: their loss is no truncation)."""
    before = Counter((o.cloud, o.region) for o in current.offers if in_scope(o) and o.key() not in unmodelled)
    after = Counter((o.cloud, o.region) for o in merged if in_scope(o))
    return [f"{c} {r}: {after[(c, r)]} of {n} rows left ({n - after[(c, r)]} lost, more than "
            f"{1 - SHRINK_KEEP:.0%}: a truncated answer looks like this; `--accept-shrink` accepts the loss)"
            for (c, r), n in sorted(before.items()) if after[(c, r)] < n * SHRINK_KEEP]


def refresh(current: Catalog, clouds: list[str], region_globs: list[str] | None,
            now: datetime | None = None, accept_shrink: bool = False) -> RefreshReport:
    """Fetch, check and publish. Raises CloudError (a source failed) or RefreshFailed (integrity)."""
    started = time.monotonic()
    now = now or datetime.now(UTC)
    fetched_at = now.date().isoformat()

    def in_scope(o: Offer) -> bool:
        return o.cloud in clouds and (not region_globs or any(fnmatchcase(o.region, g) for g in region_globs))

    old_prov = row_provenance(current)
    # a refreshed catalog's lost rows can come back from the snapshot it started from (never into a TRAINVM_CATALOG)
    snapshot = load_catalog(EMBEDDED_DIR).offers if current.origin == "refreshed" else ()
    results: dict[str, SourceResult] = {}
    restored: dict[str, int] = {}
    report_skipped: dict[str, dict[str, int]] = {}
    placed: dict[str, list[Offer]] = {}
    for cloud in clouds:
        fetch = price_source(cloud)
        assert fetch is not None  # the CLI offers only clouds with a price source
        known = [o for o in current.offers if in_scope(o) and o.cloud == cloud]
        back = restorable(known, [o for o in snapshot if in_scope(o) and o.cloud == cloud])
        regions = sorted({o.region for o in (*known, *back)})
        r = results[cloud] = fetch(known + back, regions, now)  # CloudError propagates: nothing is written
        back_keys = {o.key() for o in back}
        restored[cloud] = sum(1 for o in r.offers if o.key() in back_keys)
        if back:  # a snapshot row the source does not price was not in this catalog: not a loss
            r.dropped["no_ondemand_price"] -= len(back) - restored[cloud]
            r.dropped = +r.dropped
        shapes = [*(o for o in current.offers if o.cloud == cloud), *(o for o in snapshot if o.cloud == cloud)]
        placed[cloud], skipped = place(r.extra, r.offers, shapes, r.row_source)
        if skipped:
            counts = ", ".join(f"{k} {v}" for k, v in sorted(skipped.items()))
            r.notes.append(f"sizes the price source lists that no row here has, skipped: {counts} (no_shape_facts: "
                           "no catalog row gives their GPU model, count and memory; no_zone_facts: their zones there "
                           "are unknown; both need the cloud's shapes API)")
        report_skipped[cloud] = dict(sorted(skipped.items()))
        if restored[cloud] or placed[cloud]:
            r.notes.append(f"sizes added: {restored[cloud]} restored from the embedded snapshot, "
                           f"{len(placed[cloud])} placed in a new region with another region's shape")
    kept = [o for o in current.offers if not in_scope(o)]
    fresh = [o for c, r in results.items() for o in (*r.offers, *placed[c])]
    refreshed_clouds = set(clouds)
    # kept rows keep their flags (the embedded GCP rows were checked per GPU part, which a whole-VM price
    # cannot be); they are the reference the fresh prices are compared with
    merged = kept + reflag(fresh, reference=[o for o in kept if o.cloud in refreshed_clouds])
    report: dict[str, CloudRefresh] = {}
    for cloud, r in results.items():
        rows = [o for o in merged if o.cloud == cloud and in_scope(o)]
        flags = Counter(f for o in rows for f in o.flags)
        report[cloud] = {
            "source": r.source, "rows": len(rows), "known_rows": sum(1 for o in current.offers
                                                                  if in_scope(o) and o.cloud == cloud),
            "dropped": dict(sorted(r.dropped.items())), "flagged": dict(sorted(flags.items())),
            "ambiguous": r.ambiguous, "disk_rows": len(r.disks), "notes": r.notes,
            "restored": restored[cloud], "placed": len(placed[cloud]), "new_sizes_skipped": report_skipped[cloud],
        }
    problems = check_refreshed(merged)
    problems += [f"{c}: no offer left in the refreshed regions" for c, v in report.items()
                 if v["known_rows"] and not v["rows"]]
    if not accept_shrink:
        problems += shrunk(current, merged, in_scope, frozenset(k for r in results.values() for k in r.unmodelled))
    if problems:
        shown = "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
        err = RefreshFailed(f"the refreshed catalog failed its integrity checks: {shown}",
                            hint="nothing was written; the current catalog stays in use")
        err.report = RefreshReport(report, time.monotonic() - started, None, problems)  # type: ignore[attr-defined]
        raise err
    new_source = {k: s for r in results.values() for k, s in r.row_source.items()}

    def provenance_of(o: Offer) -> tuple[str, str]:
        if o.key() in new_source and in_scope(o):
            return new_source[o.key()], fetched_at
        return old_prov.get(o.key(), (current.source, current.date.isoformat()))

    # the catalog is as old as its oldest price: a refresh of one cloud leaves the others' dates as they were
    oldest = min((provenance_of(o)[1] for o in merged), default=fetched_at)
    new_disks = [d for r in results.values() for d in r.disks]
    replaced = {(d.cloud, d.region, d.disk_type) for d in new_disks}
    kept_disks = [d for d in current.disk_prices.rows if (d.cloud, d.region, d.disk_type) not in replaced]
    regions = region_globs or ["*"]
    parts = [p for p in current.provenance.get("parts", [])
             if not (p.get("cloud") in results and (p.get("regions") == regions or regions == ["*"]))]
    parts += [{"cloud": c, "regions": regions, "fetched_at": fetched_at, "source": r.source}
              for c, r in results.items()]
    base = current.provenance.get("base") if current.origin == "refreshed" else None
    path = publish(
        merged, new_disks, kept_disks=kept_disks, source=SOURCE, fetched=now, catalog_date=oldest,
        provenance_of=provenance_of,
        extra_provenance={"refreshed": {c: {"source": r.source, "regions": regions} for c, r in results.items()},
                          "parts": parts,
                          "base": base or {"source": current.source, "date": current.date.isoformat(),
                                           "origin": current.origin}},
        stats={"rows": {c: v["rows"] for c, v in report.items()},
               "dropped": {c: v["dropped"] for c, v in report.items()},
               "flags": {c: v["flagged"] for c, v in report.items()}})
    return RefreshReport(report, time.monotonic() - started, str(path), [])
