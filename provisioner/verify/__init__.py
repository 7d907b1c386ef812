"""Compare a stack report with a profile (verify) and documents with each other (diff)."""

from provisioner.verify.compare import NOMINAL_TOLERANCE, FieldResult, VerifyResult, compare, parse_pin
from provisioner.verify.diff import diff, flatten, is_report, project_report

__all__ = [
    "NOMINAL_TOLERANCE",
    "FieldResult",
    "VerifyResult",
    "compare",
    "diff",
    "flatten",
    "is_report",
    "parse_pin",
    "project_report",
]
