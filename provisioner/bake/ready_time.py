"""Expected time from create to ready, cold install vs a baked image, per cloud: **estimates** from public reports,
each with its source (``CloudSpec.ready_estimate``, providers/registry.py), shown by ``plan`` (never measured by
trainvm; bench/RESULTS.md holds what trainvm measured). A cloud without a figure has none (shown as unknown, never
guessed)."""

from __future__ import annotations

from typing import Any

from provisioner.providers.registry import CLOUDS, ReadyEstimate


def _estimate(cloud: str) -> ReadyEstimate | None:
    spec = CLOUDS.get(cloud)
    return None if spec is None else spec.ready_estimate


def minutes(seconds: int) -> str:
    m, s = divmod(seconds, 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def ready_json(cloud: str, baked: bool) -> dict[str, Any]:
    est = _estimate(cloud)
    if est is None:
        return {"seconds": None, "baked": baked, "estimate": True, "source": None}
    return {"seconds": est.seconds(baked), "baked": baked, "estimate": True, "source": est.source,
            "cold_seconds": est.cold_s, "baked_seconds": est.baked_s}


def ready_line(cloud: str, baked: bool) -> str:
    est = _estimate(cloud)
    if est is None:
        return f"expected time to ready: unknown on {cloud} (no published figure)"
    what = "from the baked image" if baked else "cold install"
    other = (f"; cold install about {minutes(est.cold_s)}" if baked
             else f"; about {minutes(est.baked_s)} from a baked image")
    return f"expected time to ready: about {minutes(est.seconds(baked))} {what} (an estimate{other}; {est.source})"
