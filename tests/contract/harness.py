"""What the provider contract suite needs from one cloud: a ``CloudHarness``.

A harness wraps one provider pointed at its test double (an in-memory fake, a loopback emulator, moto's server)
and the few things only the test double can do: plant a VM trainvm does not manage, arm a failure that strikes
after the cloud has made something, plant a stack report, and list what is left. The contract tests
(``test_contract.py``) use nothing else, so they run unchanged on every cloud.

Adding a cloud costs one fixture (see README.md in this folder)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from provisioner.catalog.models import Offer
from provisioner.providers.base import InstanceRecord, LaunchSpec, Provider, labels_for, vm_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "profiles" / "examples" / "bert-finetune-t4.yaml"

#: a stack report as the VM helper writes it (schema 1)
REPORT: dict[str, Any] = {"schema": 1, "status": "ready", "gpus": [{"name": "Tesla T4", "memory_mib": 15360}],
                          "driver": "550.127.05", "cuda_runtime": "12.4", "python": "3.11.9",
                          "packages": {"torch": "2.4.1+cu124"}}


@dataclass
class ClusterHarness:
    """What a cloud that creates clusters (registry ``group_engine``; ``LaunchSpec.nodes`` > 1) adds to its harness.

    - ``offers``: at least two offers of a shape the cloud places compactly, in different locations.
    - ``stock_out(offer, room)``: from now on a cluster create in ``offer``'s location finds room for only
      ``room`` nodes (fewer than asked: the engine's all-or-nothing must leave nothing).
    The harness's ``leftovers()`` must list the nodes and every placement resource (policy, group, PPG) too, and
    ``put_report(node_record, report)`` must work on a node's record (from ``cluster_nodes``).
    """

    offers: Sequence[Offer]
    stock_out: Callable[[Offer, int], None]


@dataclass
class CloudHarness:
    """One cloud under the contract suite.

    - ``provider``: the provider under test; ``twin()``: another provider on the same cloud (a second process).
    - ``offers``: at least two offers the provider can create, in different locations where the cloud has them.
    - ``spec(name=..., profile_hash=..., ssh_from=...)``: a LaunchSpec for the T4 example profile.
    - ``plant_unmanaged(name, offer)``: make a VM of that name that trainvm does not manage.
    - ``fail_after_create_starts(offer)``: arm one failure of the next create in ``offer`` that strikes after
      the cloud has made something for it (a group, rules, the VM itself), so that cleanup has work to do.
    - ``put_report(record, report)``: make ``report`` (a dict) what the VM would answer for its stack report.
    - ``leftovers()``: every resource of trainvm's the cloud still holds (VMs, groups, firewall rules...).
    - ``stopped_states``: the states ``stop`` may leave a VM in on this cloud.
    """

    name: str
    provider: Provider
    twin: Callable[[], Provider]
    offers: Sequence[Offer]
    spec: Callable[..., LaunchSpec]
    plant_unmanaged: Callable[[str, Offer], None]
    fail_after_create_starts: Callable[[Offer], None]
    put_report: Callable[[InstanceRecord, dict[str, Any]], None]
    leftovers: Callable[[], list[str]]
    stopped_states: tuple[str, ...] = ("TERMINATED", "STOPPED", "DEALLOCATED")
    #: the cluster cases (test_cluster_contract.py) run where this is set; None: the cloud has no group engine
    cluster: ClusterHarness | None = None


_BASE: dict[str, LaunchSpec] = {}


def base_spec(user_data: str) -> LaunchSpec:
    """The LaunchSpec ``up`` builds for profiles/examples/bert-finetune-t4.yaml (``user_data`` stands in for the
    renderer's output, whose format is the cloud's)."""
    if user_data not in _BASE:
        from provisioner.profile import load_profile
        from provisioner.provision.launch import resolved_profile_json

        loaded = load_profile(EXAMPLE)
        p = loaded.profile
        _BASE[user_data] = LaunchSpec(
            name=vm_name(p.name, loaded.hash), profile_name=p.name, profile_hash=loaded.hash,
            profile_json=resolved_profile_json(loaded), labels=labels_for(p.name, loaded.hash),
            startup_script="#!/bin/bash\necho TRAINVM_STATUS=start\n", user_data=user_data, os=p.stack.os,
            boot_disk_type=p.hardware.boot_disk.type, boot_disk_gib=p.hardware.boot_disk.size_gib,
            local_nvme_gib=p.hardware.local_nvme_gib, spot=p.placement.spot,
            max_price_per_hour=p.placement.max_price_per_hour, max_run_hours=p.lifecycle.max_run_hours,
            ssh_from=p.placement.ssh_from, data_sources=tuple(d.source for d in p.data))
    return _BASE[user_data]


def spec_maker(user_data: str) -> Callable[..., LaunchSpec]:
    """``make(name=None, profile_hash=None, **changes)``: the base spec with labels kept consistent with the hash."""
    def make(name: str | None = None, profile_hash: str | None = None, **changes: Any) -> LaunchSpec:
        base = base_spec(user_data)
        h = profile_hash or base.profile_hash
        return replace(base, name=name or vm_name(base.profile_name, h), profile_hash=h,
                       labels=labels_for(base.profile_name, h), **changes)
    return make


def b64_json(doc: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()
