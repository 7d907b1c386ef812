"""``trainvm bake --cloud azure``, ``trainvm images`` and ``up`` booting a baked image, through the CLI, the real
azure-mgmt-* SDKs and the ARM emulator (galleries, gallery images, image versions, ``generalize``:
tests/emulators/arm_gallery.py), with the payload staged in Azurite. The builder's startup script does not run in the
emulator: its serial console is planted (``set_serial_log``), as the Azure ``up --wait-ready`` tests do.

What the emulator does not model (so these tests cannot show it): replication time (an image version is Succeeded
when its operation ends) and replication status, the storage billing of each replica, a real capture of the disk
(the version's size is the source OS disk's), ``waagent -deprovision`` in the guest (the script's bake mode runs in
tests/render and the Debian lane)."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from provisioner.bake.run import builder_name
from provisioner.profile import load_profile
from provisioner.providers.base import vm_name
from provisioner.providers.image_identity import LABEL_LOCK_A, LABEL_LOCK_B, LABEL_STACK, mismatch
from tests.emulators.arm import ArmEmulator
from tests.helpers import REPO, sigterm_when

LOG = "2026-11-27T10:00:0{i}+0000 trainvm {phase}: {msg}\n"
GALLERY_VERSION = "/providers/Microsoft.Compute/galleries/"


def _console(*phases: str, end: str = "baked") -> str:
    text = ""
    for i, phase in enumerate(phases):
        text += LOG.format(i=i, phase=phase, msg="phase start") + f"TRAINVM_STATUS=running:{phase}\n"
        text += LOG.format(i=i, phase=phase, msg="phase end: done")
    return text + f"TRAINVM_STATUS={end}\n"


@pytest.fixture
def arm(env, tmp_path):
    env.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        try:
            yield emu
        finally:
            emu.finish_operations(stuck=True)


@pytest.fixture
def profile(tmp_path) -> Path:
    """tf-resnet50 (its committed lock: the lock's inputs include neither hardware, placement nor data) on one T4 on
    Azure only, reading its data over https (a gs:// source needs a credential on Azure)."""
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    base = tmp_path / "profiles" / "examples"
    path = base / "tf-azure.yaml"
    shutil.copy(base / "tf-resnet50.lock", base / "tf-azure.lock")
    path.write_text("extends: tf-resnet50.yaml\nhardware: {gpu: T4, min_vcpus: 4, min_memory_gib: 16}\nplacement:\n  clouds: [azure]\n"
                    "data:\n  - {source: 'https://example.com/imagenet.tar', dest: /mnt/data/imagenet}\n")
    loaded = load_profile(path)
    assert loaded.lock_state == "fresh"
    return path


@pytest.fixture
def builder(profile, arm) -> str:
    """The builder's name; its console shows a successful bake."""
    loaded = load_profile(profile)
    name = builder_name(vm_name(loaded.profile.name, loaded.hash))
    arm.set_serial_log(f"trainvm-{name}", name, _console("preflight", "driver", "python", "packages", "bake-clean"))
    return name


def _versions(arm) -> list[dict]:
    return [r for r in arm.state.res.values() if r["type"] == "Microsoft.Compute/galleries/images/versions"]


def _definitions(arm) -> list[dict]:
    return [r for r in arm.state.res.values() if r["type"] == "Microsoft.Compute/galleries/images"]


def _nothing_left(arm) -> None:
    """No builder group, no VM, no disk, no image version or definition (the empty gallery and its group stay,
    as the payload store's group does: neither bills)."""
    assert [g for g in arm.vm_groups() if not g.startswith("trainvm-gallery-")] == []
    assert _versions(arm) == [] and _definitions(arm) == []
    kinds = {r["type"] for r in arm.state.res.values()}
    assert not kinds & {"Microsoft.Compute/virtualMachines", "Microsoft.Compute/disks"}, kinds


def test_bake_captures_a_generalized_tagged_version_replicated_to_the_failover_regions(cli, arm, profile, builder):
    r = cli("bake", str(profile), "--cloud", "azure", "--json")
    assert r.code == 0, r.err[-3000:]
    doc = r.json()
    assert doc["baked"] is True and doc["builder"] == builder
    image = doc["image"]
    # the builder: Standard_D2s_v5, deallocated, generalized, captured, then its whole group deleted
    [vm_put] = arm.calls("PUT", f"/virtualMachines/{builder}$")
    assert vm_put.body["properties"]["hardwareProfile"]["vmSize"] == "Standard_D2s_v5"
    order = [(c.method, c.path.rsplit("/", 1)[-1]) for c in arm.requests
             if c.method in ("POST", "PUT", "DELETE") and (c.path.endswith(("/deallocate", "/generalize"))
                                                          or "/versions/" in c.path or c.path.endswith(f"trainvm-{builder}"))]
    assert [m for m, _ in order] == ["PUT", "POST", "POST", "PUT", "DELETE"], order
    assert order[1][1] == "deallocate" and order[2][1] == "generalize"
    assert [g for g in arm.vm_groups() if not g.startswith("trainvm-gallery-")] == []
    # one version, in the gallery of the builder's region, replicated to every Azure region of the failover order
    [version] = _versions(arm)
    [definition] = _definitions(arm)
    region = vm_put.body["location"]
    assert version["id"] == image["ref"] and f"/resourceGroups/trainvm-gallery-{region}/" in version["id"]
    dprops = definition["body"]["properties"]
    assert (dprops["osState"], dprops["hyperVGeneration"]) == ("Generalized", "V2")
    assert {"name": "SecurityType", "value": "TrustedLaunchSupported"} in dprops["features"]
    props = version["body"]["properties"]
    assert props["storageProfile"]["source"]["virtualMachineId"].endswith(f"/virtualMachines/{builder}")
    targets = [t["name"] for t in props["publishingProfile"]["targetRegions"]]
    from provisioner.bake.run import plan_bake
    from provisioner.hooks.providers import get_provider
    from provisioner.providers.azure.bake import AzureBaker

    planned = plan_bake(load_profile(profile), AzureBaker(get_provider("azure")), "azure", None)
    assert targets == list(planned.regions) and targets[0] == region and len(targets) > 1
    assert image["regions"] == targets and image["status"] == "Succeeded"
    tags = version["body"]["tags"]
    want = planned.identity
    assert want.base_image.startswith("Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:")
    assert mismatch(tags, want) is None
    assert tags[LABEL_LOCK_A] + tags[LABEL_LOCK_B] == want.lock_sha256 and tags[LABEL_STACK] == want.stack


def test_a_second_bake_reuses_the_version_by_its_tags(cli, arm, profile, builder):
    first = cli("bake", str(profile), "--cloud", "azure", "--json")
    assert first.code == 0, first.err[-3000:]
    again = cli("bake", str(profile), "--cloud", "azure", "--json")
    assert again.code == 0, again.err[-3000:]
    assert again.json()["reused"] is True and again.json()["image"]["name"] == first.json()["image"]["name"]
    assert len(arm.calls("PUT", "/virtualMachines/")) == 1 and len(arm.calls("PUT", "/versions/")) == 1


def test_a_version_of_another_stack_is_not_reused(cli, arm, profile, builder):
    first = cli("bake", str(profile), "--cloud", "azure", "--json").json()["image"]
    [version] = _versions(arm)
    version["body"]["tags"][LABEL_STACK] = "0" * 32  # as if baked from another stack
    r = cli("bake", str(profile), "--cloud", "azure", "--json")
    assert r.code == 0, r.err[-3000:]
    assert r.json()["reused"] is False and r.json()["image"]["name"] != first["name"]
    assert len(_versions(arm)) == 2 and len(_definitions(arm)) == 1


def test_images_lists_the_version_and_delete_leaves_no_version_nor_definition(cli, arm, profile, builder):
    name = cli("bake", str(profile), "--cloud", "azure", "--json").json()["image"]["name"]
    listed = cli("images", "--cloud", "azure", "--json")
    assert listed.code == 0, listed.err
    (doc,) = listed.json()["images"]
    assert doc["name"] == name and doc["profile"] == "tf-resnet50" and len(doc["regions"]) > 1
    assert doc["size_gib"] and doc["age_days"] is not None
    # each replica bills as a snapshot (Compute Gallery "Billing"): one Standard_LRS replica per target region
    storage = doc["storage"]
    assert storage["copies"] == len(doc["regions"])
    assert storage["monthly"] == pytest.approx(doc["size_gib"] * storage["price_gib_month"] * len(doc["regions"]), abs=0.01)
    deleted = cli("images", "delete", name, "--cloud", "azure")
    assert deleted.code == 0, deleted.err
    _nothing_left(arm)
    gone = cli("images", "delete", name, "--cloud", "azure")
    assert gone.code == 4 and "no such baked image" in gone.out


def test_an_interrupted_bake_deletes_the_builder_group_and_leaves_nothing(cli, arm, profile, monkeypatch):
    """SIGTERM while the builder installs (its console shows a phase forever)."""
    loaded = load_profile(profile)
    name = builder_name(vm_name(loaded.profile.name, loaded.hash))
    arm.set_serial_log(f"trainvm-{name}", name, LOG.format(i=0, phase="packages", msg="phase start")
                       + "TRAINVM_STATUS=running:packages\n")
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "0.05")
    timer = sigterm_when(lambda: arm.calls("PUT", "/virtualMachines/"))
    try:
        r = cli("bake", str(profile), "--cloud", "azure")
    finally:
        timer.cancel()
    assert r.code == 130, (r.code, r.err[-2000:])
    assert arm.calls("DELETE", f"/resourceGroups/trainvm-{name}$") and not arm.calls("PUT", "/versions/")
    _nothing_left(arm)


def test_an_interrupt_while_the_version_is_created_removes_it_and_the_builder(cli, arm, profile, builder):
    """SIGTERM while the image version's creation (replication) runs: the version and the definition it was the only
    version of are deleted, and so is the builder's group."""
    arm.inject("lro_never_done", method="PUT", path="/versions/", times=1)
    state = {"sent": False}

    def interrupt_once_creating(method, path, body, status) -> None:
        if method == "PUT" and "/versions/" in path and not state["sent"]:
            state["sent"] = True
            threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()

    arm.after_request = interrupt_once_creating
    r = cli("bake", str(profile), "--cloud", "azure")
    assert r.code == 130, (r.code, r.err[-2000:])
    assert arm.calls("DELETE", "/versions/")
    _nothing_left(arm)


def test_a_failed_capture_leaves_nothing(cli, arm, profile, builder):
    arm.inject("invalid_400", method="PUT", path="/versions/", times=None)
    r = cli("bake", str(profile), "--cloud", "azure")
    assert r.code != 0
    _nothing_left(arm)


def test_a_failed_builder_reports_phase_and_line_and_leaves_nothing(cli, arm, profile):
    loaded = load_profile(profile)
    name = builder_name(vm_name(loaded.profile.name, loaded.hash))
    arm.set_serial_log(f"trainvm-{name}", name, LOG.format(i=0, phase="driver", msg="phase start")
                       + "TRAINVM_STATUS=running:driver\n"
                       + LOG.format(i=1, phase="driver", msg="ERROR: nvidia-driver 535 is not in the repository")
                       + "TRAINVM_STATUS=failed:driver:212\n")
    r = cli("bake", str(profile), "--cloud", "azure")
    assert r.code == 1
    assert "the bake failed in phase driver at line 212" in r.err
    assert not arm.calls("POST", "/generalize$") and not arm.calls("PUT", "/versions/")
    _nothing_left(arm)


def _custom_data(vm_put) -> str:
    return base64.b64decode(vm_put.body["properties"]["osProfile"]["customData"]).decode()


def test_up_boots_the_version_by_id_with_the_baked_mode_payload(cli, arm, profile, builder):
    """After a bake, ``up`` on Azure creates the VM from the gallery image version (``imageReference.id``) and
    gives it the payload rendered in baked mode (verify only)."""
    from provisioner.planner.from_profile import Overrides, make_plan
    from provisioner.render.script import render_for_offer

    baked = cli("bake", str(profile), "--cloud", "azure", "--json")
    assert baked.code == 0, baked.err[-3000:]
    ref = baked.json()["image"]["ref"]
    r = cli("up", str(profile), "--yes", "--cloud", "azure", "--json")
    assert r.code == 0, r.err[-3000:]
    doc = r.json()
    assert doc["summary"]["baked_image"]["used"] is True, doc["summary"]["baked_image"]
    [vm_put] = arm.calls("PUT", f"/virtualMachines/{doc['name']}$")
    assert vm_put.body["properties"]["storageProfile"]["imageReference"] == {"id": ref}
    created = arm.resource(f"/subscriptions/{arm.subscription_id}/resourceGroups/trainvm-{doc['name']}"
                           f"/providers/Microsoft.Compute/virtualMachines/{doc['name']}")
    assert created["properties"]["storageProfile"]["imageReference"]["id"] == ref
    loaded = load_profile(profile)
    plan = make_plan(loaded, Overrides(("azure",), None, None)).plan
    offer = next(o for o in (plan.chosen, *plan.failover) if o.region == doc["region"]
                 and o.instance_type == doc["instance_type"])
    shas = {mode or "install": render_for_offer(loaded, offer, mode).payload.sha256 for mode in ("", "baked")}
    assert shas["baked"] != shas["install"]
    assert shas["baked"] in _custom_data(vm_put) and shas["install"] not in _custom_data(vm_put)


def test_a_region_without_a_replica_installs_as_usual_and_says_why(cli, arm, profile, builder):
    baked = cli("bake", str(profile), "--cloud", "azure", "--json")
    assert baked.code == 0, baked.err[-3000:]
    [version] = _versions(arm)
    # as if it had been baked for another failover order: its only replica is in a region this profile never uses
    version["body"]["properties"]["publishingProfile"]["targetRegions"] = [{"name": "japaneast"}]
    r = cli("up", str(profile), "--yes", "--cloud", "azure", "--json")
    assert r.code == 0, r.err[-3000:]
    doc = r.json()
    reason = doc["summary"]["baked_image"]["reason"]
    assert doc["summary"]["baked_image"]["used"] is False and f"has no copy in {doc['region']}" in reason
    [vm_put] = arm.calls("PUT", f"/virtualMachines/{doc['name']}$")
    assert vm_put.body["properties"]["storageProfile"]["imageReference"]["publisher"] == "Canonical"


def test_up_with_a_version_of_another_stack_installs_as_usual_and_says_why(cli, arm, profile, builder):
    baked = cli("bake", str(profile), "--cloud", "azure", "--json")
    assert baked.code == 0, baked.err[-3000:]
    [version] = _versions(arm)
    version["body"]["tags"][LABEL_LOCK_A] = "f" * 32  # as if baked from another lock
    r = cli("up", str(profile), "--yes", "--cloud", "azure", "--json")
    assert r.code == 0, r.err[-3000:]
    doc = r.json()
    choice = doc["summary"]["baked_image"]
    assert choice["used"] is False and choice["reason"].startswith(f"{baked.json()['image']['name']} is not this stack: "
                                                                   "lock sha256 differs")
    [vm_put] = arm.calls("PUT", f"/virtualMachines/{doc['name']}$")
    assert vm_put.body["properties"]["storageProfile"]["imageReference"]["publisher"] == "Canonical"


def test_the_builder_deletes_its_group_after_the_bake_timeout_plus_the_margin(cli, arm, env, profile, builder,
                                                                            read_before_release):
    """Azure has no run limit of its own, and a guest shutdown leaves a VM "Stopped" and billing: a builder whose
    ``trainvm`` was killed outright deletes its own resource group through ARM at the max-run deadline of its payload
    (TRAINVM_BAKE_TIMEOUT + BUILDER_LIMIT_MARGIN_S, delete), with the user-assigned identity ``up`` makes for it, granted
    Contributor on that group only (what ``up`` grants for on_max_run: delete). The payload is read from Azurite, where
    the builder's bootstrap fetches it. Not modelled: the role taking effect, the timer (tests/render/test_bake_limit.py)."""
    import io
    import re
    import tarfile

    from provisioner.bake.run import BUILDER_LIMIT_MARGIN_S
    from tests.emulators import azurite_server
    from tests.emulators.arm_roles import BUILT_IN_ROLES

    env.setenv("TRAINVM_BAKE_TIMEOUT", "3600")

    def read(sha: str) -> bytes:  # the bake releases the payload as it ends: read it before that, where the VM would
        [put] = arm.calls("PUT", f"/virtualMachines/{builder}$")
        url = re.search(r"https://[^\s'\"]+\.tar\.gz", _custom_data(put))
        assert url and sha in url.group(0), _custom_data(put)[:2000]
        account, container, key = re.fullmatch(r"https://[^/]+/([^/]+)/([^/]+)/(.+)", url.group(0)).groups()
        return azurite_server.shared().service(account, arm.ca_path).get_blob_client(container, key).download_blob().readall()

    seen = read_before_release(read)
    r = cli("bake", str(profile), "--cloud", "azure", "--json")
    assert r.code == 0, r.err[-3000:]
    assert r.json()["payload"]["state"] == "released"
    [vm_put] = arm.calls("PUT", f"/virtualMachines/{builder}$")
    assert vm_put.body["identity"]["type"] == "UserAssigned"  # its own identity, granted before the builder exists
    group = f"/resourceGroups/trainvm-{builder}".lower()
    grants = [c for c in arm.calls("PUT", "/providers/Microsoft.Authorization/roleAssignments/")
              if c.path.lower().split("/providers/microsoft.authorization/")[0].endswith(group)]
    assert [BUILT_IN_ROLES[g.body["properties"]["roleDefinitionId"].rsplit("/", 1)[-1].lower()] for g in grants] == ["Contributor"]
    [body] = seen
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        member = tar.extractfile("startup.sh")
        assert member is not None
        script = member.read().decode()
    cfg = {k: v.strip("'\"") for k, v in re.findall(r"^(TV_[A-Z_]+)=(\S*)$", script, re.M)}
    assert (cfg["TV_MAX_RUN_SECONDS"], cfg["TV_ON_MAX_RUN"], cfg["TV_IDLE_MINUTES"]) == (
        str(3600 + int(BUILDER_LIMIT_MARGIN_S)), "delete", "0")
    assert [g for g in arm.vm_groups() if not g.startswith("trainvm-gallery-")] == []  # and bake deleted it itself
