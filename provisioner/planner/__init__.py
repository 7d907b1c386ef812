"""The planner: chooses the cheapest catalog offer that satisfies a PlanRequest.

Pure and deterministic (no clock, no network, no cloud SDK): ``plan(request, catalog, today)``.
"""

from provisioner.planner.core import (
    NEAR_MISSES_PER_REASON,
    STALE_AFTER_DAYS,
    NearMiss,
    Plan,
    diagnose,
    failover_order,
    plan,
    rank_key,
)
from provisioner.planner.explain import Relaxation, closest_offers, no_offer_message, reason_text
from provisioner.planner.request import REASONS, PlanRequest, request_with

__all__ = [
    "NEAR_MISSES_PER_REASON", "STALE_AFTER_DAYS", "REASONS", "NearMiss", "Plan", "PlanRequest",
    "Relaxation", "closest_offers", "diagnose", "failover_order", "no_offer_message", "plan",
    "rank_key", "reason_text", "request_with",
]
