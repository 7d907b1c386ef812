"""verify of a rehearsal (issue 38: a profile that asks for a GPU run on a machine without one, ``CloudSpec.rehearsal``):
the report's status is ``rehearsed`` and its GPU facts are "not checked"; verify shows those fields as not checked,
never ``match``, and the rest is judged as for any VM."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from provisioner.agent.compare import judge
from provisioner.agent.report import REHEARSAL
from provisioner.verify.cluster import compare_cluster
from provisioner.verify.compare import compare
from provisioner.verify.expect import expectation

GPU_ROWS = {"stack.driver", "hardware.gpu_count", "hardware.gpu", "hardware.min_gpu_memory_gib", "stack.framework.gpu"}


@pytest.fixture
def rehearsed(vm_report: dict[str, Any]) -> dict[str, Any]:
    """The matching VM report as the agent writes it on a machine without a GPU."""
    report = copy.deepcopy(vm_report)
    report.update(status="rehearsed", gpus=None, driver=None, cuda_driver_max=None,
                  framework=dict(report["framework"], cuda_available=None),
                  not_checked={k: REHEARSAL for k in ("gpus", "driver", "cuda_driver_max", "framework.cuda_available")})
    return report


def test_a_rehearsal_is_rehearsed_with_its_gpu_fields_not_checked(profile: dict[str, Any], rehearsed: dict[str, Any]) -> None:
    result = compare(profile, rehearsed)
    assert result.status == "rehearsed" and not result.drifted
    rows = {field: verdict for field, _, _, verdict in result.rows()}
    assert {f for f, v in rows.items() if v == f"not checked ({REHEARSAL})"} == GPU_ROWS | {"status"}
    assert not any(f.ok for f in result.fields if f.not_checked)  # none of them counts as seen
    assert rows["stack.python"] == "ok" and rows["stack.cuda"] == "ok"  # the rest is judged as on a VM
    assert result.describe() == f"rehearsed ({REHEARSAL}: 5 fields not checked; never a match)"
    doc = result.as_dict("vm-1")
    assert doc["status"] == "rehearsed"
    assert next(f for f in doc["fields"] if f["field"] == "stack.driver") == {
        "field": "stack.driver", "expected": "550.127.05", "observed": None, "ok": False, "not_checked": REHEARSAL}


def test_a_rehearsal_with_a_gpu_fact_in_its_report_still_does_not_check_it(profile: dict[str, Any],
                                                                           vm_report: dict[str, Any]) -> None:
    """Whatever a rehearsal's report holds (an old agent's empty list, a stray driver), nothing GPU is judged."""
    result = compare(profile, dict(vm_report, status="rehearsed"))
    assert result.status == "rehearsed"
    assert all(f.not_checked and f.observed is None for f in result.fields if f.field in GPU_ROWS)


def test_a_rehearsal_that_drifts_is_drift(profile: dict[str, Any], rehearsed: dict[str, Any]) -> None:
    result = compare(profile, dict(rehearsed, python="3.11.4"))
    assert result.status == "drift" and [f.field for f in result.drifted] == ["stack.python"]


def test_a_failed_rehearsal_is_failed(profile: dict[str, Any], rehearsed: dict[str, Any]) -> None:
    result = compare(profile, dict(rehearsed, status="failed:driver:130", error="rehearsal: the NVIDIA kernel module ..."))
    assert result.status == "failed" and result.phase == "driver"


def test_the_vms_gate_reads_the_rehearsal_from_its_expectation(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    """stack-check on the VM runs before the final status: expected.json's ``rehearsal`` keeps the framework's GPU
    access (false there: no GPU) from failing the packages phase."""
    no_gpu = dict(vm_report, status="ready", framework=dict(vm_report["framework"], cuda_available=False))
    plain = {f.field: f for f in judge(expectation(profile), no_gpu, ("stack",))}
    assert plain["stack.framework.gpu"].drifted
    rehearsal = {f.field: f for f in judge({**expectation(profile), "rehearsal": True}, no_gpu, ("stack",))}
    assert rehearsal["stack.framework.gpu"].not_checked == REHEARSAL and not any(f.drifted for f in rehearsal.values())


def test_a_cluster_of_rehearsed_nodes_is_rehearsed(profile: dict[str, Any], rehearsed: dict[str, Any]) -> None:
    two = dict(profile, hardware=dict(profile["hardware"], nodes=2))
    result = compare_cluster(two, {"n-0": rehearsed, "n-1": rehearsed})
    assert result.status == "rehearsed", result.fields
    assert all(f.not_checked == REHEARSAL and not f.drifted for f in result.fields if f.field.endswith(".status"))
    assert compare_cluster(two, {"n-0": rehearsed, "n-1": dict(rehearsed, python="3.11.4")}).status == "drift"
