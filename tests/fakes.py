"""An in-memory implementation of the provider contract, with scriptable failures (for CLI and failover tests;
the real providers are tested against loopback emulators). It passes the same contract suite as the real
providers (tests/contract/): idempotent create, ConflictError for another hash or a VM trainvm does not manage,
``list``/``find`` that see only trainvm's VMs, delete twice, stop/start, and creates from several threads.

Two providers built on the same dicts (``FakeProvider("gcp", vms=a.vms, unmanaged=a.unmanaged, ...)``, or
``a.twin()``) see one cloud, the way two ``trainvm`` processes see one project.

Clusters (``LaunchSpec.nodes`` > 1, the contract in providers/base.py): nodes ``NAME-0`` ... ``NAME-(N-1)`` (the rank
is the suffix), a placement group ``NAME`` in ``placements`` when ``spec.compact``, all or nothing: with
``capacity[zone or region] = K`` < N the fake makes K nodes, deletes them and the placement group, then raises a
verified CapacityError (it models no partial success: a real engine's partial success is each provider's to read)."""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from provisioner.catalog.models import Offer
from provisioner.providers.base import (
    CapacityError,
    ConflictError,
    InstanceRecord,
    LaunchSpec,
    ProviderError,
    costs_from_labels,
    price_from_labels,
)
from provisioner.providers.stack_report import StackReport, read_report
from provisioner.providers.store import PAYLOAD_LABEL, PayloadRef, payload_key

STOPPED = "TERMINATED"


