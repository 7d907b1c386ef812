"""Shared documents for verify/diff/capture tests: a VM report (as the startup script writes it)
and the resolved profile it was built from (the profile model's model_dump() shape)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"


@pytest.fixture
def vm_report() -> dict[str, Any]:
    return json.loads((FIXTURES / "report-vm-t4.json").read_text())


@pytest.fixture
def local_report(vm_report: dict[str, Any]) -> dict[str, Any]:
    """The same machine as probe() reports it: source local, extra keys, cudnn from the framework."""
    report = copy.deepcopy(vm_report)
    report.update(source="local", cuda_runtime="12.4", blas={"name": "openblas", "version": "0.3.23"},
                  package_sources={}, python_env={"executable": "/usr/bin/python3", "conda": False,
                                                  "conda_packages": {}}, notes=[], phases={}, data=[])
    return report


@pytest.fixture
def profile() -> dict[str, Any]:
    return {
        "name": "bert-finetune",
        "extends": None,
        "hardware": {"gpu": "T4", "gpu_count": 1, "min_gpu_memory_gib": 16, "min_vcpus": 8, "min_memory_gib": 30,
                     "boot_disk": {"type": "ssd", "size_gib": 200}, "local_nvme_gib": 375},
        "placement": {"clouds": ["gcp", "azure"], "regions": None, "spot": False, "max_price_per_hour": 3.0,
                      "ssh_from": None},
        "stack": {"os": "ubuntu-22.04", "driver": "550.127.05", "cuda": "12.4", "cuda_toolkit": False,
                  "cudnn": "9.1.0", "python": "3.11.9",
                  "packages": ["torch==2.4.1+cu124", "transformers==4.44.2", "typing-extensions==4.12.2"],
                  "requirements": None, "env": {"PYTHONHASHSEED": "0"}},
        "data": [{"source": "gs://bucket/glue/", "dest": "/mnt/data/glue"}],
        "lifecycle": {"idle_shutdown_minutes": 60, "max_run_hours": 24},
    }
