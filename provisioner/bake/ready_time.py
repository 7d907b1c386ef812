"""Expected time from create to ready, cold install vs a baked image, per cloud: **estimates** from public reports,
each with its source, shown by ``plan`` (never measured by trainvm; bench/RESULTS.md holds what trainvm measured).
A cloud without a figure has none (shown as unknown, never guessed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReadyEstimate:
    cold_s: int  # from create to ready when the startup script installs the stack
    baked_s: int  # from create to ready when the VM boots a baked image (the script only verifies)
    source: str

    def seconds(self, baked: bool) -> int:
        return self.baked_s if baked else self.cold_s


#: the public reports issue #28 cites (GPU VM, driver + CUDA + Python stack installed at boot vs pre-baked);
#: estimates for a typical stack, not measurements of any profile
ESTIMATES: dict[str, ReadyEstimate] = {
    "gcp": ReadyEstimate(cold_s=215, baked_s=75,
                         source="public report cited in issue #28: 3m35s cold install -> 1m15s from a custom image on GCE"),
    "azure": ReadyEstimate(cold_s=1260, baked_s=170,
                           source="public report cited in issue #28: 21 min cold install -> 2m50s from a gallery image on Azure"),
}


def minutes(seconds: int) -> str:
    m, s = divmod(seconds, 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def ready_json(cloud: str, baked: bool) -> dict[str, Any]:
    est = ESTIMATES.get(cloud)
    if est is None:
        return {"seconds": None, "baked": baked, "estimate": True, "source": None}
    return {"seconds": est.seconds(baked), "baked": baked, "estimate": True, "source": est.source,
            "cold_seconds": est.cold_s, "baked_seconds": est.baked_s}


def ready_line(cloud: str, baked: bool) -> str:
    est = ESTIMATES.get(cloud)
    if est is None:
        return f"expected time to ready: unknown on {cloud} (no published figure)"
    what = "from the baked image" if baked else "cold install"
    other = (f"; cold install about {minutes(est.cold_s)}" if baked
             else f"; about {minutes(est.baked_s)} from a baked image")
    return f"expected time to ready: about {minutes(est.seconds(baked))} {what} (an estimate{other}; {est.source})"
