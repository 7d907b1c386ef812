"""An in-memory implementation of the provider contract, with scriptable failures
(for CLI and failover tests; the real providers are tested against loopback emulators)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from provisioner.catalog.models import Offer
from provisioner.providers.base import InstanceRecord, LaunchSpec, ProviderError, price_from_labels
from provisioner.verify.report import StackReport, decode_report


@dataclass
class FakeProvider:
    NAME: str = "gcp"
    vms: dict[str, InstanceRecord] = field(default_factory=dict)
    failures: dict[str, deque[ProviderError]] = field(default_factory=dict)  # keyed by zone or region
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    consoles: dict[str, str] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def fail(self, where: str, *errors: ProviderError) -> None:
        self.failures.setdefault(where, deque()).extend(errors)

    def find(self, name: str) -> InstanceRecord | None:
        self.calls.append(("find", name))
        return self.vms.get(name)

    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        self.calls.append(("create", offer.location))
        queue = self.failures.get(offer.location) or self.failures.get(offer.region)
        if queue:
            raise queue.popleft().verified()  # the fake creates nothing before failing
        record = InstanceRecord(
            name=spec.name, cloud=offer.cloud, region=offer.region, zone=offer.zone,
            instance_type=offer.instance_type, state="RUNNING", profile=spec.profile_name,
            hash=spec.labels["trainvm-hash"], price_hourly=price_from_labels(spec.labels), created="2026-11-22T00:00:00Z",
            ip="203.0.113.10",
        )
        self.vms[spec.name] = record
        import json

        self.profiles[spec.name] = json.loads(spec.profile_json)
        return record

    def list(self) -> list[InstanceRecord]:
        return list(self.vms.values())

    def delete(self, name: str, *, wait: bool = True) -> bool:
        self.calls.append(("delete", name))
        return self.vms.pop(name, None) is not None

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, Any] | None]:
        return decode_report(self.reports.get(name)), self.profiles.get(name)

    def ssh_argv(self, record: InstanceRecord, command: list[str]) -> list[str]:
        return ["ssh", f"fake@{record.ip}", *(["--", *command] if command else [])]

    def open_ssh_hint(self, record: InstanceRecord) -> str:
        return "open it (fake)"

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        if name not in self.vms:
            return None
        text = self.consoles.get(name, "")
        return text[start:], max(len(text), start)
