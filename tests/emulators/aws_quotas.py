"""EC2's vCPU quotas in Service Quotas, for moto's server: a stand-in for ``GetServiceQuota`` and
``GetAWSDefaultServiceQuota`` on ``ServiceCode=ec2``.

moto (5.x) models Service Quotas for ``vpc`` only: it answers ``NoSuchResourceException`` for every ``ec2`` code and
does not implement ``GetAWSDefaultServiceQuota`` at all. Like ``aws.py``'s AMI seeding, this fills the gap in moto's
in-process server (which runs in a thread of the test process): while ``installed()``, the two actions of moto's
``ServiceQuotasResponse`` answer ``ec2`` codes from this table, in the API's documented JSON shape
(``{"Quota": {ServiceCode, ServiceName, QuotaArn, QuotaCode, QuotaName, Value, Unit, Adjustable, GlobalQuota}}``,
https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_GetServiceQuota.html); other service codes
go to moto's own handler. Requests travel as they do to AWS: boto3 -> the fault proxy -> moto's server (JSON
protocol, ``X-Amz-Target: ServiceQuotasV20190624.<Action>``, SigV4 with the region in its scope).

Semantics kept from AWS, never kinder:

- ``GetServiceQuota`` answers the *applied* value a test set with ``set_quota(region, code, value)``; a quota with
  no applied value is ``NoSuchResourceException`` (AWS: "If the applied quota value is not available for a quota,
  the quota is not retrieved"; aws/aws-cli#6629), and so is an unknown code.
- ``GetAWSDefaultServiceQuota`` answers the AWS default: 0 for the G and P classes (a new account's GPU classes),
  5 for Standard On-Demand (the AWS CLI reference's example), unless ``set_default`` says otherwise.
- ``deny(action)``: that action answers ``AccessDeniedException`` (HTTP 400, as Service Quotas sends it) for a
  caller without ``servicequotas:<action>``.

``calls`` records each answered ``(action, region, code)``. Not modelled: the ``UsageMetric`` and ``Period`` fields,
quota increase requests, resource-level quotas (``ContextId``), throttling, and AWS's per-account defaults (which
vary by account age; the stand-in's are the least kind ones).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.emulators.aws import ACCOUNT

NAMES = {
    "L-DB2E81BA": "Running On-Demand G and VT instances", "L-3819A6DF": "All G and VT Spot Instance Requests",
    "L-417A185B": "Running On-Demand P instances", "L-7212CCBC": "All P Spot Instance Requests",
    "L-1216C47A": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    "L-34B43A08": "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
}
DEFAULTS = {code: 0.0 for code in NAMES} | {"L-1216C47A": 5.0}
ACCESS_DENIED = "You do not have sufficient access to perform this action."


class ServiceQuotas:
    def __init__(self) -> None:
        self.applied: dict[tuple[str, str], float] = {}
        self.defaults = dict(DEFAULTS)
        self.denied: set[str] = set()
        self.calls: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def set_quota(self, region: str, code: str, value: float) -> None:
        self.applied[(region, code)] = float(value)

    def set_default(self, code: str, value: float) -> None:
        self.defaults[code] = float(value)

    def deny(self, action: str = "GetServiceQuota") -> None:
        self.denied.add(action)

    def count(self, action: str | None = None) -> int:
        return sum(1 for a, _, _ in self.calls if action is None or a == action)

    def _quota(self, region: str, code: str, value: float, applied: bool) -> dict[str, Any]:
        account = ACCOUNT if applied else ""
        return {"ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                "QuotaArn": f"arn:aws:servicequotas:{region}:{account}:ec2/{code}", "QuotaCode": code,
                "QuotaName": NAMES[code], "Value": value, "Unit": "None", "Adjustable": True, "GlobalQuota": False}

    def answer(self, action: str, region: str, code: str) -> str:
        from moto.core.exceptions import JsonRESTError

        with self._lock:
            self.calls.append((action, region, code))
        if action in self.denied:
            raise JsonRESTError("AccessDeniedException", ACCESS_DENIED)
        if action == "GetServiceQuota":
            value = self.applied.get((region, code))
            applied = True
        else:
            value = self.defaults.get(code) if code in NAMES else None
            applied = False
        if value is None:
            raise JsonRESTError("NoSuchResourceException",
                                "The request failed because the specified resource does not exist.")
        return json.dumps({"Quota": self._quota(region, code, value, applied)})

    @contextmanager
    def installed(self) -> Iterator[ServiceQuotas]:
        """moto's server answers EC2 quotas from this table while inside (the two actions are restored after)."""
        from moto.servicequotas.responses import ServiceQuotasResponse

        table = self
        own = ServiceQuotasResponse.get_service_quota
        had_default = "get_aws_default_service_quota" in vars(ServiceQuotasResponse)

        def get_service_quota(self: Any) -> str:
            params = json.loads(self.body)
            if params.get("ServiceCode") != "ec2":
                return own(self)
            return table.answer("GetServiceQuota", self.region, str(params.get("QuotaCode")))

        def get_aws_default_service_quota(self: Any) -> str:
            params = json.loads(self.body)
            if params.get("ServiceCode") != "ec2":
                from moto.servicequotas.exceptions import NoSuchResource

                raise NoSuchResource
            return table.answer("GetAWSDefaultServiceQuota", self.region, str(params.get("QuotaCode")))

        ServiceQuotasResponse.get_service_quota = get_service_quota  # type: ignore[method-assign]
        ServiceQuotasResponse.get_aws_default_service_quota = get_aws_default_service_quota  # type: ignore[attr-defined]
        try:
            yield self
        finally:
            ServiceQuotasResponse.get_service_quota = own  # type: ignore[method-assign]
            if not had_default:
                del ServiceQuotasResponse.get_aws_default_service_quota  # type: ignore[attr-defined]
