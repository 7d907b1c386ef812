"""Quotas for the GCE emulator: ``compute.regions.get`` (the region's ``quotas[]``) and the ``quotas[]`` that
``compute.projects.get`` carries (project-wide metrics such as ``GPUS_ALL_REGIONS``).

Each quota is ``{"metric", "limit", "usage"}`` as the Compute API's ``Quota`` schema has it (``owner`` is not
sent; the discovery document marks it output-only and GCE omits it for project quotas). A test sets them with
``emu.set_quota(metric, limit, usage=0, region=None)`` (``region=None``: a project-wide metric). Not modelled:
quotas changing with the instances the emulator creates (usage is what the test set, never recomputed), and the
many metrics GCE lists that trainvm never reads (a region answers only the metrics set, plus ``CPUS`` 24/0 and
``PREEMPTIBLE_CPUS`` 0/0 as a new project has them)."""
from __future__ import annotations

from .gce_validate import ApiError

API = "https://compute.googleapis.com/compute/v1/"
DEFAULT_REGION_QUOTAS = {"CPUS": (24.0, 0.0), "PREEMPTIBLE_CPUS": (0.0, 0.0)}


class QuotaMethodsMixin:
    def set_quota(self, metric: str, limit: float, usage: float = 0.0, region: str | None = None) -> None:
        with self._lock:
            self.quotas.setdefault(region, dict(DEFAULT_REGION_QUOTAS) if region else {})[metric] = (float(limit), float(usage))

    def _quota_items(self, region: str | None) -> list[dict]:
        table = self.quotas.get(region, dict(DEFAULT_REGION_QUOTAS) if region else {})
        return [{"metric": m, "limit": lim, "usage": use} for m, (lim, use) in sorted(table.items())]

    def _regions_get(self, req, project, region):
        """compute.regions.get: the region (UP) and its quotas; a region no known zone is in is 404."""
        if not any(z.rsplit("-", 1)[0] == region for z in self.known_zones):
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/regions/{region}' was not found")
        return {"kind": "compute#region", "name": region, "status": "UP", "quotas": self._quota_items(region),
                "selfLink": f"{API}projects/{project}/regions/{region}"}
