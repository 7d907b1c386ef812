"""The live lane's results as a Markdown table, to paste into bench/RESULTS.md.

    .venv/bin/python bench/live_table.py [DIR]

DIR (default: $LIVE_RESULTS, else bench/live-results/) holds the ``CLOUD.jsonl`` files `make test-live` appends
one run to (tests/live/scenario.py). Each row: when, the cloud (and "(emulator)" for a run against the
emulators, whose phase timings are planted placeholders, never figures to publish), the created shape and its
price, the lane's worst case, time to ``ready`` (the `up --wait-ready` command), the startup phases, stop and
start, the trainvm version, the catalog's age, and the outcome (with anything left behind). No results: says so
(exit 0), so `make bench` runs it everywhere."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent / "live-results"
HEADER = ("| when | cloud | shape | $/h | worst case | to ready | phases | stop / start | trainvm | catalog age | outcome |\n"
          "|---|---|---|---:|---:|---:|---|---|---|---:|---|")


def _secs(rec: dict, step: str) -> str:
    found = [s["seconds"] for s in rec.get("steps") or [] if s["step"] == step]
    return f"{found[0]:.0f} s" if found else "-"


def row(rec: dict) -> str:
    shape = rec.get("shape") or {}
    where = shape.get("zone") or shape.get("region") or ""
    price = shape.get("price_hourly")
    worst = (rec.get("worst_case") or {}).get("usd")
    ready = rec.get("time_to_ready_s")
    phases = ", ".join(f"{p} {s:.0f} s" for p, s in (rec.get("phases") or {}).items() if s is not None) or "-"
    age = (rec.get("catalog") or {}).get("age_days")
    outcome = "ok" if rec.get("ok") else f"failed: {rec.get('error', '?')}"
    if rec.get("leftovers"):
        outcome += "; LEFT: " + "; ".join(rec["leftovers"])
    cloud = rec["cloud"] + (" (emulator)" if rec.get("world") != "live" else "")
    cells = [(rec.get("started") or "")[:16], cloud, f"{shape.get('instance_type') or '-'} {where}".strip(),
             f"{price:.3f}" if price is not None else "-", f"${worst:.2f}" if worst is not None else "-",
             f"{ready:.0f} s" if ready is not None else "-", phases, f"{_secs(rec, 'stop')} / {_secs(rec, 'start')}",
             rec.get("trainvm_version") or "-", f"{age} d" if age is not None else "-", outcome.replace("|", "/")]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else os.environ.get("LIVE_RESULTS") or DEFAULT)
    records = [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines() if line.strip()]
    if not records:
        print(f"no live results in {folder} (run `make test-live CLOUD=gcp|azure|aws`)")
        return 0
    print(HEADER)
    for rec in sorted(records, key=lambda r: (r.get("started") or "", r["cloud"])):
        print(row(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
