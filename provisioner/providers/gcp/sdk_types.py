"""Typed views of the compute_v1 messages the GCE provider package reads (issue 37: no explicit ``Any`` in
the provider's public methods). google-cloud-compute ships ``py.typed``, but its messages subclass proto-plus's
untyped ``proto.Message``, so mypy lets any attribute through (``inst.lables`` passes). These protocols name the
fields trainvm reads, with the SDK's attribute names; a message of the SDK satisfies them as it is (no copy, no
import of the SDK: ``trainvm --help`` / ``plan`` stay free of it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol


class MetadataItem(Protocol):
    key: str
    value: str


class Metadata(Protocol):
    fingerprint: str
    items: Sequence[MetadataItem]


class Tags(Protocol):
    items: Sequence[str]


class AccessConfig(Protocol):
    nat_i_p: str


class NetworkInterface(Protocol):
    access_configs: Sequence[AccessConfig]
    network_i_p: str


class AttachedDisk(Protocol):
    boot: bool
    source: str  # the disk's URL


class Scheduling(Protocol):
    provisioning_model: str


class Instance(Protocol):
    """``compute_v1.Instance``: what trainvm reads of an instance."""

    id: int
    name: str
    zone: str  # a URL: ``.../zones/ZONE``
    status: str  # PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, ...
    machine_type: str
    labels: Mapping[str, str]
    label_fingerprint: str
    tags: Tags
    metadata: Metadata
    network_interfaces: Sequence[NetworkInterface]
    disks: Sequence[AttachedDisk]
    scheduling: Scheduling
    resource_policies: Sequence[str]
    creation_timestamp: str
    last_start_timestamp: str
    last_stop_timestamp: str


class OperationErrorItem(Protocol):
    code: str
    message: str


class OperationError(Protocol):
    errors: Sequence[OperationErrorItem]


class LocationStatus(Protocol):
    created_vm_count: int


class BulkInsertMetadata(Protocol):
    per_location_status: Mapping[str, LocationStatus]  # "zones/ZONE" -> what the bulkInsert made there


class Operation(Protocol):
    """``compute_v1.Operation``: its name and status (``Operation.Status``, compared with ``Status.DONE``), and a
    bulkInsert's per-location result; its errors are read by ``gcp.errors.from_operation``."""

    name: str
    status: object
    error: OperationError
    instances_bulk_insert_operation_metadata: BulkInsertMetadata


class Image(Protocol):
    """``compute_v1.Image``: what ``GceBaker`` reads of a baked image."""

    name: str
    family: str
    status: str  # PENDING, READY, FAILED, ...
    labels: Mapping[str, str]
    creation_timestamp: str
    archive_size_bytes: int
    storage_locations: Sequence[str]


class Quota(Protocol):
    metric: str
    limit: float
    usage: float


class QuotaHolder(Protocol):
    """``compute_v1.Project`` / ``compute_v1.Region``: their ``quotas``."""

    quotas: Sequence[Quota]
