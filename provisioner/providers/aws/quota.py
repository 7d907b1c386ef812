"""AWS quotas for the preflight (provision/quota.py): EC2's vCPU quotas from Service Quotas, and their usage from
EC2 itself.

EC2 limits running instances by vCPUs per *quota class*, per region, separately for On-Demand and Spot (there is
no GPU count on AWS: the need is the offer's vCPUs x nodes). The codes (Service Quotas ``ServiceCode=ec2``; the
EC2 quotas console, https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas, lists them by name;
the AWS CLI reference's ``get-aws-default-service-quota`` example shows L-1216C47A):

=========  ==========================================================  ==========================================
class      On-Demand                                                   Spot
=========  ==========================================================  ==========================================
G and VT   L-DB2E81BA Running On-Demand G and VT instances             L-3819A6DF All G and VT Spot Instance Requests
P          L-417A185B Running On-Demand P instances                    L-7212CCBC All P Spot Instance Requests
Standard   L-1216C47A Running On-Demand Standard (A, C, D, H, I, M,    L-34B43A08 All Standard (A, C, D, H, I, M, R,
           R, T, Z) instances                                          T, Z) Spot Instance Requests
=========  ==========================================================  ==========================================

An instance type's class is the letters before its generation digit (``g4dn`` -> g -> G and VT, ``p4de`` -> P):
``PREFIX_CLASS``; the catalog's AWS families (g4dn, g5, g5g, g6, g6e, p3, p3dn, p4d, p4de, p5) are all G or P
(tests/e2e/test_quota_aws.py keeps the table in step with the catalog). Classes with quotas of their own (DL, Inf,
Trn, F, X, U, Mac, HPC) are not read: such a type has no need here, so nothing is refused for it.

- Limit: ``GetServiceQuota`` (the applied value). AWS answers ``NoSuchResourceException`` where no applied value
  exists for a quota ("If the applied quota value is not available for a quota, the quota is not retrieved", the
  API reference; aws/aws-cli#6629): then ``GetAWSDefaultServiceQuota`` (the AWS default, which is what applies).
  A quota answered with an ``ErrorReason`` and no ``Value`` is a failed read.
- Usage: the vCPUs (the type's ``DefaultVCpus`` from ``DescribeInstanceTypes``) of the region's ``pending`` and
  ``running`` instances of that class, On-Demand ones against the On-Demand quota and ``InstanceLifecycle=spot``
  ones against the Spot quota (``DescribeInstances``). CloudWatch's ``AWS/Usage`` ``ResourceCount`` metric (the
  quota's ``UsageMetric``) is the other source of usage; it is not used (one more API and permission, and minutes
  behind). Open Spot requests that have no instance yet count against the Spot quota on AWS and are not counted
  here; neither are instances that are ``stopping`` or ``shutting-down``.
- Any failed read (``AccessDeniedException`` without ``servicequotas:GetServiceQuota``, ``UnauthorizedOperation``
  on ``ec2:DescribeInstances``, no answer) raises: the preflight says "not checked" and ``up`` goes on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from provisioner.providers.aws.clients import ErrorReason, ServiceQuota
from provisioner.providers.aws.errors import error_code
from provisioner.providers.aws.params import Filter
from provisioner.providers.aws.provider import AwsProvider
from provisioner.providers.quota_records import QuotaNeed, QuotaReading, QuotaShape, Usage

if TYPE_CHECKING:
    from provisioner.providers.aws.api import AwsApi

SERVICE_CODE = "ec2"
USED_STATES = ["pending", "running"]


@dataclass(frozen=True)
class QuotaClass:
    title: str
    on_demand: str
    on_demand_name: str
    spot: str
    spot_name: str


CLASSES = {
    "G": QuotaClass("G and VT", "L-DB2E81BA", "Running On-Demand G and VT instances",
                    "L-3819A6DF", "All G and VT Spot Instance Requests"),
    "P": QuotaClass("P", "L-417A185B", "Running On-Demand P instances", "L-7212CCBC", "All P Spot Instance Requests"),
    "standard": QuotaClass("Standard", "L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
                           "L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
}
#: the letters before an instance type's generation digit -> its quota class (None: a class trainvm does not read)
PREFIX_CLASS: dict[str, str | None] = {
    "g": "G", "vt": "G", "p": "P",
    "dl": None, "inf": None, "trn": None, "f": None, "x": None, "u": None, "mac": None, "hpc": None,
}
STANDARD_LETTERS = "acdhimrtz"
INCREASE_HINT = ("request an increase in the Service Quotas console (EC2, the class's Running On-Demand or Spot "
                 "Instance Requests quota, in that region) or with `aws service-quotas request-service-quota-increase "
                 "--service-code ec2`; new accounts often start at 0 vCPUs for G and P instances")


def quota_class(instance_type: str) -> QuotaClass | None:
    """The quota class of ``instance_type`` (``g5.xlarge`` -> G and VT), None where it has its own quota."""
    m = re.match(r"([a-z]+)", instance_type.split("-", 1)[0])
    prefix = m.group(1) if m else ""
    if prefix in PREFIX_CLASS:
        name = PREFIX_CLASS[prefix]
        return None if name is None else CLASSES[name]
    if prefix and prefix[0] in STANDARD_LETTERS:
        return CLASSES["standard"]
    return None


def _name(code: str) -> str:
    for c in CLASSES.values():
        if code == c.on_demand:
            return c.on_demand_name
        if code == c.spot:
            return c.spot_name
    return code


class AwsQuotas:
    cloud = "aws"
    source = "AWS Service Quotas GetServiceQuota + EC2 DescribeInstances"
    increase_hint = INCREASE_HINT

    def __init__(self, api: AwsApi) -> None:
        self.api = api
        self.account = f"{api.endpoint or 'aws'}/{api.access_key_id()}"
        self._running: dict[str, list[tuple[str, bool]]] = {}  # region -> (instance type, spot) of used instances

    def read(self, scope: str) -> Usage:
        region, code = scope.split("/", 1)
        return {code: (self._limit(region, code), self._used(region, code))}

    def needs(self, offer: QuotaShape, spot: bool, nodes: int, usage_of: Callable[[str], Usage]) -> list[QuotaNeed]:
        klass = quota_class(offer.instance_type)
        if klass is None:
            return []
        code = klass.spot if spot else klass.on_demand
        label = f"{klass.title} {'Spot' if spot else 'On-Demand'} vCPUs"
        return [QuotaNeed(code, f"{offer.region}/{code}", offer.vcpus * nodes, label)]

    def hint_for(self, short: Sequence[QuotaReading], region: str) -> str:
        """How to ask for the missing vCPUs: the console, and the CLI call with the value that would fit."""
        asks = [f"`aws service-quotas request-service-quota-increase --service-code {SERVICE_CODE} --quota-code "
                f"{r.need.metric} --desired-value {(r.usage or 0) + r.need.amount:g} --region {region}`" for r in short]
        names = ", ".join(f"'{_name(r.need.metric)}'" for r in short)
        return (f"request an increase of {names} in the Service Quotas console (EC2, region {region}) or with "
                + " and ".join(asks))

    # ------------------------------------------------------------------ the reads
    def _limit(self, region: str, code: str) -> float:
        sq = self.api.service_quotas(region)

        def applied() -> ServiceQuota | None:
            try:
                got: ServiceQuota = sq.get_service_quota(ServiceCode=SERVICE_CODE, QuotaCode=code)["Quota"]
                return got
            except Exception as exc:
                if error_code(exc) == "NoSuchResourceException":  # no applied value: the AWS default applies
                    return None
                raise

        quota = self.api.call(applied)
        if quota is None:
            quota = self.api.call(
                lambda: sq.get_aws_default_service_quota(ServiceCode=SERVICE_CODE, QuotaCode=code)["Quota"])
        value = quota.get("Value")
        if value is None:
            reason = quota.get("ErrorReason") or ErrorReason()
            raise RuntimeError(f"Service Quotas gave no value for {code}: {reason.get('ErrorCode', '?')}: "
                               f"{reason.get('ErrorMessage', '')}".rstrip(": "))
        return float(value)

    def _used(self, region: str, code: str) -> float:
        if region not in self._running:
            ec2 = self.api.ec2(region)
            filters: list[Filter] = [{"Name": "instance-state-name", "Values": USED_STATES}]
            pages = self.api.call(lambda: list(ec2.get_paginator("describe_instances").paginate(Filters=filters)))
            self._running[region] = [(i["InstanceType"], i.get("InstanceLifecycle") == "spot")
                                     for page in pages for r in page.get("Reservations") or []
                                     for i in r.get("Instances") or []]
        counted = [(t, spot) for t, spot in self._running[region]
                   if (k := quota_class(t)) is not None and code == (k.spot if spot else k.on_demand)]
        vcpus = self._vcpus(region, sorted({t for t, _ in counted}))
        unknown = sorted({t for t, _ in counted} - set(vcpus))
        if unknown:
            raise RuntimeError(f"DescribeInstanceTypes did not describe {', '.join(unknown)} in {region}")
        return float(sum(vcpus[t] for t, _ in counted))

    def _vcpus(self, region: str, types: list[str]) -> dict[str, int]:
        if not types:
            return {}
        ec2 = self.api.ec2(region)
        out: dict[str, int] = {}
        for i in range(0, len(types), 100):  # DescribeInstanceTypes takes at most 100 types per call
            chunk = types[i:i + 100]
            got = self.api.call(partial(ec2.describe_instance_types, InstanceTypes=chunk))
            out.update({t["InstanceType"]: int(t["VCpuInfo"]["DefaultVCpus"]) for t in got["InstanceTypes"]})
        return out


def reader(provider: object) -> AwsQuotas | None:
    """The quota reader of an AWS provider (None for any other provider, e.g. a test's fake)."""
    return AwsQuotas(provider.api) if isinstance(provider, AwsProvider) else None
