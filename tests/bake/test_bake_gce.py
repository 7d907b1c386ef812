"""``trainvm bake --cloud gcp`` and ``trainvm images`` through the CLI, the real google-cloud-compute SDK and the GCE
emulator (images.insert from a disk, images.get/list/getFromFamily/delete: tests/emulators/gce_images.py), with the
payload staged in the GCS emulator. The builder's startup script does not run in the emulator: its console output is
planted (``play_serial``), as ``up --wait-ready`` tests do; the script's bake mode itself runs in
tests/render/test_bake_modes.py. Not modelled: image creation time, storage billing, a real DKMS build."""

from __future__ import annotations

import dataclasses
import os
import types

import pytest

from provisioner.bake.run import builder_name
from provisioner.profile import load_profile
from provisioner.providers.base import vm_name
from provisioner.providers.image_identity import LABEL_KIND, LABEL_LOCK_A, LABEL_LOCK_B, LABEL_STACK, mismatch
from tests.helpers import REPO, gce_cli_env, sigterm_when

TF = REPO / "profiles" / "examples" / "tf-resnet50.yaml"  # a committed lock
T4 = REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"  # no lock
LOG = "2026-11-27T10:00:0{i}+0000 trainvm {phase}: {msg}\n"


def _console(*phases: str, end: str = "baked") -> list[str]:
    chunks = []
    for i, phase in enumerate(phases):
        chunks.append(LOG.format(i=i, phase=phase, msg="phase start") + f"TRAINVM_STATUS=running:{phase}\n")
        chunks.append(LOG.format(i=i, phase=phase, msg="phase end: done"))
    chunks.append(f"TRAINVM_STATUS={end}\n")
    return chunks


