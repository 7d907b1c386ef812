"""Moved to ``provisioner/providers/stack_report.py`` (issue 37: the stack report is a record of the provider
contract, ``Provider.report``; a cloud package decodes it without importing verify/). This name re-exports it for
branches and tests written before the move; import ``provisioner.providers.stack_report`` in new code."""

from provisioner.providers.stack_report import (
    CpuInfo,
    DataState,
    DiskInfo,
    Framework,
    Gpu,
    OsInfo,
    PhaseTiming,
    StackReport,
    decode_report,
    last_console_report,
)

__all__ = ["CpuInfo", "DataState", "DiskInfo", "Framework", "Gpu", "OsInfo", "PhaseTiming", "StackReport",
           "decode_report", "last_console_report"]
