"""The pure side of the Azure provider: request builders, the render preview, error classification and
the report parsers. No emulator, no SDK."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import request as R
from provisioner.providers.base import (
    AuthError,
    CapacityError,
    InvalidRequestError,
    ProviderError,
    QuotaError,
    RetryExhaustedError,
)
from tests.azure.conftest import REPO, named


def test_importing_the_request_module_imports_no_sdk():
    code = ("import sys, provisioner.providers.azure.request, provisioner.providers.azure.errors, "
            "provisioner.providers.azure.provider; print([m for m in sys.modules if m.startswith('azure')])")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_request_preview_for_render(t4_spec, t4):
    preview = R.request_preview(t4_spec, t4)
    assert list(preview) == ["Microsoft.Resources/resourceGroups", "Microsoft.Network/virtualNetworks",
                             "Microsoft.Network/networkSecurityGroups", "Microsoft.ManagedIdentity/userAssignedIdentities",
                             "Microsoft.Authorization/roleAssignments",  # the example sets max_run_hours
                             "Microsoft.Compute/virtualMachines"]  # issue 36 item 5: the compute comes last
    assert preview["Microsoft.ManagedIdentity/userAssignedIdentities"]["name"] == f"{t4_spec.name}-identity"
    role = preview["Microsoft.Authorization/roleAssignments"]
    assert role["scope"] == f"/subscriptions/SUBSCRIPTION/resourceGroups/trainvm-{t4_spec.name}"
    assert role["body"]["properties"]["roleDefinitionId"].endswith("/roleDefinitions/" + R.ROLES["Virtual Machine Contributor"])
    vm = preview["Microsoft.Compute/virtualMachines"]
    assert vm["name"] == t4_spec.name and preview["Microsoft.Resources/resourceGroups"]["name"] == f"trainvm-{t4_spec.name}"
    assert vm["body"]["properties"]["storageProfile"]["imageReference"]["version"] == "latest (pinned at up)"
    assert json.loads(json.dumps(preview)) == preview                      # plain JSON for request.json
    assert "/subscriptions/SUBSCRIPTION/resourceGroups/" in json.dumps(vm)


def test_gen1_only_size_gets_the_gen1_image_and_standard_security(t4_spec, t4):
    gen1 = replace(t4, instance_type="Standard_NC6s_v3", hyperv_gen="1")
    assert R.image_for("ubuntu-22.04", gen1).sku == "22_04-lts"
    assert R.image_for("ubuntu-24.04", gen1).sku == "server-gen1"
    body = R.vm_body(t4_spec, gen1, subscription_id="s", image=R.image_for("debian-12", gen1), ssh_public_key="k")
    assert "securityProfile" not in body["properties"]
    assert R.security_profile(replace(t4, instance_type="Standard_ND96asr_v4")) is None
    assert R.security_profile(t4)["uefiSettings"]["secureBootEnabled"] is False


@pytest.mark.parametrize("disk, size, expected, noted", [
    ("standard", "Standard_NC4as_T4_v3", "Standard_LRS", False),
    ("balanced", "Standard_NC4as_T4_v3", "StandardSSD_LRS", False),
    ("ssd", "Standard_NC4as_T4_v3", "Premium_LRS", False),
    ("ssd", "Standard_NC24", "StandardSSD_LRS", True),            # no "s": no premium storage
])
def test_disk_mapping(t4_spec, disk, size, expected, noted):
    storage, note = R.disk_type(replace(t4_spec, boot_disk_type=disk), size)
    assert storage == expected and bool(note) == noted


def test_custom_data_limit_is_checked_client_side(t4_spec):
    fits = named(t4_spec, "x", user_data="a" * 65_535)                     # 87,380 base64 characters
    assert len(R.custom_data(fits)) == R.CUSTOM_DATA_MAX
    with pytest.raises(InvalidRequestError, match="87380"):
        R.custom_data(named(t4_spec, "x", user_data="a" * 65_536))
    assert base64.b64decode(R.custom_data(named(t4_spec, "x", user_data=b"\x1f\x8b gz"))) == b"\x1f\x8b gz"


def F(status, code, message="m", kind="api"):
    return errs.classify(errs.Failure(status, code, message, kind))


@pytest.mark.parametrize("failure, cls, outcome", [
    (F(409, "SkuNotAvailable"), CapacityError, "capacity"),
    (F(200, "AllocationFailed"), CapacityError, "capacity"),
    (F(200, "ZonalAllocationFailed"), CapacityError, "capacity"),
    (F(200, "OverconstrainedAllocationRequest"), CapacityError, "capacity"),
    (F(409, "OperationNotAllowed", "exceeding approved standardNCASv3_T4Family Cores quota"), QuotaError, "quota"),
    (F(409, "OperationNotAllowed", "The operation requires the VM to be running"), InvalidRequestError, "invalid"),
    (F(401, "InvalidAuthenticationToken"), AuthError, "auth"),
    (F(403, "AuthorizationFailed"), AuthError, "auth"),
    (F(None, "ClientAuthenticationError", kind="auth"), AuthError, "auth"),
    (F(400, "InvalidParameter"), InvalidRequestError, "invalid"),
    (F(400, "InvalidRequestContent"), InvalidRequestError, "invalid"),
    (F(429, "SubscriptionRequestsThrottled"), RetryExhaustedError, "retry-exhausted"),
    (F(503, "ServiceUnavailable"), RetryExhaustedError, "retry-exhausted"),
    (F(None, "ServiceRequestError", kind="network"), RetryExhaustedError, "retry-exhausted"),
    (F(403, "RequestDisallowedByPolicy"), ProviderError, "error"),
    (F(200, "OSProvisioningTimedOut"), ProviderError, "error"),
])
def test_classification_by_code(failure, cls, outcome):
    assert type(failure) is cls and failure.outcome == outcome


def test_instance_view_code_and_short_messages():
    assert errs.code_from_statuses([{"code": "ProvisioningState/failed/AllocationFailed", "message": "no room"}]) == \
        ("AllocationFailed", "no room")
    assert errs.code_from_statuses([{"code": "PowerState/running"}]) == (None, "")
    msg = F(409, "SkuNotAvailable", "size for resource '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/"
                                    "virtualMachines/vm1' is not available").args[0]
    assert msg == "size for resource 'vm1' is not available"


def test_run_command_stdout():  # the report itself is decoded by provisioner.verify.report (test_report_contract)
    assert R.run_command_stdout("Enable succeeded: \n[stdout]\n{\"a\": 1}\n[stderr]\nwarn\n") == '{"a": 1}'
    assert R.run_command_stdout("Enable succeeded: \n[stdout]\n\n[stderr]\n\n") == ""
