"""System probe (OS and glibc, CPU, RAM, disks, nvcc, system cuDNN, data destinations): the agent's
(``provisioner.agent.system``), re-exported for the workstation's callers."""

from provisioner.agent.system import (
    DiskInfo,
    cpu_info,
    data_status,
    disk_info,
    glibc_version,
    memory_gib,
    mount_for,
    nvcc_version,
    os_release,
    parse_nvcc,
    system_cudnn,
)

__all__ = ["DiskInfo", "cpu_info", "data_status", "disk_info", "glibc_version", "memory_gib", "mount_for", "nvcc_version",
           "os_release", "parse_nvcc", "system_cudnn"]
