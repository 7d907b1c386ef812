"""The documented per-GPU host defaults (planner/from_profile.py), stated here from the README's numbers:
4 vCPUs per GPU under 40 GiB, 8 from 40 GiB, at most 96; RAM 3.75 GiB per vCPU and at least 0.9x the GPUs'
memory; explicit values win; the smallest accepted GPU sets the numbers."""

from __future__ import annotations

import pytest

from provisioner.planner.from_profile import HostDefaults, build_request, host_defaults
from provisioner.profile import load_profile
from tests.helpers import make_profile


def _loaded(write_yaml, **hardware):
    return load_profile(write_yaml(make_profile(hardware={"gpu_count": 1, **hardware})))


@pytest.mark.parametrize("gpu,count,vcpus,memory", [
    ("T4", 1, 4, 15.0),        # 4 x 3.75 = 15 >= 0.9 x 16 = 14.4
    ("T4", 4, 16, 60.0),       # 16 x 3.75 = 60 >= 57.6
    ("L4", 2, 8, 43.2),        # 8 x 3.75 = 30 < 0.9 x 48 = 43.2
    ("A100", 1, 8, 36.0),      # 40 GiB: 8 per GPU; 8 x 3.75 = 30 < 36
    ("H100", 8, 64, 576.0),    # 0.9 x 640
    ("H100", 16, 96, 1152.0),  # capped at 96 vCPUs
])
def test_documented_defaults(write_yaml, gpu: str, count: int, vcpus: int, memory: float) -> None:
    host = host_defaults(_loaded(write_yaml, gpu=gpu, gpu_count=count), {})
    assert host == HostDefaults(vcpus, memory, {"min_vcpus": vcpus, "min_memory_gib": memory})


def test_explicit_values_win_and_are_not_reported_as_defaults(write_yaml) -> None:
    host = host_defaults(_loaded(write_yaml, gpu="H100", min_vcpus=12, min_memory_gib=100), {})
    assert host == HostDefaults(12, 100, {})
    half = host_defaults(_loaded(write_yaml, gpu="T4", min_vcpus=10), {})
    assert half == HostDefaults(10, 37.5, {"min_memory_gib": 37.5})


def test_the_smallest_accepted_gpu_sets_the_numbers(write_yaml) -> None:
    both = host_defaults(_loaded(write_yaml, gpu=["T4", "A100"]), {})
    assert (both.min_vcpus, both.min_memory_gib) == (4, 15.0)


def test_build_request_carries_them(write_yaml) -> None:
    request, applied = build_request(_loaded(write_yaml, gpu="A100"))
    assert (request.min_vcpus, request.min_memory_gib) == (8, 36.0) and applied == {"min_vcpus": 8, "min_memory_gib": 36.0}
