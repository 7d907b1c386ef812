"""``trainvm catalog refresh``: print what the refresh did (catalog/refresh.py does it)."""

from __future__ import annotations

from provisioner.catalog.refresh import RefreshDoc, RefreshFailed, refresh
from provisioner.catalog.storage import load_catalog
from provisioner.hooks import priced_clouds
from provisioner.output import emit_json, notice, stdout_console


def run_catalog_refresh(*, clouds: list[str] | None, regions: list[str] | None, json_out: bool,
                        accept_shrink: bool = False) -> int:
    asked = list(dict.fromkeys(clouds)) if clouds else list(priced_clouds())
    current = load_catalog()
    try:
        report = refresh(current, asked, regions, accept_shrink=accept_shrink)
    except RefreshFailed as e:
        failed = getattr(e, "report", None)
        if failed is not None and not json_out:
            _print(failed.to_json())
        raise
    doc = report.to_json()
    if json_out:
        emit_json(doc)
    else:
        _print(doc)
    return 0


def _print(doc: RefreshDoc) -> None:
    out = stdout_console()
    for cloud, c in doc["clouds"].items():
        dropped = ", ".join(f"{k} {v}" for k, v in c["dropped"].items()) or "none"
        flagged = ", ".join(f"{k} {v}" for k, v in c["flagged"].items()) or "none"
        out.print(f"{cloud}: {c['rows']} offers (of {c['known_rows']} known), {c['disk_rows']} disk prices; "
                  f"dropped: {dropped}; flagged: {flagged}  [{c['source']}]", soft_wrap=True)
        for a in c["ambiguous"]:
            notice("ambiguous", f"{cloud}: {a}")
        for n in c["notes"]:
            out.print(f"  note: {n}", soft_wrap=True)
    for p in doc["problems"]:
        notice("error", p)
    if doc["path"]:
        out.print(f"wrote {doc['path']} in {doc['seconds']:.1f} s; plans now use it "
                  "(TRAINVM_CATALOG, when set, still wins)", soft_wrap=True)
