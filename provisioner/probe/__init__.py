"""Probe this machine: GPUs, driver, CUDA/cuDNN, Python packages, OS, CPU, RAM, disk.

``probe()`` returns a stack report in the same shape as the VM's /var/lib/trainvm/report.json.
"""

from provisioner.probe.gpu import (
    GpuInfo,
    GpuProbe,
    GpuSpec,
    canonical_gpu_name,
    cloud_gpus,
    gpu_spec,
    is_consumer,
    known_gpus,
    parse_smi_csv,
    parse_smi_xml,
    probe_gpus,
)
from provisioner.probe.python_env import PythonEnv, normalize_cudnn, probe_python
from provisioner.probe.report import build_report, major_minor, probe

__all__ = [
    "GpuInfo",
    "GpuProbe",
    "GpuSpec",
    "PythonEnv",
    "build_report",
    "canonical_gpu_name",
    "cloud_gpus",
    "gpu_spec",
    "is_consumer",
    "known_gpus",
    "major_minor",
    "normalize_cudnn",
    "parse_smi_csv",
    "parse_smi_xml",
    "probe",
    "probe_gpus",
    "probe_python",
]
