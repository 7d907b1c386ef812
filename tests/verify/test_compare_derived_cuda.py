"""A profile without stack.cuda is still checked for CUDA: the framework pin says which."""

from __future__ import annotations

import json
from pathlib import Path

from provisioner.verify.compare import compare

REPORT = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "probe" / "report-vm-t4.json").read_text())


def test_cuda_derived_from_torch_label_when_profile_omits_it() -> None:
    profile = {"stack": {"driver": "550.127.05", "python": "3.11.9", "packages": ["torch==2.4.1+cu124"]}, "hardware": {}}
    fields = {f.field: f for f in compare(profile, REPORT).fields}
    assert fields["stack.cuda"].expected == "12.4" and fields["stack.cuda"].ok
    cpu_build = dict(REPORT, framework={**REPORT["framework"], "cuda": "12.1"})
    assert not {f.field: f for f in compare(profile, cpu_build).fields}["stack.cuda"].ok
