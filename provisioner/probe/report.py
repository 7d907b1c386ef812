"""probe(): this machine as a stack report -- the agent's one probe (``provisioner.agent.report``),
which the VM's ``python3 -m provisioner.agent report`` runs too. Re-exported for the workstation."""

from provisioner.agent.report import SCHEMA, build_report, cuda_runtime, major_minor, probe, refine_cudnn
from provisioner.agent.system import data_status

__all__ = ["SCHEMA", "build_report", "cuda_runtime", "data_status", "major_minor", "probe", "refine_cudnn"]
