"""Fault injection for the ARM emulator (tests/emulators/arm.py): fault kinds, the injected Fault, and the
error texts Azure uses (not-found, allocation failures, injected HTTP errors).

Error codes marked (*) below are the ones seen in real Azure output (public issue reports or the
knowledge file); the others are approximations with the right HTTP status.
"""
from __future__ import annotations

import re
import uuid

from .arm_validate import ArmError

ALLOCATION_MESSAGES = {
    "AllocationFailed": "Allocation failed. We do not have sufficient capacity for the requested VM size in this "
                        "region. Read more about improving likelihood of allocation success at "
                        "http://aka.ms/allocation-guidance",
    "ZonalAllocationFailed": "Allocation failed. We do not have sufficient capacity for the requested VM size in "
                             "this zone. Read more about improving likelihood of allocation success at "
                             "http://aka.ms/allocation-guidance",
    "OverconstrainedAllocationRequest": "Allocation failed. VM(s) with the following constraints cannot be "
                                        "allocated, because the condition is too restrictive. Please remove some "
                                        "constraints and try again. Constraints applied are: - VM Size - Zone - "
                                        "Priority",
}
KINDS = {  # fault kind -> (stage, default error code)
    "sku_not_available_409": ("vm", "SkuNotAvailable"), "quota": ("vm", "OperationNotAllowed"),
    "allocation_failed_lro": ("vm", "AllocationFailed"), "zonal_allocation_failed_lro": ("vm", "ZonalAllocationFailed"),
    "overconstrained_allocation_lro": ("vm", "OverconstrainedAllocationRequest"), "lro_never_done": ("vm", None),
    "partial_capacity_lro": ("vm", "AllocationFailed"),  # scale sets: `created` instances allocated, then failed
    "throttle_429": ("http", "SubscriptionRequestsThrottled"), "unavailable_503": ("http", "ServiceUnavailable"),
    "auth_401": ("http", "InvalidAuthenticationToken"), "invalid_400": ("http", "InvalidParameter"),
}
ALIASES = {"sku_not_available": "sku_not_available_409", "quota_409": "quota", "allocation_failed":
           "allocation_failed_lro", "zonal_allocation_failed": "zonal_allocation_failed_lro",
           "overconstrained_allocation_request": "overconstrained_allocation_lro", "throttle": "throttle_429",
           "unavailable": "unavailable_503", "auth": "auth_401", "invalid": "invalid_400"}


def not_found(type_, name, rg):
    return ArmError(404, "ResourceNotFound", f"The Resource '{type_}/{name}' under resource group '{rg}' was not "
                    "found. For more details please go to https://aka.ms/ARMResourceNotFoundFix")  # (*)


def concurrent_write(type_, sub, loc):
    """A PUT on a resource whose own operation is still running. Compute answers 409 Conflict (*: the text of a VM
    PUT refused that way, azure-cli issue 15765); Network 409 AnotherOperationInProgress (*: public Terraform/Pulumi
    reports). Not modelled: Compute sometimes accepts the second PUT instead and fails the running one with
    OperationPreempted ("Operation execution has been preempted by a more recent operation")."""
    if type_.startswith("Microsoft.Network/"):
        return ArmError(409, "AnotherOperationInProgress", "Another operation on this or dependent resource is in "
                        "progress. To retrieve status of the operation use uri: https://management.azure.com/"
                        f"subscriptions/{sub}/providers/Microsoft.Network/locations/{loc}/operations/"
                        f"{uuid.uuid4()}?api-version=2024-05-01.")
    return ArmError(409, "Conflict", "The request failed due to conflict with a concurrent request. To resolve it, "
                    "please refer to https://aka.ms/activitylog to get more details on the conflicting requests.")


def rg_not_found(rg):
    return ArmError(404, "ResourceGroupNotFound", f"Resource group '{rg}' could not be found.")  # (*)


class Fault:
    def __init__(self, kind, location=None, times=1, size=None, zone=None, code=None, message=None,
                 method=None, path=None, created=None):
        kind = ALIASES.get(kind, kind)
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {sorted(KINDS)}")
        self.kind, self.location, self.times, self.size, self.zone = kind, location, times, size, zone
        self.code, self.message, self.method, self.path = code or KINDS[kind][1], message, method, path
        self.created = created  # partial_capacity_lro: how many scale-set instances were allocated first
        # HTTP faults narrowed to a VM (location/size/zone) fire at the VM PUT; path/method narrow any request.
        self.stage = "vm" if KINDS[kind][0] == "vm" or any((location, size, zone)) else "http"
        if kind == "lro_never_done" and (method or path) and not any((location, size, zone)):
            self.stage = "lro"  # any LRO-starting request (PUT/DELETE/POST) matching method/path

    def matches(self, stage, method, path, vm=None):
        if stage != self.stage or (self.method and self.method.upper() != method):
            return False
        if self.path and not re.search(self.path, path, re.I):
            return False
        if stage == "vm":
            loc, size, zones = vm
            if (self.location and self.location.lower() != loc.lower()) or \
                    (self.size and self.size.lower() != size.lower()) or (self.zone and self.zone not in zones):
                return False
        return True


def http_fault_error(f):
    status = {"throttle_429": 429, "unavailable_503": 503, "auth_401": 401, "invalid_400": 400}[f.kind]
    text = {"throttle_429": "Number of requests for subscription exceeded the limit. Please try again after '0' "
                            "seconds.",
            "unavailable_503": "The service is temporarily unavailable. Please retry later.",
            "auth_401": "The access token is invalid.",
            "invalid_400": "The value of a parameter in the request is invalid (injected by the emulator)."}[f.kind]
    headers = {"Retry-After": "0"} if status in (429, 503) else {}
    if status == 401:
        headers["WWW-Authenticate"] = ('Bearer authorization_uri="https://login.microsoftonline.com/common", '
                                       'error="invalid_token", error_description="The access token is invalid."')
    return ArmError(status, f.code, f.message or text, headers=headers)
