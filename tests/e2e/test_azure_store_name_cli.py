"""issue 36 item 7 end to end: the real CLI against the ARM emulator and the shared Azurite. The payload store's
storage account name (``tv`` + a hash of subscription and region) is held by another tenant in the first planned
region: `up` fails over to the next region instead of stopping with exit 1, and leaves no empty store group there."""

from __future__ import annotations

import json

from provisioner.providers.azure.store import account_name, store_group
from tests.e2e.test_faults_cli import arm, az_t4  # noqa: F401 - fixtures (env: tests/e2e/conftest.py)


def test_a_taken_store_name_skips_the_region_and_up_goes_on(cli, arm, az_t4):  # noqa: F811
    first = json.loads(cli("plan", az_t4, "--cloud", "azure", "--json").out)["chosen"]["region"]
    arm.state.taken_storage_names.add(account_name(arm.subscription_id, first))
    up = cli("up", az_t4, "--yes", "--json", "--cloud", "azure")
    assert up.code == 0, up.err
    doc = up.json()
    assert (doc["attempts"][0]["region"], doc["attempts"][0]["error_code"]) == (first, "StorageAccountAlreadyTaken")
    assert all(a["region"] != first for a in doc["attempts"][1:]) and doc["attempts"][-1]["outcome"] == "created"
    assert doc["region"] != first and store_group(first) not in arm.resource_groups()
    assert cli("down", doc["name"], "--yes").code == 0 and arm.vm_groups() == []
