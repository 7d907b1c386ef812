"""Fixtures for the GCE provider tests: one loopback emulator per session (reset per test), a provider
pointed at it with every delay zeroed, and builders for LaunchSpecs and Offers."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

from provisioner.catalog.models import Offer  # noqa: E402
from provisioner.providers.base import LaunchSpec, labels_for, vm_name  # noqa: E402

EXAMPLE = ROOT / "profiles" / "examples" / "bert-finetune-t4.yaml"
PROJECT = "test-proj"


@pytest.fixture(scope="session")
def gce_server():
    from tests.emulators.gce import GceEmulator

    with GceEmulator(seed=7) as emu:
        yield emu


@pytest.fixture
def gce(gce_server):
    gce_server.reset()
    gce_server.polls_to_done = 1
    gce_server.require_auth = False
    gce_server.projects = None
    yield gce_server
    gce_server.reset()


@pytest.fixture(scope="module")
def server(gce_server):
    """The emulator under its short name, for the emulator's own tests."""
    return gce_server


@pytest.fixture
def emu(gce):
    """The emulator, reset for this test."""
    return gce


@pytest.fixture
def make_provider(gce) -> Callable[..., Any]:
    from provisioner.providers.gcp.provider import GcpProvider

    def make(**kw: Any) -> GcpProvider:
        kw = {"endpoint": gce.url, "project": PROJECT, "retry_base_delay": 0, "poll_interval": 0, "op_timeout": 5, **kw}
        return GcpProvider(**kw)

    return make


@pytest.fixture
def clock():
    from tests.fakes import Clock

    return Clock()


@pytest.fixture
def slow_insert(gce, clock):
    """Each poll of a pending zonal operation takes 10 s of the provider's (fake) time: with op_never_done, the
    create's wait hits its deadline after a known number of polls, never because the machine was slow."""
    gce.on_poll = lambda emu, key: clock.advance(10)
    return clock


@pytest.fixture
def provider(make_provider):
    return make_provider()


@pytest.fixture(scope="session")
def bert_spec() -> LaunchSpec:
    """The LaunchSpec of profiles/examples/bert-finetune-t4.yaml (startup script stubbed)."""
    from provisioner.profile import load_profile

    loaded = load_profile(EXAMPLE)
    p = loaded.profile
    script = "#!/bin/bash\n# trainvm startup script (stub)\necho TRAINVM_STATUS=start\n"
    return LaunchSpec(
        name=vm_name(p.name, loaded.hash), profile_name=p.name, profile_hash=loaded.hash,
        profile_json=json.dumps(p.model_dump(mode="json", exclude={"extends"}), sort_keys=True, separators=(",", ":")),
        labels=labels_for(p.name, loaded.hash), startup_script=script, user_data=script, os=p.stack.os,
        boot_disk_type=p.hardware.boot_disk.type, boot_disk_gib=p.hardware.boot_disk.size_gib,
        local_nvme_gib=p.hardware.local_nvme_gib, spot=p.placement.spot, max_price_per_hour=p.placement.max_price_per_hour,
        max_run_hours=p.lifecycle.max_run_hours, ssh_from=p.placement.ssh_from, data_sources=tuple(d.source for d in p.data),
    )


@pytest.fixture
def spec(bert_spec) -> Callable[..., LaunchSpec]:
    def make(**over: Any) -> LaunchSpec:
        if "profile_hash" in over:  # keep name and labels consistent with the hash
            h = over["profile_hash"]
            over.setdefault("labels", labels_for(bert_spec.profile_name, h))
            over.setdefault("name", vm_name(bert_spec.profile_name, h))
        return replace(bert_spec, **over)

    return make


GCE_SHAPES = {  # instance type -> (family, gpu, count, vcpus, memory, attach, disk types, local nvme max)
    "n1-standard-8": ("n1", "T4", 1, 8, 30, "attachable", ("standard", "balanced", "ssd"), 9000),
    "a2-highgpu-1g": ("a2-highgpu", "A100", 1, 12, 85, "bundled", ("standard", "balanced", "ssd"), 3000),
    "a3-highgpu-8g": ("a3-highgpu", "H100", 8, 208, 1872, "bundled", ("balanced", "ssd"), 6000),
    "g2-standard-8": ("g2-standard", "L4", 1, 8, 32, "bundled", ("balanced", "ssd"), 375),
}


@pytest.fixture
def offer() -> Callable[..., Offer]:
    def make(zone: str = "us-central1-a", instance_type: str = "n1-standard-8", gpu: str | None = None,
             count: int | None = None, price: float = 0.73) -> Offer:
        family, g, n, vcpus, mem, attach, disks, nvme = GCE_SHAPES[instance_type]
        return Offer("gcp", instance_type, family, gpu or g, count or n, 16.0, vcpus, mem, zone.rsplit("-", 1)[0], zone,
                     price, round(price * 0.4, 4), attach, disks, nvme, "x86_64")

    return make


# ---------------------------------------------------------------------------------- the GCS payload store
@pytest.fixture(scope="session")
def gcs_server():
    """gcp-storage-emulator on 127.0.0.1 (tests/emulators/gcs.py says what it does not model)."""
    from tests.emulators.gcs import GcsEmulator

    with GcsEmulator() as emu:
        yield emu


@pytest.fixture
def gcs(gcs_server):
    gcs_server.wipe()
    yield gcs_server
    gcs_server.wipe()


READER = "123456789-compute@developer.gserviceaccount.com"


@pytest.fixture
def make_store(gcs) -> Callable[..., Any]:
    """A GcsPayloadStore on the emulator (anonymous credentials, short retries); ``now`` and the reader overridable."""
    from provisioner.providers.gcp.store import GcsPayloadStore

    def make(**kw: Any) -> GcsPayloadStore:
        kw = {"project": PROJECT, "credentials": None, "endpoint": gcs.url, "service_account": lambda: READER,
              "call_timeout": 2.0, "retry_base_delay": 0, **kw}
        return GcsPayloadStore(**kw)

    return make


@pytest.fixture
def sdk(gcs):
    """A google-cloud-storage client on the emulator, for reading back what the store did."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project=PROJECT, credentials=AnonymousCredentials(), client_options={"api_endpoint": gcs.url})


@pytest.fixture
def recorder() -> Callable[[Any], list[tuple[str, str, bytes]]]:
    """``recorder(store)``: every HTTP request the store's SDK client sends from then on, as (method, URL, body),
    recorded by a requests response hook on the SDK's own session (what went on the wire, answered)."""

    def record(store: Any) -> list[tuple[str, str, bytes]]:
        sent: list[tuple[str, str, bytes]] = []

        def hook(response: Any, *args: Any, **kwargs: Any) -> Any:
            body = response.request.body
            sent.append((response.request.method, response.request.url,
                         body.encode() if isinstance(body, str) else body or b""))
            return response

        store.client()._http.hooks["response"].append(hook)
        return sent

    return record
