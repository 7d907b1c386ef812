"""The fields trainvm reads of Azure Resource Manager's answers, as typed documents (pure: no SDK).

The SDK's models are untyped for mypy; ``azure_api.wire`` turns one into its ARM JSON (``as_dict()``) and names it
``Arm``: every field trainvm reads is declared here, with the type ARM's REST reference gives it, so a misspelled
key or a wrong use is a mypy error (issue 37). ``total=False``: ARM leaves out what is unset. One ``Arm`` covers
the resources read (resource group, VM, scale set and its instances, NIC, public IP, identity, gallery image
version) and the answers read the same way (instance view, Run Command result, boot diagnostics URIs).
References: learn.microsoft.com/rest/api/compute (virtual-machines, virtual-machine-scale-sets,
virtual-machine-scale-set-vms, gallery-image-versions), /rest/api/virtualnetwork (network-interfaces,
public-ip-addresses), /rest/api/resources (resource-groups), /rest/api/managedidentity.
"""

from __future__ import annotations

from typing import TypedDict


class Status(TypedDict, total=False):
    """An instance view status (``PowerState/running``, ``ProvisioningState/succeeded``, ...)."""

    code: str
    message: str
    displayStatus: str
    time: str


class InstanceView(TypedDict, total=False):
    statuses: list[Status]


class ImageReference(TypedDict, total=False):
    publisher: str
    offer: str
    sku: str
    version: str
    exactVersion: str
    id: str


class OsDiskImage(TypedDict, total=False):
    sizeInGB: int


class StorageProfile(TypedDict, total=False):
    imageReference: ImageReference
    osDiskImage: OsDiskImage  # a gallery image version's


class HardwareProfile(TypedDict, total=False):
    vmSize: str


class VmProfile(TypedDict, total=False):
    """A scale set's ``virtualMachineProfile`` (the fields read)."""

    priority: str
    userData: str


class TargetRegion(TypedDict, total=False):
    name: str
    regionalReplicaCount: int


class PublishingProfile(TypedDict, total=False):
    targetRegions: list[TargetRegion]
    publishedDate: str


class IpConfiguration(TypedDict, total=False):
    id: str
    properties: Props


class Props(TypedDict, total=False):
    """``properties`` of the resources read (each kind has some of these)."""

    provisioningState: str
    instanceView: InstanceView
    storageProfile: StorageProfile
    hardwareProfile: HardwareProfile
    timeCreated: str
    priority: str
    userData: str
    virtualMachineProfile: VmProfile
    ipConfigurations: list[IpConfiguration]  # a NIC's
    ipAddress: str  # a public IP's
    privateIPAddress: str  # an IP configuration's
    primary: bool
    principalId: str  # a managed identity's
    osState: str  # a gallery image definition's
    hyperVGeneration: str
    publishingProfile: PublishingProfile  # a gallery image version's


class UserIdentity(TypedDict, total=False):
    principalId: str
    principal_id: str
    clientId: str


class Identity(TypedDict, total=False):
    """A VM's or scale set's ``identity`` (ARM spelling; the snake_case one of older SDK models is read too)."""

    type: str
    principalId: str
    principal_id: str
    userAssignedIdentities: dict[str, UserIdentity]
    user_assigned_identities: dict[str, UserIdentity]


class Sku(TypedDict, total=False):
    name: str
    capacity: int


class RunCommandOutput(TypedDict, total=False):
    code: str
    message: str


class Arm(TypedDict, total=False):
    id: str
    name: str
    location: str
    tags: dict[str, str]
    properties: Props
    identity: Identity
    sku: Sku
    instanceId: str  # a scale-set instance's
    value: list[RunCommandOutput]  # a Run Command result
    statuses: list[Status]  # an instance view
    serialConsoleLogBlobUri: str  # retrieveBootDiagnosticsData