class Clock:
    """A monotonic clock that moves only when told: a provider built with ``clock=Clock()`` sees time pass
    exactly where a test says, however loaded the machine is (deadlines never expire by slowness)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakePayloadStore:
    """The payload store contract in memory: objects by (region, sha256). ``refuse`` makes the next ``stage``
    raise that error (a store the caller may not write). It models no IAM, no expiry and no lifecycle rule; ``aged``
    holds the objects older than ``REFRESH_DAYS``, which ``stage`` uploads again as the real stores do
    (providers/{gcp,aws,azure}/store.py: ``refreshed``)."""

    cloud: str
    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    uploads: list[tuple[str, str]] = field(default_factory=list)
    refuse: deque[ProviderError] = field(default_factory=deque)
    aged: set[tuple[str, str]] = field(default_factory=set)

    def stage(self, region: str, data: bytes, sha256: str) -> PayloadRef:
        if self.refuse:
            raise self.refuse.popleft()
        refreshed = (region, sha256) in self.objects and (region, sha256) in self.aged
        uploaded = (region, sha256) not in self.objects or refreshed
        if uploaded:
            self.objects[(region, sha256)] = data
            self.uploads.append((region, sha256))
            self.aged.discard((region, sha256))
        key = payload_key(sha256)
        return PayloadRef(cloud=self.cloud, region=region, store=f"fake-{region}", key=key,
                          url=f"https://fake-store.invalid/{region}/{key}", sha256=sha256, size=len(data),
                          access="nothing (in memory)", uploaded=uploaded, refreshed=refreshed)

    def release(self, region: str, sha256: str) -> bool:
        return self.objects.pop((region, sha256), None) is not None

    def stored(self, region: str) -> list[str]:
        return sorted(sha for (r, sha) in self.objects if r == region)


@dataclass
class FakeProvider:
    NAME: str = "gcp"
    vms: dict[str, InstanceRecord] = field(default_factory=dict)  # trainvm's VMs, by name
    failures: dict[str, deque[ProviderError]] = field(default_factory=dict)  # keyed by zone or region
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    consoles: dict[str, str] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    unmanaged: dict[str, InstanceRecord] = field(default_factory=dict)  # VMs of that cloud trainvm did not create
    lock: Any = field(default_factory=threading.RLock)
    placements: set[str] = field(default_factory=set)  # clusters' placement groups, by cluster name
    capacity: dict[str, int] = field(default_factory=dict)  # zone or region -> nodes a cluster create finds room for
    store: FakePayloadStore | None = None

    def __post_init__(self) -> None:
        if self.store is None:
            self.store = FakePayloadStore(self.NAME)

    def twin(self) -> FakeProvider:
        """Another provider on the same cloud (what a second process would build)."""
        return FakeProvider(self.NAME, self.vms, self.failures, self.reports, self.consoles, self.profiles, self.calls,
                            self.unmanaged, self.lock, self.placements, self.capacity, self.store)

    def payload_store(self) -> FakePayloadStore:
        assert self.store is not None
        return self.store

    def fail(self, where: str, *errors: ProviderError) -> None:
        self.failures.setdefault(where, deque()).extend(errors)

    def find(self, name: str) -> InstanceRecord | None:
        with self.lock:
            self.calls.append(("find", name))
            return self._lookup(name)

    def _lookup(self, name: str) -> InstanceRecord | None:
        """The VM ``name``, or the rank-0 node of the cluster ``name``."""
        rec = self.vms.get(name)
        if rec is None:
            nodes = self._nodes(name)
            rec = nodes[0] if nodes else None
        return rec

    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        with self.lock:
            self.calls.append(("create", offer.location))
            if spec.name in self.unmanaged:
                raise ConflictError(f"a VM named {spec.name} already exists and is not managed by trainvm; "
                                    "pass --name to choose another name")
            existing = self._lookup(spec.name)
            if existing is not None:
                if existing.hash != spec.labels.get("trainvm-hash"):
                    raise ConflictError(f"a VM named {spec.name} already exists for another version of the profile "
                                        f"(hash {existing.hash}); run `trainvm down {spec.name}` or pass --name")
                return replace(existing, adopted=True)
            queue = self.failures.get(offer.location) or self.failures.get(offer.region)
            if queue:
                raise queue.popleft().verified()  # the fake creates nothing before failing
            if spec.nodes > 1:
                return self._create_cluster(spec, offer)
            record = InstanceRecord(
                name=spec.name, cloud=offer.cloud, region=offer.region, zone=offer.zone,
                instance_type=offer.instance_type, state="RUNNING", profile=spec.profile_name,
                hash=spec.labels["trainvm-hash"], price_hourly=price_from_labels(spec.labels), **costs_from_labels(spec.labels),
                created="2026-11-22T00:00:00Z", ip="203.0.113.10", spot=spec.spot, payload=spec.labels.get(PAYLOAD_LABEL))
            self.vms[spec.name] = record
            self.profiles[spec.name] = json.loads(spec.profile_json)
            return record

    def _create_cluster(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        if spec.compact:
            self.placements.add(spec.name)
        room = self.capacity.get(offer.location, self.capacity.get(offer.region, spec.nodes))
        made = []
        for rank in range(min(room, spec.nodes)):
            name = f"{spec.name}-{rank}"
            self.vms[name] = InstanceRecord(
                name=name, cloud=offer.cloud, region=offer.region, zone=offer.zone, instance_type=offer.instance_type,
                state="RUNNING", profile=spec.profile_name, hash=spec.labels["trainvm-hash"],
                price_hourly=price_from_labels(spec.labels), **costs_from_labels(spec.labels), created="2026-11-22T00:00:00Z", ip=f"203.0.113.{10 + rank}",
                spot=spec.spot, cluster=spec.name, rank=rank, nodes=spec.nodes, payload=spec.labels.get(PAYLOAD_LABEL))
            self.profiles[name] = json.loads(spec.profile_json)
            made.append(name)
        if len(made) < spec.nodes:  # all or nothing: what was made goes, with the placement group
            for name in made:
                self.vms.pop(name)
                self.profiles.pop(name)
            self.placements.discard(spec.name)
            raise CapacityError(f"room for {room} of {spec.nodes} nodes in {offer.location}",
                                code="ZONE_RESOURCE_POOL_EXHAUSTED").verified()
        return self.vms[made[0]]

    def _nodes(self, cluster: str) -> list[InstanceRecord]:
        return sorted((r for r in self.vms.values() if r.cluster == cluster), key=lambda r: r.rank or 0)

    def cluster_nodes(self, name: str) -> list[InstanceRecord]:
        with self.lock:
            return self._nodes(name)

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        with self.lock:
            return {r.name: read_report(self.reports.get(r.name)) for r in self._nodes(name)}

    def list(self) -> list[InstanceRecord]:
        with self.lock:
            return sorted(self.vms.values(), key=lambda r: r.name)

    def delete(self, name: str, *, wait: bool = True) -> bool:
        with self.lock:
            self.calls.append(("delete", name))
            if name in self.unmanaged and name not in self.vms:
                raise ConflictError(f"{name} is not managed by trainvm; not deleting it")
            self.profiles.pop(name, None)
            nodes = [] if name in self.vms else self._nodes(name)
            for node in nodes:
                self.profiles.pop(node.name, None)
                self.vms.pop(node.name)
            had_placement = name in self.placements
            self.placements.discard(name)
            return self.vms.pop(name, None) is not None or bool(nodes) or had_placement

    def _power(self, name: str, state: str) -> InstanceRecord | None:
        with self.lock:
            self.calls.append(("stop" if state == STOPPED else "start", name))
            rec = self.vms.get(name)
            if rec is None and name in self.unmanaged:
                raise ConflictError(f"{name} is not managed by trainvm; not touching it")
            targets = [rec] if rec is not None else self._nodes(name)
            if not targets:
                return None
            out = [replace(r, state=state, ip=None if state == STOPPED else r.ip or f"203.0.113.{10 + (r.rank or 0)}")
                   for r in targets]
            for r in out:
                self.vms[r.name] = r
            return out[0]

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._power(name, STOPPED)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._power(name, "RUNNING")

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, Any] | None]:
        with self.lock:
            rec = self._lookup(name)
            if rec is None:
                return None, None
            return read_report(self.reports.get(rec.name)), self.profiles.get(rec.name)

    def ssh_argv(self, record: InstanceRecord, command: list[str]) -> list[str]:
        return ["ssh", f"fake@{record.ip}", *(["--", *command] if command else [])]

    def open_ssh_hint(self, record: InstanceRecord) -> str:
        return "open it (fake)"

    def live_status(self, record: InstanceRecord) -> str | None:
        return None  # the fake's startup script speaks only through its console

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        rec = self._lookup(name)
        if rec is None:
            return None
        text = self.consoles.get(rec.name, self.consoles.get(name, ""))
        return text[start:], max(len(text), start)
