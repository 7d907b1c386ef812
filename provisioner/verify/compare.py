"""``verify``'s comparison: the agent's one ``compare`` on the profile's expectation.

``compare(profile, report)`` is used by ``verify NAME`` (a VM's report), ``verify --local`` (this
machine's probe) and ``up``'s wait: it builds the expectation (``provisioner.verify.expect``: the
profile with the compatibility facts applied), validates the report (``StackReport``) and runs
``provisioner.agent.compare.compare`` -- the same function, on the same document, that the VM's
ready gate runs on its expected.json. The rules are documented there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from provisioner.agent.compare import GPULESS, FieldResult, VerifyResult, framework_cuda, report_cudnn
from provisioner.agent.compare import compare as judge
from provisioner.compat.facts import NOMINAL_TOLERANCE
from provisioner.verify.expect import allowed_gpus, expectation, parse_pin
from provisioner.verify.report import StackReport

Status = Literal["match", "drift", "provisioning", "failed"]

__all__ = ["GPULESS", "NOMINAL_TOLERANCE", "FieldResult", "Status", "VerifyResult", "allowed_gpus", "compare",
           "framework_cuda", "parse_pin", "report_cudnn"]


def compare(profile: Mapping[str, Any], report: StackReport | Mapping[str, Any] | None) -> VerifyResult:
    """Judge a report against a resolved profile (the profile model's ``model_dump()``)."""
    expected = expectation(profile)
    if report is not None and not isinstance(report, StackReport):
        report = StackReport.model_validate(dict(report))
    return judge(expected, None if report is None else report.as_dict())
