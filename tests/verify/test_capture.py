"""capture: the gpu: rule, requirements, warnings, YAML; a captured profile verifies against its report."""

from __future__ import annotations

import copy
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from provisioner.probe.capture import (
    DEFAULT_DRIVER,
    MIN_CLOUD_DRIVER,
    build_profile,
    closest_os,
    compatible_cloud_gpus,
    to_yaml,
)
from provisioner.probe.gpu import GpuSpec, cloud_gpus
from provisioner.verify.compare import compare
from provisioner.verify.diff import diff


def with_gpus(report: dict[str, Any], name: str, memory_mib: int, cc: str, count: int = 1) -> dict[str, Any]:
    out = copy.deepcopy(report)
    out["gpus"] = [{"name": name, "memory_mib": memory_mib, "compute_capability": cc} for _ in range(count)]
    return out


@pytest.mark.parametrize(("name", "memory", "cc", "expected"), [
    ("NVIDIA GeForce RTX 4090", 24564, "8.9", ["L4", "L40S"]),  # not T4 (7.5), not A10G (8.6), not H100 (9.0)
    ("Tesla T4", 15360, "7.5", ["T4"]),
    ("Tesla V100-SXM2-16GB", 16384, "7.0", ["V100", "V100-32GB", "T4"]),
    ("NVIDIA A100-SXM4-40GB", 40960, "8.0", ["A100", "A100-80GB", "L40S"]),
    ("NVIDIA A10G", 23028, "8.6", ["A10", "A10G", "L4", "L40S"]),
    ("NVIDIA H100 80GB HBM3", 81559, "9.0", ["H100", "H200"]),
    ("NVIDIA GeForce RTX 3090", 24576, "8.6", ["A10", "A10G", "L4", "L40S"]),
])
def test_gpu_list_by_binary_compatibility(local_report: dict[str, Any], name: str, memory: int, cc: str,
                                          expected: list[str]) -> None:
    profile, _, _ = build_profile(with_gpus(local_report, name, memory, cc), "ws")
    assert profile["hardware"]["gpu"] == expected


def test_compatible_cloud_gpus_rule() -> None:
    table = {"X": GpuSpec("X", "8.6", 24), "Y": GpuSpec("Y", "9.0", 80), "Z": GpuSpec("Z", "8.9", 16)}
    assert compatible_cloud_gpus("8.6", 24, table) == ["X"]  # Z: too little VRAM; Y: other major
    assert compatible_cloud_gpus("8.0", 16, cloud_gpus()) == ["A100", "A100-80GB", "A10", "A10G", "L4", "L40S"]


def test_rtx4090_profile(local_report: dict[str, Any]) -> None:
    report = with_gpus(local_report, "NVIDIA GeForce RTX 4090", 24564, "8.9", count=2)
    report["driver"] = "550.127.05"
    profile, comment, warnings = build_profile(report, "my-ws")
    assert profile["name"] == "my-ws"
    assert profile["hardware"] == {"gpu": ["L4", "L40S"], "gpu_count": 2, "min_gpu_memory_gib": 24,
                                   "min_vcpus": 8, "min_memory_gib": 29}
    assert profile["stack"] == {
        "os": "ubuntu-22.04", "driver": "550.127.05", "cuda": "12.4", "cudnn": "9.1.0", "python": "3.11.9",
        "packages": ["numpy==1.26.4", "torch==2.4.1+cu124", "transformers==4.44.2", "typing-extensions==4.12.2"]}
    assert any("consumer GPU" in w for w in warnings)
    assert "2 x NVIDIA GeForce RTX 4090 (compute capability 8.9, 24564 MiB)" in comment
    assert "BLAS (numpy): openblas 0.3.23" in comment
    assert "Disk: /mnt/data on nvme storage" in comment
    assert "sm_89" in comment


def test_captured_profile_verifies_against_its_own_report(local_report: dict[str, Any]) -> None:
    for report in (local_report, with_gpus(local_report, "NVIDIA GeForce RTX 4090", 24564, "8.9")):
        profile, _, _ = build_profile(report, "ws")
        result = compare(profile, report)
        if report["gpus"][0]["name"] == "Tesla T4":
            assert result.status == "match", result.drifted
            assert diff(profile, report) == []
        else:  # the local consumer GPU is not in its own cloud list: that is the point of the list
            assert {f.field for f in result.drifted} == {"hardware.gpu"}
            assert [d["field"] for d in diff(profile, report)] == ["hardware.gpu"]


def test_warnings(local_report: dict[str, Any]) -> None:
    report = copy.deepcopy(local_report)
    report["driver"] = "470.256.02"
    report["packages"].update({"myproj": "0.1.0", "scipy": "1.13.1", "mylib": "0.3.0"})
    report["package_sources"] = {
        "myproj": {"installer": "pip", "editable": True, "url": "file:///home/me/myproj"},
        "scipy": {"installer": "conda", "editable": False, "conda_package": "scipy"},
        "mylib": {"installer": "pip", "editable": False, "url": "https://github.com/me/mylib.git", "vcs": "git"},
    }
    report["python_env"]["conda_packages"] = {"cudatoolkit": "11.8.0", "mkl": "2023.1.0", "python": "3.11.9",
                                              "libgcc-ng": "13.2.0", "scipy": "1.13.1"}
    profile, comment, warnings = build_profile(report, "ws")
    text = "\n".join(warnings)
    assert f"older than cloud images support ({MIN_CLOUD_DRIVER}" in text
    assert "editable installs are not in the profile" in text and "myproj" in text
    assert "installed by conda" in text and "scipy" in text
    assert "conda-only packages (no pip equivalent; not reproduced on the VM): cudatoolkit, mkl" in text
    assert "VCS" in text and "mylib" in text
    assert "myproj==0.1.0" not in profile["stack"]["packages"]
    assert "scipy==1.13.1" in profile["stack"]["packages"]
    assert "Not reproducible on the cloud:" in comment


