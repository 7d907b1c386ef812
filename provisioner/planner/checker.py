"""The planner's precomputed request state (``Checker``), shared by ``plan()``'s fast loop, ``diagnose`` and the
checks of planner/checks.py: which regions and zones the globs admit, the OS images per cloud, the clouds trainvm
provisions on and the ones with a group engine, the reasons of the excluding flags."""

from __future__ import annotations

from fnmatch import fnmatchcase

from provisioner.catalog.models import EXCLUDING_FLAGS, Offer
from provisioner.planner import checks as _checks
from provisioner.planner.request import REASONS, PlanRequest
from provisioner.providers.registry import cluster_clouds, os_arches, provisionable_clouds

_RANK = {r: i for i, r in enumerate(REASONS)}


class Checker:
    """Precomputed request state shared by the fast loop and ``diagnose``."""

    def __init__(self, req: PlanRequest) -> None:
        self.req = req
        self.globs = req.region_globs
        self.region_ok: dict[str, bool] = {}
        self.zone_ok: dict[str, bool] = {}
        self.os_arches = {c: imgs.get(req.os, frozenset()) for c, imgs in os_arches().items()}
        #: clouds trainvm can create VMs on (the registry), unless the request names them (tests, what-ifs)
        self.provisionable = frozenset(provisionable_clouds() if req.provisionable_clouds is None else req.provisionable_clouds)
        self.flag_reasons: dict[tuple[str, ...], tuple[str, ...]] = {}
        #: for nodes > 1: the clouds whose provider creates clusters (the registry's group_engine)
        self.cluster = frozenset(cluster_clouds() if req.cluster_clouds is None else req.cluster_clouds)
        #: the reasons of planner.checks.CHECKS (read now: a check added to the list is seen by plan and diagnose)
        self.reasons = tuple(c.reason for c in _checks.CHECKS)
        #: (reason, offer -> fails?) of every check that can fail for this request, in reason order
        self.checks = tuple(_checks.active(req, self))

    def region_match(self, region: str, zone: str | None) -> bool:
        ok = self.region_ok.get(region)
        if ok is None:
            ok = self.region_ok[region] = any(fnmatchcase(region, g) for g in self.globs or ())
        if ok or zone is None:
            return ok
        zok = self.zone_ok.get(zone)
        if zok is None:
            zok = self.zone_ok[zone] = any(fnmatchcase(zone, g) for g in self.globs or ())
        return zok

    def flag_reasons_of(self, flags: tuple[str, ...]) -> tuple[str, ...]:
        """Distinct rejection reasons of a flags tuple, latest reason first."""
        r = self.flag_reasons.get(flags)
        if r is None:
            found = {EXCLUDING_FLAGS[f] for f in flags if f in EXCLUDING_FLAGS}
            r = self.flag_reasons[flags] = tuple(sorted(found, key=_RANK.__getitem__, reverse=True))
        return r


def diagnose(offer: Offer, request: PlanRequest,
             _checker: Checker | None = None) -> tuple[str, ...]:
    """Every reason ``offer`` fails ``request``, in reason order (empty: feasible): the checks of
    ``planner.checks.CHECKS``, the same list ``plan`` applies."""
    ck = _checker or Checker(request)
    return tuple(r for r, fails in ck.checks if fails(offer))
