"""issue 36 item 5 end to end: the real CLI against the ARM emulator and the shared Azurite. The caller is Owner (the
preflight's permissions API lists roleAssignments/write), but a deny assignment on the payload store's group refuses
the VM identity's Storage Blob Data Reader (403 AuthorizationFailed). `up` stops with exit 3 before any VM was
requested, and leaves no group, identity or role assignment."""

from __future__ import annotations

import json

from provisioner.providers.azure.store import store_group
from tests.e2e.test_faults_cli import arm, az_t4  # noqa: F401 - fixtures (env: tests/e2e/conftest.py)


def test_a_deny_assignment_stops_up_before_anything_bills(cli, arm, az_t4):  # noqa: F811
    region = json.loads(cli("plan", az_t4, "--cloud", "azure", "--json").out)["chosen"]["region"]
    arm.deny(f"/subscriptions/{arm.subscription_id}/resourceGroups/{store_group(region)}")
    up = cli("up", az_t4, "--yes", "--json", "--cloud", "azure")
    assert up.code == 3, up.err
    assert "deny assignment" in up.err and "Storage Blob Data Reader" in up.err
    assert [c.status for c in arm.calls("PUT", r"/roleAssignments/")][-1] == 403
    assert arm.calls("PUT", r"/virtualMachines/") == [] and arm.calls("PUT", r"/virtualMachineScaleSets/") == []
    assert arm.vm_groups() == [] and arm.state.identities == {} and arm.state.role_assignments == {}
