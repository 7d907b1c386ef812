"""The REST JSON documents trainvm sends to Compute Engine and reads back (issue 37: no explicit ``Any`` in the GCE
provider package), as TypedDicts with the API's camelCase field names (compute v1 discovery document): the
``instances.insert`` body and bulkInsert's ``instanceProperties``, a firewall rule (built by ``firewall_bodies`` /
``internal_rule_body``, and read back from ``firewalls.get`` through ``Firewall.to_json``), the compact placement
policy and the bulkInsert resource. A misspelled field is a mypy error; at run time they are plain dicts (no wire
change: the SDK's ``from_json`` still rejects an unknown field name)."""

from __future__ import annotations

from typing import TypedDict


class FirewallEntry(TypedDict, total=False):
    IPProtocol: str
    ports: list[str]


class FirewallRule(TypedDict, total=False):
    """A firewall rule: what ``firewall_bodies`` sends, and what ``firewalls.get`` answers (every field optional:
    GCE omits the ones at their default)."""

    name: str
    description: str
    network: str
    direction: str
    priority: int
    sourceRanges: list[str]
    sourceTags: list[str]
    sourceServiceAccounts: list[str]
    targetTags: list[str]
    targetServiceAccounts: list[str]
    destinationRanges: list[str]
    allowed: list[FirewallEntry]
    denied: list[FirewallEntry]
    disabled: bool


class MetadataEntry(TypedDict):
    key: str
    value: str


class MetadataBody(TypedDict):
    items: list[MetadataEntry]


class TagsBody(TypedDict):
    items: list[str]


class Duration(TypedDict):
    seconds: str


class SchedulingBody(TypedDict, total=False):
    automaticRestart: bool
    provisioningModel: str
    onHostMaintenance: str
    instanceTerminationAction: str
    maxRunDuration: Duration


class DiskParams(TypedDict, total=False):
    sourceImage: str
    diskType: str
    diskSizeGb: str
    diskName: str
    labels: dict[str, str]


class DiskBody(TypedDict, total=False):
    boot: bool
    autoDelete: bool
    type: str
    interface: str
    deviceName: str
    initializeParams: DiskParams


class Accelerator(TypedDict):
    acceleratorType: str
    acceleratorCount: int


class AccessConfigBody(TypedDict):
    name: str
    type: str


class NetworkInterfaceBody(TypedDict):
    network: str
    accessConfigs: list[AccessConfigBody]


class ServiceAccountBody(TypedDict):
    email: str
    scopes: list[str]


class ShieldedConfig(TypedDict):
    enableSecureBoot: bool
    enableVtpm: bool
    enableIntegrityMonitoring: bool


class InstanceBody(TypedDict, total=False):
    """``instances.insert``'s Instance (``request.instance_body``); without name and zone, bulkInsert's
    ``instanceProperties`` (``group.instance_properties``, which adds ``resourcePolicies``)."""

    name: str
    zone: str
    hostname: str
    description: str
    machineType: str
    guestAccelerators: list[Accelerator]
    scheduling: SchedulingBody
    disks: list[DiskBody]
    networkInterfaces: list[NetworkInterfaceBody]
    serviceAccounts: list[ServiceAccountBody]
    metadata: MetadataBody
    labels: dict[str, str]
    tags: TagsBody
    shieldedInstanceConfig: ShieldedConfig
    resourcePolicies: list[str]


class GroupPlacement(TypedDict):
    collocation: str
    availabilityDomainCount: int


class PolicyBody(TypedDict):
    """``resourcePolicies.insert``: a compact placement policy."""

    name: str
    description: str
    groupPlacementPolicy: GroupPlacement


class BulkBody(TypedDict):
    """``instances.bulkInsert``'s BulkInsertInstanceResource."""

    count: str
    minCount: str
    perInstanceProperties: dict[str, dict[str, str]]
    instanceProperties: InstanceBody
