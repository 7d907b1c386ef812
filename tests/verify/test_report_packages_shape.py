"""A stack report whose ``packages`` is not the schema's object {name: version} (``StackReport.packages``): a
list of "name==version" strings or of [name, version] pairs, from an older agent or a hand-edited report. The
agent's one comparison judges it without a traceback (``stack.packages`` drifts, saying what it is), and
``trainvm diff`` refuses the file with a clear input error (exit 2) instead of an internal error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from provisioner.agent.compare import compare, report_cudnn
from provisioner.verify.diff import diff
from provisioner.verify.expect import expected_record
from tests.helpers import EXAMPLES, REPO

REPORT = REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json"


def _shapes(report: dict[str, Any]) -> dict[str, list[object]]:
    pins = sorted(report["packages"].items())
    return {"strings": [f"{k}=={v}" for k, v in pins], "pairs": [[k, v] for k, v in pins]}


@pytest.mark.parametrize("shape", ["strings", "pairs"])
def test_report_cudnn_of_a_report_whose_packages_is_a_list(shape: str) -> None:
    report = json.loads(REPORT.read_text())
    listed = dict(report, packages=_shapes(report)[shape])
    assert report_cudnn(listed) == report_cudnn(dict(report, packages={}))


@pytest.mark.parametrize("shape", ["strings", "pairs"])
def test_the_agent_judges_a_report_whose_packages_is_a_list_as_drift(profile: dict[str, Any], shape: str) -> None:
    report = json.loads(REPORT.read_text())
    result = compare(expected_record(profile).as_dict(), dict(report, packages=_shapes(report)[shape]))
    fields = {f.field: f for f in result.fields}
    assert result.status == "drift"
    assert fields["stack.packages"].ok is False and fields["stack.packages"].observed == \
        "a JSON array, not an object {name: version}"
    assert fields["stack.packages.torch"].observed is None and not fields["stack.packages.torch"].ok
    assert "stack.packages" not in {f.field for f in compare(expected_record(profile).as_dict(), report).fields}


def test_diff_against_a_report_whose_packages_is_a_list_does_not_crash(profile: dict[str, Any]) -> None:
    report = json.loads(REPORT.read_text())
    listed = dict(report, packages=_shapes(report)["strings"])
    assert {d["field"] for d in diff(profile, listed)} >= {"stack.packages.torch"}


@pytest.mark.parametrize("shape", ["strings", "pairs"])
def test_trainvm_diff_refuses_a_report_whose_packages_is_a_list(cli, tmp_path: Path, shape: str) -> None:
    report = json.loads(REPORT.read_text())
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps(dict(report, packages=_shapes(report)[shape])))
    r = cli("diff", str(EXAMPLES[0]), str(bad))
    assert r.code == 2, r.err
    assert "`packages` is a JSON array; a stack report (schema 1) has it as an object {name: version}" in r.err
    assert "internal error" not in r.err and "Traceback" not in r.err
