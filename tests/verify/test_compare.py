"""compare(): planted drifts against a matching VM report; VM and local reports judged alike."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from provisioner.verify.compare import NOMINAL_TOLERANCE, FieldResult, compare, parse_pin


def drifted(profile: dict[str, Any], report: dict[str, Any] | None) -> dict[str, FieldResult]:
    return {f.field: f for f in compare(profile, report).fields if not f.ok}


def test_matching_vm_report(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    result = compare(profile, vm_report)
    assert result.status == "match", result.drifted
    fields = {f.field: f for f in result.fields}
    assert fields["stack.cudnn"].observed == "9.1.0"  # torch's 90100, normalised
    assert fields["stack.cuda"].observed == "12.4"
    assert fields["hardware.gpu"].observed == ["T4"]  # "Tesla T4" canonicalised
    assert fields["hardware.min_gpu_memory_gib"].observed == 15.0  # 15360 MiB: within tolerance of 16
    assert fields["data[/mnt/data/glue]"].ok
    assert result.as_dict("vm-1") == {"target": "vm-1", "status": "match", "phase": None, "line": None,
                                      "message": None, "fields": [f.as_dict() for f in result.fields]}


def test_vm_and_local_reports_are_judged_alike(profile: dict[str, Any], vm_report: dict[str, Any],
                                               local_report: dict[str, Any]) -> None:
    vm, local = compare(profile, vm_report), compare(profile, local_report)
    assert local.status == vm.status == "match"
    strip = {"data[/mnt/data/glue]"}
    assert [f for f in vm.fields if f.field not in strip] == [f for f in local.fields if f.field not in strip]


# --- planted drifts ---------------------------------------------------------------------------------

def test_driver_drift(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["driver"] = "550.90.07"
    result = compare(profile, vm_report)
    assert result.status == "drift"
    assert drifted(profile, vm_report) == {
        "stack.driver": FieldResult("stack.driver", "550.127.05", "550.90.07", False)}


def test_torch_local_label_drift(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["packages"]["torch"] = "2.4.1+cu121"
    vm_report["framework"].update(version="2.4.1+cu121", cuda="12.1")
    bad = drifted(profile, vm_report)
    assert set(bad) == {"stack.packages.torch", "stack.cuda", "stack.framework"}  # the import reports the cu121 build too
    assert (bad["stack.packages.torch"].expected, bad["stack.packages.torch"].observed) == ("2.4.1+cu124", "2.4.1+cu121")
    assert bad["stack.cuda"].observed == "12.1"


def test_torch_without_local_label_is_drift(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["packages"]["torch"] = "2.4.1"
    assert set(drifted(profile, vm_report)) == {"stack.packages.torch"}


def test_python_patch_level_drift(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["python"] = "3.11.4"
    assert drifted(profile, vm_report) == {"stack.python": FieldResult("stack.python", "3.11.9", "3.11.4", False)}


def test_missing_package(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    del vm_report["packages"]["transformers"]
    assert drifted(profile, vm_report) == {
        "stack.packages.transformers": FieldResult("stack.packages.transformers", "4.44.2", None, False)}


def test_gpu_with_too_little_memory(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    profile["hardware"].update(gpu=None, min_gpu_memory_gib=24)
    assert set(drifted(profile, vm_report)) == {"hardware.min_gpu_memory_gib"}
    assert drifted(profile, vm_report)["hardware.min_gpu_memory_gib"].observed == 15.0


def test_wrong_gpu_model(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["gpus"] = [{"name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "compute_capability": "8.0"}]
    profile["hardware"]["gpu"] = ["A100"]  # a name is exact: A100 is the 40 GB part
    bad = drifted(profile, vm_report)
    assert set(bad) == {"hardware.gpu"} and bad["hardware.gpu"].observed == ["A100-80GB"]
    profile["hardware"]["gpu"] = ["A100", "A100-80GB"]
    assert drifted(profile, vm_report) == {}


def test_no_gpu_at_all(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["gpus"] = []
    assert set(drifted(profile, vm_report)) == {"hardware.gpu_count", "hardware.gpu", "hardware.min_gpu_memory_gib"}


def test_gpu_count_rule_more_is_fine_fewer_is_drift(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    t4 = vm_report["gpus"][0]
    vm_report["gpus"] = [t4, dict(t4)]
    assert compare(profile, vm_report).status == "match"  # 2 GPUs serve a 1-GPU profile
    profile["hardware"]["gpu_count"] = 4
    bad = drifted(profile, vm_report)
    assert bad["hardware.gpu_count"] == FieldResult("hardware.gpu_count", 4, 2, False)


def test_best_gpus_are_judged(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    """A workstation with a display GPU next to the compute GPU: the best one counts."""
    vm_report["gpus"].insert(0, {"name": "NVIDIA GeForce GT 1030", "memory_mib": 2048, "compute_capability": "6.1"})
    assert compare(profile, vm_report).status == "match"


def test_memory_tolerance_is_bounded(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    profile["hardware"]["min_gpu_memory_gib"] = 16
    vm_report["gpus"][0]["memory_mib"] = int(16 * 1024 * NOMINAL_TOLERANCE) - 1
    assert "hardware.min_gpu_memory_gib" in drifted(profile, vm_report)


@pytest.mark.parametrize(("pin", "observed", "ok"), [
    ("9", "90100", True), ("9.1", "90100", True), ("9.1.0", "90100", True), ("9.1.1", "90100", False),
    ("9.1", "91002", False), ("8.9", "8902", True), ("9.1.0", "9.1.0.70", True),
])
def test_cudnn_compared_at_the_precision_given(profile: dict[str, Any], vm_report: dict[str, Any],
                                              pin: str, observed: str, ok: bool) -> None:
    profile["stack"]["cudnn"] = pin
    vm_report["framework"]["cudnn"] = observed
    assert ("stack.cudnn" not in drifted(profile, vm_report)) is ok


def test_cudnn_from_library_without_framework(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["framework"] = None
    vm_report["cudnn"] = "9.1.0"
    vm_report["cuda_runtime"] = "12.4"
    # the library proves the cuDNN; the pinned torch that does not import is drift of its own
    assert set(drifted(profile, vm_report)) == {"stack.framework"}
    assert drifted(profile, vm_report)["stack.framework"].observed is None


def test_cpu_only_framework_has_no_cuda(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["framework"].update(cuda=None, cudnn=None)
    vm_report["cuda_toolkit"] = "12.4.131"
    vm_report["cudnn"] = None
    assert set(drifted(profile, vm_report)) == {"stack.cuda", "stack.cudnn"}


def test_package_names_are_canonicalised(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    profile["stack"]["packages"] = ["Typing_Extensions==4.12.2", "TRANSFORMERS==4.44.2"]
    assert compare(profile, vm_report).status == "match"
    assert {f.field for f in compare(profile, vm_report).fields} >= {
        "stack.packages.typing-extensions", "stack.packages.transformers"}


def test_driver_os_and_toolkit(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["os"] = {"id": "ubuntu", "version": "24.04", "glibc": "2.39"}
    profile["stack"]["cuda_toolkit"] = True
    bad = drifted(profile, vm_report)
    assert set(bad) == {"stack.os", "stack.cuda_toolkit"}
    assert bad["stack.os"].observed == "ubuntu-24.04"
    vm_report["cuda_toolkit"] = "12.4.131"
    assert set(drifted(profile, vm_report)) == {"stack.os"}


def test_host_requirements(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["cpu"]["count"] = 4
    vm_report["memory_gib"] = 14.6
    vm_report["disk"]["kind"] = "ssd"
    assert set(drifted(profile, vm_report)) == {"hardware.min_vcpus", "hardware.min_memory_gib",
                                                "hardware.local_nvme_gib"}


def test_data_not_staged(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["data"] = [{"dest": "/mnt/data/glue", "status": "empty"}]
    assert set(drifted(profile, vm_report)) == {"data[/mnt/data/glue]"}


# --- report status ------------------------------------------------------------------------------------

def test_no_report_is_provisioning(profile: dict[str, Any]) -> None:
    result = compare(profile, None)
    waiting = "provisioning (no report from the startup script yet)"  # pending, not drift (issue 36 item 21)
    assert result.status == "provisioning" and result.fields == (FieldResult("status", "ready", None, False, pending=waiting),)
    assert not result.drifted and [v for *_, v in result.rows()] == ["pending"]
    assert result.describe() == "provisioning (no report from the startup script yet)"


def test_running_report_is_provisioning_with_its_phase(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["status"] = "running:packages"
    result = compare(profile, vm_report)
    assert result.status == "provisioning" and [f.field for f in result.fields] == ["status"]
    assert result.phase == "packages" and result.describe() == "provisioning (phase packages)"


def test_failed_report_is_failed_with_phase_line_and_message(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    report = copy.deepcopy(vm_report)
    report["status"] = "failed:driver:212"
    report["error"] = "command failed (exit 100): apt-get install nvidia-driver-550"
    result = compare(profile, report)
    assert result.status == "failed" and (result.phase, result.line) == ("driver", 212)
    assert result.describe() == "failed (phase driver, line 212: command failed (exit 100): apt-get install nvidia-driver-550)"
    assert drifted(profile, report) == {"status": FieldResult("status", "ready", "failed:driver:212", False)}


def test_no_profile_is_never_a_match(vm_report: dict[str, Any]) -> None:
    """The review's empty "match": a report with a wrong driver and no packages judged against nothing."""
    vm_report.update(driver="470.00.00", packages={})
    for nothing in ({}, {"name": "x"}, None):
        with pytest.raises(ValueError, match="resolved profile"):
            compare(nothing, vm_report)  # type: ignore[arg-type]


def test_unpinned_fields_are_not_judged(vm_report: dict[str, Any]) -> None:
    minimal = {"name": "x", "hardware": {"gpu": None, "gpu_count": None}, "stack": {"packages": []}}
    result = compare(minimal, vm_report)
    assert result.status == "match"
    assert [f.field for f in result.fields] == ["status", "data[/mnt/data/glue]"]


def test_rows_for_the_drift_table(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["python"] = "3.11.4"
    rows = compare(profile, vm_report).rows()
    assert ("stack.python", "3.11.9", "3.11.4", "DRIFT") in rows
    assert ("hardware.gpu", "T4", "T4", "ok") in rows


@pytest.mark.parametrize(("pin", "parsed"), [
    ("torch==2.4.1+cu124", ("torch", "2.4.1+cu124")),
    ("Typing_Extensions==4.12.2", ("typing-extensions", "4.12.2")),
    ("jax[cuda12]==0.4.31", ("jax", "0.4.31")),
    ("numpy>=1.26", ("numpy", ">=1.26")),
])
def test_parse_pin(pin: str, parsed: tuple[str, str]) -> None:
    assert parse_pin(pin) == parsed