def test_no_gpu_no_framework(local_report: dict[str, Any]) -> None:
    report = copy.deepcopy(local_report)
    report.update(gpus=[], driver=None, cuda_driver_max=None, framework=None, cuda_runtime=None, cudnn=None,
                  os={"id": "arch", "version": None, "glibc": "2.40"})
    profile, comment, warnings = build_profile(report, "ws")
    assert "gpu" not in profile["hardware"] and "gpu_count" not in profile["hardware"]
    assert profile["stack"] == {"os": "ubuntu-24.04", "driver": DEFAULT_DRIVER, "python": "3.11.9",
                                "packages": profile["stack"]["packages"]}
    text = "\n".join(warnings)
    assert "no NVIDIA GPU" in text and "no framework" in text and "not a cloud image" in text
    assert "no NVIDIA driver" in text
    assert "Local GPU: none" in comment
    # what this machine cannot match is reported as drift, nothing else: the OS and the CUDA that the
    # pinned torch+cu124 build implies but that no importable framework confirms; the driver cannot be
    # observed without a GPU and is shown as skipped (issue 12: a machine matches its own capture)
    result = compare(profile, report)
    assert {f.field for f in result.drifted} == {"stack.os", "stack.cuda", "stack.framework"}
    assert {f.field for f in result.fields if f.skipped} == {"stack.driver"}  # no gpu_count: nothing to skip
    assert not any(f.ok for f in result.fields if f.skipped)  # shown, not counted as verified


@pytest.mark.parametrize(("glibc", "os_name"), [
    ("2.31", "ubuntu-22.04"), ("2.35", "ubuntu-22.04"), ("2.36", "debian-12"), ("2.38", "ubuntu-24.04"),
    ("2.41", "ubuntu-24.04"), (None, "ubuntu-22.04"),
])
def test_closest_os_by_glibc(glibc: str | None, os_name: str) -> None:
    assert closest_os(glibc) == os_name


def test_unparsable_versions_are_left_out(local_report: dict[str, Any]) -> None:
    report = copy.deepcopy(local_report)
    report["packages"]["weird"] = "1.0-custom-build"
    profile, _, warnings = build_profile(report, "ws")
    assert not any(p.startswith("weird==") for p in profile["stack"]["packages"])
    assert any("weird 1.0-custom-build" in w for w in warnings)


def test_gpu_without_compatible_cloud_part(local_report: dict[str, Any]) -> None:
    profile, _, warnings = build_profile(with_gpus(local_report, "NVIDIA GeForce RTX 5090", 32607, "12.0"), "ws")
    assert "gpu" not in profile["hardware"] and profile["hardware"]["min_gpu_memory_gib"] == 32
    assert any("no cloud GPU has the same architecture major" in w for w in warnings)


def test_yaml_output(local_report: dict[str, Any]) -> None:
    report = with_gpus(local_report, "NVIDIA GeForce RTX 4090", 24564, "8.9")
    profile, comment, _ = build_profile(report, "ws")
    text = to_yaml(profile, comment)
    assert text.startswith("# Captured by `trainvm capture`.\n")
    assert "gpu: [L4, L40S]\n" in text
    assert 'driver: "550.127.05"\n' in text and 'cuda: "12.4"\n' in text and 'python: "3.11.9"\n' in text
    assert "    - torch==2.4.1+cu124\n" in text
    loaded = YAML(typ="safe").load(StringIO(text))
    assert loaded == profile


def test_captured_profile_validates(local_report: dict[str, Any], tmp_path: Path) -> None:
    """The YAML that capture writes loads through the profile model and the compatibility rules."""
    profile_mod = pytest.importorskip("provisioner.profile")
    for name, memory, cc in (("NVIDIA GeForce RTX 4090", 24564, "8.9"), ("Tesla T4", 15360, "7.5"),
                             ("NVIDIA A100-SXM4-40GB", 40960, "8.0")):
        report = with_gpus(local_report, name, memory, cc, count=2)
        profile, comment, _ = build_profile(report, "ws-capture")
        path = tmp_path / f"{cc}.yaml"
        path.write_text(to_yaml(profile, comment))
        loaded = profile_mod.load_profile(path)
        result = compare(loaded.profile.model_dump(), report)  # the resolved model, as verify uses it
        assert result.status == ("match" if cc != "8.9" else "drift"), result.drifted


def test_display_gpu_beside_the_compute_gpus_is_not_mirrored(local_report: dict[str, Any]) -> None:
    report = with_gpus(local_report, "NVIDIA GeForce RTX 4090", 24564, "8.9", count=2)
    report["gpus"].append({"name": "NVIDIA GeForce GT 1030", "memory_mib": 2048, "compute_capability": "6.1"})
    profile, comment, warnings = build_profile(report, "ws")
    assert profile["hardware"]["gpu"] == ["L4", "L40S"] and profile["hardware"]["gpu_count"] == 2
    assert any("not mirrored (NVIDIA GeForce GT 1030)" in w for w in warnings)
    assert "1 x NVIDIA GeForce GT 1030" in comment and "sm_89" in comment
    assert {f.field for f in compare(profile, report).drifted} == {"hardware.gpu"}  # only the consumer 4090 itself
