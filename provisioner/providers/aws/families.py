"""AWS instance types: instance store NVMe per type, and the catalog's ``family`` of a type
(its ``family_of`` hook, provisioner/hooks/). Pure data: importing it imports no SDK."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# --------------------------------------------------------------------------------------------
# AWS. Instance store NVMe per type, GB -> GiB (floor).
# Source: docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (instance store volumes).
# --------------------------------------------------------------------------------------------
_AWS_NVME_GB = {
    "g4dn.xlarge": 125, "g4dn.2xlarge": 225, "g4dn.4xlarge": 225, "g4dn.8xlarge": 900,
    "g4dn.12xlarge": 900, "g4dn.16xlarge": 900, "g4dn.metal": 1800,
    "g5.xlarge": 250, "g5.2xlarge": 450, "g5.4xlarge": 600, "g5.8xlarge": 900,
    "g5.12xlarge": 3800, "g5.16xlarge": 1900, "g5.24xlarge": 3800, "g5.48xlarge": 7600,
    "g6.xlarge": 250, "g6.2xlarge": 450, "g6.4xlarge": 600, "g6.8xlarge": 900,
    "g6.12xlarge": 3760, "g6.16xlarge": 1880, "g6.24xlarge": 3760, "g6.48xlarge": 7520,
    "g6e.xlarge": 250, "g6e.2xlarge": 450, "g6e.4xlarge": 600, "g6e.8xlarge": 900,
    "g6e.12xlarge": 3800, "g6e.16xlarge": 1900, "g6e.24xlarge": 3800, "g6e.48xlarge": 7600,
    "p3dn.24xlarge": 1800, "p4d.24xlarge": 8000, "p4de.24xlarge": 8000,
    "p5.4xlarge": 3840, "p5.48xlarge": 30720,
}
AWS_LOCAL_NVME_GIB: Mapping[str, int] = MappingProxyType(
    {k: int(v * 1e9 // 2**30) for k, v in _AWS_NVME_GB.items()}
)


def family(instance_type: str) -> str:
    """The catalog's ``family`` of an EC2 instance type: what precedes the size ("p4d" of "p4d.24xlarge")."""
    return instance_type.split(".", 1)[0]
