"""diff(): profile/profile, report/report, profile/report."""

from __future__ import annotations

import copy
from typing import Any

from provisioner.verify.diff import diff, flatten, is_report, project_report


def fields(differences: list[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    return {d["field"]: (d["a"], d["b"]) for d in differences}


def test_identical_documents_have_no_difference(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    assert diff(profile, copy.deepcopy(profile)) == []
    assert diff(vm_report, copy.deepcopy(vm_report)) == []


def test_two_profiles(profile: dict[str, Any]) -> None:
    other = copy.deepcopy(profile)
    other["stack"]["packages"] = ["transformers==4.45.0", "torch==2.4.1+cu124", "accelerate==0.34.2"]
    other["stack"]["driver"] = "560.35.03"
    other["hardware"]["gpu"] = ["T4"]  # same as "T4"
    other["data"][0]["source"] = "s3://bucket/glue/"
    assert fields(diff(profile, other)) == {
        "stack.driver": ("550.127.05", "560.35.03"),
        "stack.packages.transformers": ("4.44.2", "4.45.0"),
        "stack.packages.typing-extensions": ("4.12.2", None),
        "stack.packages.accelerate": (None, "0.34.2"),
        "data[/mnt/data/glue].source": ("gs://bucket/glue/", "s3://bucket/glue/"),
    }


def test_two_reports_ignore_timings_and_free_space(vm_report: dict[str, Any]) -> None:
    other = copy.deepcopy(vm_report)
    other["phases"]["driver"]["seconds"] = 301.0
    other["disk"]["free_gib"] = 12.0
    other["packages"]["Transformers"] = other["packages"].pop("transformers")  # same name
    assert diff(vm_report, other) == []
    other["gpus"][0]["name"] = "NVIDIA L4"
    other["packages"]["torch"] = "2.4.1+cu121"
    other["phases"]["data"]["status"] = "failed"
    assert fields(diff(vm_report, other)) == {
        "gpus[0].name": ("Tesla T4", "NVIDIA L4"),
        "packages.torch": ("2.4.1+cu124", "2.4.1+cu121"),
        "phases.data.status": ("done", "failed"),
    }


def test_profile_and_report(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    """Only fields and packages the profile sets; hardware minimums described, not judged."""
    assert fields(diff(profile, vm_report)) == {"hardware.min_memory_gib": (30, 29)}
    vm_report["driver"] = "550.90.07"
    vm_report["packages"]["torch"] = "2.4.1+cu121"
    vm_report["framework"]["cuda"] = "12.1"
    result = fields(diff(vm_report, profile))  # either order
    assert result == {
        "hardware.min_memory_gib": (29, 30),
        "stack.driver": ("550.90.07", "550.127.05"),
        "stack.cuda": ("12.1", "12.4"),
        "stack.packages.torch": ("2.4.1+cu121", "2.4.1+cu124"),
    }


def test_profile_and_report_cudnn_at_profile_precision(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    profile["stack"]["cudnn"] = "9.1"
    assert "stack.cudnn" not in fields(diff(profile, vm_report))
    profile["stack"]["cudnn"] = "8.9"
    assert fields(diff(profile, vm_report))["stack.cudnn"] == ("8.9", "9.1.0")


def test_kind_detection(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    assert is_report(vm_report) and not is_report(profile)


def test_projection(vm_report: dict[str, Any]) -> None:
    projected = project_report(vm_report)
    assert projected["hardware"] == {"gpu": ["T4"], "gpu_count": 1, "min_gpu_memory_gib": 16, "min_vcpus": 8,
                                     "min_memory_gib": 29}
    assert projected["stack"]["cudnn"] == "9.1.0" and projected["stack"]["os"] == "ubuntu-22.04"
    assert "torch==2.4.1+cu124" in projected["stack"]["packages"]


def test_flatten_keys_lists_by_dest() -> None:
    flat = flatten({"data": [{"dest": "/a", "source": "gs://x"}, {"dest": "/b", "source": "gs://y"}],
                    "placement": {"clouds": ["gcp", "azure"]}})
    assert flat == {"data[/a].dest": "/a", "data[/a].source": "gs://x", "data[/b].dest": "/b",
                    "data[/b].source": "gs://y", "placement.clouds": ["gcp", "azure"]}


def test_a_hand_written_report_with_parts_of_the_wrong_shape_is_projected_without_an_internal_error() -> None:
    """``diff`` reads report JSON as written (no validation): since the document is typed ``Mapping[str, object]``
    (issue 37), a part of the wrong shape reads as absent; it was an AttributeError (exit 70) before. Numbers written as
    strings are read as before."""
    report = {"schema": "trainvm.report/1", "gpus": [{"name": "Tesla T4", "memory_mib": "15360"}, "T4"], "cpu": 8,
              "os": None, "memory_gib": "29"}
    projected = project_report(report)
    assert projected["hardware"] == {"gpu": ["T4"], "gpu_count": 1, "min_gpu_memory_gib": 16, "min_vcpus": None,
                                     "min_memory_gib": 29}
    assert projected["stack"]["os"] is None
