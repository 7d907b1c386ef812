"""The one ``aborted: ...`` line of an interrupted ``up`` quotes what the VM left behind really bills: a VM stopped
but still allocated (Azure's PowerState/stopped after a guest poweroff: learn.microsoft.com/azure/virtual-machines/
states-billing, "Stopped ... billed for compute") bills compute + disks, not the disks-only price of a stopped VM."""

from __future__ import annotations

from provisioner.commands.up_abort import Leaves
from provisioner.providers.base import InstanceRecord


def _record(cloud: str, state: str) -> InstanceRecord:
    return InstanceRecord(name="vm1", cloud=cloud, region="eastus", zone=None, instance_type="Standard_NC4as_T4_v3",
                          state=state, profile="p", hash="h", price_hourly=0.526, created="2026-12-07T00:00:00Z",
                          disks_hourly=0.026, kept_hourly=0.026)


def test_a_deallocated_vm_is_quoted_at_what_it_keeps_costing() -> None:
    line = str(Leaves(name="vm1", record=_record("azure", "DEALLOCATED")).aborted())
    assert "stopped (DEALLOCATED): it keeps costing $0.026/h" in line


def test_an_allocated_stopped_vm_is_quoted_at_compute_plus_disks() -> None:
    line = str(Leaves(name="vm1", record=_record("azure", "STOPPED")).aborted())
    assert "still allocated, and bills $0.552/h (compute + disks)" in line
    assert "keeps costing $0.026/h" not in line


def test_a_stopped_vm_elsewhere_is_quoted_at_what_it_keeps_costing() -> None:
    line = str(Leaves(name="vm1", record=_record("aws", "STOPPED")).aborted())
    assert "stopped (STOPPED): it keeps costing $0.026/h" in line
