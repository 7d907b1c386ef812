"""trainvm: reproducible cloud GPU training VMs from one pinned profile."""

__version__ = "0.1.0"
