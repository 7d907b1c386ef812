"""``verify``'s comparison: the agent's one ``compare`` on the profile's expectation.

``compare(profile, report)`` is used by ``verify NAME`` (a VM's report), ``verify --local`` (this
machine's probe) and ``up``'s wait: it builds the expectation as a typed record (``verify.expect.expected_record``:
the profile with the compatibility facts applied, a frozen ``verify.records.Expectation``), validates the report
(a frozen ``StackReport``) and judges the two records with ``compare_records``: ``provisioner.agent.compare`` on
their documents -- the same function, on the same document, that the VM's ready gate runs on its expected.json.
The rules are documented there. Both records forbid unknown fields (a misspelled field is an error, not "equal").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from provisioner.agent.compare import GPULESS, FieldResult, VerifyResult, framework_cuda, report_cudnn
from provisioner.agent.compare import compare as judge
from provisioner.compat.facts import NOMINAL_TOLERANCE
from provisioner.providers.stack_report import StackReport, validate_report
from provisioner.verify.expect import allowed_gpus, expected_record, parse_pin
from provisioner.verify.records import Expectation

Status = Literal["match", "drift", "provisioning", "failed", "rehearsed"]

__all__ = ["GPULESS", "NOMINAL_TOLERANCE", "FieldResult", "Status", "VerifyResult", "allowed_gpus", "compare",
           "compare_records", "framework_cuda", "parse_pin", "report_cudnn"]


def compare(profile: Mapping[str, object], report: StackReport | Mapping[str, object] | None) -> VerifyResult:
    """Judge a report against a resolved profile (the profile model's ``model_dump()``). A report mapping that
    fails schema 1 is ``ReportUnreadableError`` (exit 3) naming each bad field, never a raw ValidationError."""
    expected = expected_record(profile)
    if report is not None and not isinstance(report, StackReport):
        report = validate_report(report)
    return compare_records(expected, report)


def compare_records(expected: Expectation, report: StackReport | None) -> VerifyResult:
    """Judge the observed record against the expected one (None: no report yet), field by field."""
    return judge(expected.as_dict(), None if report is None else report.as_dict())