@pytest.fixture
def gce(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINVM_GCE_OP_TIMEOUT", "5")
    yield from gce_cli_env(monkeypatch, tmp_path)


@pytest.fixture
def builder():
    loaded = load_profile(TF)
    return builder_name(vm_name(loaded.profile.name, loaded.hash))


def _payloads_in_gcs(prefix: str) -> list[str]:
    """The payload objects in the GCS emulator's buckets whose sha256 starts with ``prefix`` (the builder's
    ``trainvm-payload`` label), read with the storage SDK, not through trainvm's store."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    gcs = storage.Client(project="e2e-proj", credentials=AnonymousCredentials(),
                         client_options={"api_endpoint": os.environ["TRAINVM_GCS_ENDPOINT"]})
    return [f"{b.name}/{o.name}" for b in gcs.list_buckets() for o in gcs.list_blobs(b.name, prefix=f"payloads/{prefix}")]


def test_bake_removes_its_builders_payload_from_the_store(cli, gce, builder):
    """No VM but the builder names the payload it was staged for: the bake releases it as ``down`` would, and says so;
    a failed bake too."""
    gce.play_serial(builder, _console("driver", "bake-clean"))
    r = cli("bake", str(TF), "--cloud", "gcp", "--json")
    assert r.code == 0, r.err[-3000:]
    label = gce.calls("instances.insert")[0].body["labels"]["trainvm-payload"]
    assert r.json()["payload"] == {"state": "released", "sha256": label, "message": "removed from the store"}
    assert _payloads_in_gcs(label) == []


def test_a_failed_bake_removes_its_builders_payload_too(cli, gce, builder):
    gce.play_serial(builder, [LOG.format(i=0, phase="driver", msg="phase start") + "TRAINVM_STATUS=failed:driver:212\n"])
    r = cli("bake", str(TF), "--cloud", "gcp")
    assert r.code == 1
    label = gce.calls("instances.insert")[0].body["labels"]["trainvm-payload"]
    assert f"payload {label}: removed from the store" in r.err
    assert _payloads_in_gcs(label) == []


def test_bake_creates_a_labelled_image_in_the_profiles_family_and_deletes_the_builder(cli, gce, builder):
    gce.play_serial(builder, _console("preflight", "driver", "python", "packages", "bake-clean"))
    r = cli("bake", str(TF), "--cloud", "gcp", "--json")
    assert r.code == 0, r.err[-3000:]
    doc = r.json()
    assert doc["baked"] is True and doc["builder"] == builder
    image = doc["image"]
    assert image["family"] == "trainvm-tf-resnet50" and image["status"] == "READY"
    # the builder: a CPU shape without GPUs, stopped before its disk was imaged, then deleted with its disk
    insert = gce.calls("instances.insert")[0].body
    assert insert["machineType"].endswith("/n1-standard-4") and "guestAccelerators" not in insert
    assert insert["scheduling"]["instanceTerminationAction"] == "DELETE" and insert["scheduling"]["maxRunDuration"]
    methods = [c.method_id for c in gce.requests if c.method_id in (
        "compute.instances.stop", "compute.images.insert", "compute.instances.delete")]
    assert methods == ["compute.instances.stop", "compute.images.insert", "compute.instances.delete"]
    assert gce.instances == {}
    # the image's identity is the profile's, as the real API returns it
    stored = gce.baked[("e2e-proj", image["name"])]
    assert stored["sourceDisk"].endswith(f"/disks/{builder}")
    assert stored["labels"][LABEL_KIND] == "baked-image"
    from provisioner.bake.run import plan_bake
    from provisioner.hooks.providers import get_provider
    from provisioner.providers.gcp.bake import GceBaker

    want = plan_bake(load_profile(TF), GceBaker(get_provider("gcp")), "gcp", None).identity
    assert mismatch(stored["labels"], want) is None
    assert stored["labels"][LABEL_LOCK_A] + stored["labels"][LABEL_LOCK_B] == want.lock_sha256
    assert stored["labels"][LABEL_STACK] == want.stack


def test_a_second_bake_reuses_the_image_by_its_labels(cli, gce, builder):
    gce.play_serial(builder, _console("packages"))
    first = cli("bake", str(TF), "--cloud", "gcp", "--json")
    assert first.code == 0, first.err[-3000:]
    n_inserts = len(gce.calls("instances.insert"))
    again = cli("bake", str(TF), "--cloud", "gcp", "--json")
    assert again.code == 0, again.err[-3000:]
    assert again.json()["reused"] is True and again.json()["image"]["name"] == first.json()["image"]["name"]
    assert len(gce.calls("instances.insert")) == n_inserts  # no second builder


def test_a_changed_stack_is_not_reused(cli, gce, builder):
    gce.play_serial(builder, _console("packages"))
    assert cli("bake", str(TF), "--cloud", "gcp").code == 0
    name = next(iter(gce.baked))[1]
    gce.baked[("e2e-proj", name)]["labels"][LABEL_STACK] = "0" * 32  # as if baked from another stack
    gce.play_serial(builder, _console("packages"))
    r = cli("bake", str(TF), "--cloud", "gcp", "--json")
    assert r.code == 0, r.err[-3000:]
    assert r.json()["reused"] is False and r.json()["image"]["name"] != name


def test_a_failed_builder_reports_phase_and_line_and_leaves_nothing(cli, gce, builder):
    gce.play_serial(builder, [
        LOG.format(i=0, phase="driver", msg="phase start") + "TRAINVM_STATUS=running:driver\n",
        LOG.format(i=1, phase="driver", msg="ERROR: nvidia-driver-cuda 535.183.01 is not in NVIDIA's debian12 repository")
        + "TRAINVM_STATUS=failed:driver:212\n"])
    r = cli("bake", str(TF), "--cloud", "gcp")
    assert r.code == 1
    assert "the bake failed in phase driver at line 212" in r.err
    assert "is not in NVIDIA's debian12 repository" in r.err
    assert gce.instances == {} and gce.baked == {}
    assert not gce.calls("images.insert")


def test_an_interrupted_bake_deletes_the_builder(cli, gce, builder, monkeypatch):
    """SIGTERM while the builder installs (its console shows a phase forever): the builder and its disk are deleted."""
    gce.play_serial(builder, [LOG.format(i=0, phase="packages", msg="phase start") + "TRAINVM_STATUS=running:packages\n"])
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "0.05")
    timer = sigterm_when(lambda: gce.calls("instances.insert"))
    try:
        r = cli("bake", str(TF), "--cloud", "gcp")
    finally:
        timer.cancel()
    assert r.code == 130, (r.code, r.err[-2000:])
    assert gce.calls("instances.delete")
    assert gce.instances == {} and gce.baked == {}


def test_a_profile_without_a_lock_is_refused_before_anything_is_created(cli, gce):
    r = cli("bake", str(T4), "--cloud", "gcp")
    assert r.code == 2
    assert "has no lock, and a bake must be exact" in r.err and "trainvm lock" in r.err
    assert gce.requests == [] or not gce.calls("instances.insert")


def test_a_cloud_that_cannot_bake_yet_is_refused(cli, gce, monkeypatch):
    """Every cloud of the registry has a baker now: one without (as a new cloud would be) is simulated."""
    from provisioner import hooks

    table = {**hooks.HOOKS, "azure": dataclasses.replace(hooks.HOOKS["azure"], baker=None)}
    monkeypatch.setattr(hooks, "HOOKS", types.MappingProxyType(table))  # a cloud without a Baker
    r = cli("bake", str(TF), "--cloud", "azure")
    assert r.code == 2
    assert "cannot bake images on azure yet" in r.err and "clouds that can: aws, gcp" in r.err


def test_images_lists_and_deletes_baked_images(cli, gce, builder):
    gce.play_serial(builder, _console("packages"))
    name = cli("bake", str(TF), "--cloud", "gcp", "--json").json()["image"]["name"]
    listed = cli("images", "--cloud", "gcp", "--json")
    assert listed.code == 0, listed.err
    (doc,) = listed.json()["images"]
    assert doc["name"] == name and doc["profile"] == "tf-resnet50" and doc["regions"] == ["us"]
    assert doc["size_gib"] and doc["size_gib"] > 0 and doc["age_days"] is not None
    assert cli("images", "delete", name, "--cloud", "gcp").code == 0
    assert gce.baked == {}
    gone = cli("images", "delete", name, "--cloud", "gcp")
    assert gone.code == 4 and "no such baked image" in gone.out


def test_the_builder_is_deleted_by_gce_after_the_bake_timeout_plus_the_margin(cli, gce, builder, monkeypatch):
    """A ``trainvm`` killed outright (SIGKILL, a sleeping workstation) cannot delete the builder: GCE does, at its
    ``maxRunDuration`` = TRAINVM_BAKE_TIMEOUT + BUILDER_LIMIT_MARGIN_S, action DELETE, with its boot disk
    (``autoDelete``). The emulator stores the request; it does not model GCE deleting the VM at that time."""
    from provisioner.bake.run import BUILDER_LIMIT_MARGIN_S

    monkeypatch.setenv("TRAINVM_BAKE_TIMEOUT", "3600")
    gce.play_serial(builder, _console("packages"))
    r = cli("bake", str(TF), "--cloud", "gcp")
    assert r.code == 0, r.err[-3000:]
    said = " ".join(r.err.split())
    assert "should trainvm be killed, the builder deletes itself after 1 h 30 min (TRAINVM_BAKE_TIMEOUT + 30 min)" in said
    insert = gce.calls("instances.insert")[0].body
    sched = insert["scheduling"]
    assert int(sched["maxRunDuration"]["seconds"]) == 3600 + BUILDER_LIMIT_MARGIN_S
    assert sched["instanceTerminationAction"] == "DELETE"
    assert [d["autoDelete"] for d in insert["disks"] if d.get("boot")] == [True]
