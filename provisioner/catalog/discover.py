"""Sizes a ``catalog refresh`` adds back or newly places (issue 36 item 17): a size dropped once must be able to
come back, and a size the price source prices where the catalog lacks it is placed when its shape is known.

Without the clouds' shape APIs (credentials) a price list does not say everything the planner needs: Azure's
Retail Prices and AWS's Price List carry no GPU model, GCE's SKUs price parts, not machine types. So:

* **Restore**: the embedded snapshot's rows in the refreshed scope that the current catalog lacks (dropped by an
  earlier refresh, e.g. a truncated answer) are priced again with the known ones; those the source prices come
  back, with the snapshot's shape facts and zones. Those it does not price were not in the catalog: no loss.
* **Place**: a size the source prices in a region where no catalog row has it (``SourceResult.extra``) is added
  when a row of the same cloud and size elsewhere (current catalog first, then the snapshot) gives its shape and
  that row is regional (no zone: the size's zones in a new region are unknown without the shapes API). Otherwise
  it is skipped and counted: ``no_shape_facts`` (no row anywhere gives its GPU model, count and memory) or
  ``no_zone_facts`` (its rows are per zone).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from provisioner.catalog.models import Offer

#: (region, instance type) -> (USD/h on-demand, USD/h spot or None, "API SKU/meter")
Extra = Mapping[tuple[str, str], tuple[float, float | None, str]]


def restorable(current: Iterable[Offer], snapshot: Iterable[Offer]) -> list[Offer]:
    """The snapshot's rows (already narrowed to the scope) whose key the current rows lack."""
    have = {o.key() for o in current}
    return [o for o in snapshot if o.key() not in have]


def place(extra: Extra, have: Iterable[Offer], templates: Iterable[Offer],
          row_source: dict[tuple[Any, ...], str]) -> tuple[list[Offer], Counter[str]]:
    """New rows for the sizes in ``extra`` that ``have`` (the refreshed rows) lacks, shaped like the first
    template of the same size; and the counts of those skipped, by reason. ``row_source`` gets their sources."""
    present = {(o.region, o.instance_type) for o in have}
    shape: dict[str, Offer] = {}
    for t in templates:
        shape.setdefault(t.instance_type, t)
    added: list[Offer] = []
    skipped: Counter[str] = Counter()
    for (region, size), (price, spot, source) in sorted(extra.items()):
        if (region, size) in present:
            continue
        found = shape.get(size)
        if found is None:
            skipped["no_shape_facts"] += 1
            continue
        t = found
        if t.zone is not None:
            skipped["no_zone_facts"] += 1
        else:
            o = replace(t, region=region, price_hourly=price, spot_price_hourly=spot)
            added.append(o)
            row_source[o.key()] = source
    return added, skipped
