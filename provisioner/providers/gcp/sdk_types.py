"""Typed views of the compute_v1 messages the create path and ``GcpProvider`` read (issue 37: no explicit ``Any`` in
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
    items: Sequence[MetadataItem]


class Tags(Protocol):
    items: Sequence[str]


class AccessConfig(Protocol):
    nat_i_p: str


class NetworkInterface(Protocol):
    access_configs: Sequence[AccessConfig]
    network_i_p: str


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
    tags: Tags
    metadata: Metadata
    network_interfaces: Sequence[NetworkInterface]
    scheduling: Scheduling
    resource_policies: Sequence[str]
    creation_timestamp: str
    last_start_timestamp: str
    last_stop_timestamp: str


class Operation(Protocol):
    """``compute_v1.Operation``: its name and status (``Operation.Status``, compared with ``Status.DONE``); its
    errors are read by ``gcp.errors.from_operation``."""

    name: str
    status: object
