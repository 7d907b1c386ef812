"""The ARM request bodies trainvm builds and reads back (issue 37: no explicit ``Any`` in the Azure package).

A body trainvm only sends is ``dict[str, object]`` (JSON); the ``virtualMachines`` PUT body (``request.vm_body``) is
a TypedDict because the scale set's body (``group_request.scale_set_body``) is cut from it, so a misspelled field
there is a mypy error. Field names are ARM's (learn.microsoft.com/rest/api/compute/virtual-machines/create-or-update).
"""

from __future__ import annotations

from typing import Protocol, TypedDict

#: a JSON document trainvm sends and never reads back
Json = dict[str, object]


class StorageProfile(TypedDict):
    imageReference: dict[str, str]
    osDisk: Json


class PublicIpConfig(TypedDict):
    name: str
    sku: dict[str, str]
    properties: Json


class IpConfigProps(TypedDict):
    primary: bool
    subnet: dict[str, str]
    publicIPAddressConfiguration: PublicIpConfig


class IpConfig(TypedDict):
    name: str
    properties: IpConfigProps


class NicProps(TypedDict):
    primary: bool
    deleteOption: str
    networkSecurityGroup: dict[str, str]
    ipConfigurations: list[IpConfig]


class NicConfig(TypedDict):
    name: str
    properties: NicProps


class NetworkProfile(TypedDict):
    networkApiVersion: str
    networkInterfaceConfigurations: list[NicConfig]


class _VmPropsRequired(TypedDict):
    hardwareProfile: dict[str, str]
    storageProfile: StorageProfile
    osProfile: Json
    networkProfile: NetworkProfile
    diagnosticsProfile: Json
    userData: str


class VmProps(_VmPropsRequired, total=False):
    securityProfile: Json
    priority: str
    evictionPolicy: str
    billingProfile: Json


class Tagged(TypedDict):
    """A resource group's PUT body, and the start of every body whose tags trainvm adds to (the lease, the node list)."""

    location: str
    tags: dict[str, str]


class VmBody(Tagged):
    identity: Json
    properties: VmProps


class ScaleSetBody(Tagged):
    identity: Json
    sku: Json
    properties: Json


class LifecycleFields(Protocol):
    """The four lifecycle fields ``lifecycle_role`` reads (a LaunchSpec's, or the profile's ``lifecycle``)."""

    @property
    def idle_shutdown_minutes(self) -> int | None: ...

    @property
    def max_run_hours(self) -> float | None: ...

    @property
    def on_idle(self) -> str: ...

    @property
    def on_max_run(self) -> str: ...


class SizeFacts(Protocol):
    """What the image choice (``request.image_for``) reads of a size: an ``Offer``, or the bake's Gen2 builder."""

    @property
    def instance_type(self) -> str: ...

    @property
    def hyperv_gen(self) -> str: ...
