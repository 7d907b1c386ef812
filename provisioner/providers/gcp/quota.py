"""GCE quotas for the preflight (provision/quota.py): ``regions.get`` ``quotas[]`` ({metric, limit, usage}) per
region, and ``projects.get`` ``quotas[]`` for the project-wide ``GPUS_ALL_REGIONS``.

Metrics (Compute API ``Quota.metric`` enum, discovery document revision in tests/fixtures/gce/compute.v1.json;
https://cloud.google.com/compute/resource-usage#gpu_quota, #cpu_quota, #preemptible):

- GPUs: ``NVIDIA_<MODEL>_GPUS`` per region; Spot VMs use ``PREEMPTIBLE_NVIDIA_<MODEL>_GPUS`` when the project
  has preemptible quota for it (limit > 0), else the regular metric ("If you do not have preemptible quota, Spot
  VMs consume regular quota"). Every GPU also counts against the project's ``GPUS_ALL_REGIONS``.
- vCPUs: N1 counts against ``CPUS``; newer families against ``<FAMILY>_CPUS`` (``N2_CPUS``, ``A2_CPUS``,
  ``G2_CPUS``, ...) when the region reports that metric (a metric the region does not report is not checked);
  Spot VMs use ``PREEMPTIBLE_CPUS`` when its limit is > 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from provisioner.providers.base import Provider
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.provider import GcpProvider
from provisioner.providers.quota_records import GLOBAL, QuotaNeed, QuotaShape, Usage

if TYPE_CHECKING:
    from google.cloud.compute_v1 import RegionsClient

    from provisioner.providers.gcp.sdk_types import QuotaHolder

#: catalog GPU name -> the model part of the metric (NVIDIA_<this>_GPUS)
GPU_METRIC = {"T4": "T4", "V100": "V100", "P100": "P100", "P4": "P4", "K80": "K80", "L4": "L4", "A100": "A100",
              "A100-80GB": "A100_80GB", "H100": "H100", "H200": "H200", "B200": "B200"}
INCREASE_HINT = ("request an increase in the Google Cloud console (IAM & Admin > Quotas & System Limits, filter "
                 "by the metric and region) or `gcloud alpha quotas preferences create`; new projects start at 0 GPUs")


class GceQuotas:
    cloud = "gcp"
    source = "GCE regions.get / projects.get quotas"
    increase_hint = INCREASE_HINT

    def __init__(self, provider: GcpProvider) -> None:
        self.provider = provider
        self.account = f"{provider.endpoint or 'compute.googleapis.com'}/{provider.project}"

    def read(self, scope: str) -> Usage:
        gce = self.provider.gce
        api = gce.clients()
        got: QuotaHolder
        if scope == GLOBAL:
            got = gce.call(lambda: api.projects.get(project=api.project, retry=None, timeout=gce.http_timeout))
        else:
            regions = _regions_client(gce)
            got = gce.call(lambda: regions.get(project=api.project, region=scope, retry=None, timeout=gce.http_timeout))
        return {q.metric: (float(q.limit), float(q.usage)) for q in got.quotas}

    def needs(self, offer: QuotaShape, spot: bool, nodes: int, usage_of: Callable[[str], Usage]) -> list[QuotaNeed]:
        region = usage_of(offer.region)
        out = []
        model = GPU_METRIC.get(offer.gpu_name)
        gpus = offer.gpu_count * nodes
        if model is not None and gpus:
            metric = f"NVIDIA_{model}_GPUS"
            if spot and region.get(f"PREEMPTIBLE_{metric}", (0.0, 0.0))[0] > 0:
                metric = f"PREEMPTIBLE_{metric}"
            out.append(QuotaNeed(metric, offer.region, gpus, f"{offer.gpu_name} GPUs"))
            out.append(QuotaNeed("GPUS_ALL_REGIONS", GLOBAL, gpus, "GPUs"))
        family = offer.instance_type.split("-", 1)[0].upper()
        cpu = "CPUS" if family == "N1" or f"{family}_CPUS" not in region else f"{family}_CPUS"
        if spot and region.get("PREEMPTIBLE_CPUS", (0.0, 0.0))[0] > 0:
            cpu = "PREEMPTIBLE_CPUS"
        out.append(QuotaNeed(cpu, offer.region, offer.vcpus * nodes, "vCPUs"))
        return out


def _regions_client(gce: GceApi) -> RegionsClient:
    from google.cloud import compute_v1

    return compute_v1.RegionsClient(**gce.client_kwargs())


def reader(provider: Provider) -> GceQuotas | None:
    """The quota reader of a GCE provider (None for any other provider, e.g. a test's fake)."""
    return GceQuotas(provider) if isinstance(provider, GcpProvider) else None
