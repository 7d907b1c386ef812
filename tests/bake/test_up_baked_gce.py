"""``up`` boots a matching baked image (docs/bake.md) through the CLI, the real google-cloud-compute SDK and the GCE
emulator: ``trainvm bake`` first (its builder's console planted, as in test_bake_gce.py), then ``up``. What the VM
then runs is not modelled here (the emulator runs no script); which payload it was given is: the instance's
``trainvm-payload`` label names the staged payload, compared with the profile rendered in each image mode."""

from __future__ import annotations

import json
import shutil

import pytest

from provisioner.bake.run import builder_name
from provisioner.planner.from_profile import Overrides, make_plan
from provisioner.profile import load_profile
from provisioner.providers.base import vm_name
from provisioner.render.script import render_for_offer
from tests.bake.test_bake_gce import _console
from tests.helpers import REPO, gce_cli_env


@pytest.fixture
def gce(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINVM_GCE_OP_TIMEOUT", "5")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield from gce_cli_env(monkeypatch, tmp_path)


@pytest.fixture
def tf(tmp_path):
    """A copy of profiles/ (tf-resnet50 extends a base profile and has a committed lock), to change its lock."""
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    return tmp_path / "profiles" / "examples" / "tf-resnet50.yaml"


def _bake(cli, gce, path) -> str:
    loaded = load_profile(path)
    gce.play_serial(builder_name(vm_name(loaded.profile.name, loaded.hash)), _console("driver", "packages", "bake-clean"))
    r = cli("bake", str(path), "--cloud", "gcp", "--json")
    assert r.code == 0, r.err[-3000:]
    return r.json()["image"]["name"]


def _payload_shas(path, zone: str, instance_type: str) -> dict[str, str]:
    """The payload's sha256 for the offer ``up`` created, rendered to install and rendered for a baked image."""
    loaded = load_profile(path)
    plan = make_plan(loaded, Overrides(("gcp",), None, None)).plan
    offer = next(o for o in (plan.chosen, *plan.failover) if o.zone == zone and o.instance_type == instance_type)
    return {mode or "install": render_for_offer(loaded, offer, mode).payload.sha256 for mode in ("", "baked")}


def _boot_image(gce) -> str:
    (insert,) = gce.calls("instances.insert")[-1:]
    (boot,) = [d for d in insert.body["disks"] if d.get("boot")]
    return boot["initializeParams"]["sourceImage"]


def test_up_boots_the_matching_baked_image_with_the_verify_only_payload(cli, gce, tf):
    name = _bake(cli, gce, tf)
    up = cli("up", str(tf), "--yes", "--json", "--cloud", "gcp")
    assert up.code == 0, up.err[-3000:]
    doc = up.json()
    assert _boot_image(gce) == f"projects/e2e-proj/global/images/{name}"
    assert doc["summary"]["baked_image"] == {"cloud": "gcp", "used": True, "name": name,
                                             "ref": f"projects/e2e-proj/global/images/{name}", "reason": None}
    shas = _payload_shas(tf, doc["zone"], doc["instance_type"])
    assert shas["baked"] != shas["install"]
    inst = gce.instance(doc["name"])
    assert inst["labels"]["trainvm-payload"] == shas["baked"][:16]  # the staged payload only verifies
    assert doc["summary"]["payload"]["sha256"] == shas["baked"]
    assert inst["labels"]["trainvm-baked"] == name


def test_a_changed_lock_boots_the_public_image_and_says_why(cli, gce, tf):
    name = _bake(cli, gce, tf)
    lock = tf.with_suffix(".lock")
    data = json.loads(lock.read_text())
    data["packages"][0]["sha256"] = "0" * 64  # a re-lock that pinned another wheel: same versions, another lock sha256
    lock.write_text(json.dumps(data, indent=2) + "\n")
    up = cli("up", str(tf), "--yes", "--json", "--cloud", "gcp")
    assert up.code == 0, up.err[-3000:]
    doc = up.json()
    boot = _boot_image(gce)
    assert boot.startswith("projects/ubuntu-os-cloud/global/images/") and name not in boot
    baked = doc["summary"]["baked_image"]
    assert baked["used"] is False and baked["name"] is None
    assert baked["reason"].startswith(f"{name} is not this stack: lock sha256 differs")
    shas = _payload_shas(tf, doc["zone"], doc["instance_type"])
    assert doc["summary"]["payload"]["sha256"] == shas["install"]
    text = cli("up", str(tf), "--yes", "--cloud", "gcp", "--name", "tf-second")
    assert text.code == 0, text.err[-3000:]
    assert "baked image not used: " in text.err and "lock sha256 differs" in text.err


def test_no_baked_image_installs_and_says_so(cli, gce, tf):
    up = cli("up", str(tf), "--yes", "--json", "--cloud", "gcp")
    assert up.code == 0, up.err[-3000:]
    baked = up.json()["summary"]["baked_image"]
    assert baked["used"] is False and baked["reason"].startswith("no baked image for this stack on gcp")
    assert _boot_image(gce).startswith("projects/ubuntu-os-cloud/global/images/")


def test_a_profile_without_a_lock_is_not_looked_up(cli, gce):
    up = cli("up", str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"), "--yes", "--json", "--cloud", "gcp")
    assert up.code == 0, up.err[-3000:]
    baked = up.json()["summary"]["baked_image"]
    assert baked["used"] is False and "a baked image must be exact" in baked["reason"] and "no lock" in baked["reason"]
    assert not gce.calls("images.list")


def test_ctrl_c_during_the_bake_wait_leaves_nothing(cli, gce, tf, monkeypatch):
    """KeyboardInterrupt while ``bake`` follows the builder's console: exit 130, the builder deleted, no image, no
    record of a bake. The emulator keeps a VM's boot disk inside the instance (``autoDelete``, as the builder's
    request asks), so a deleted instance is a deleted disk; a disk left detached is not modelled. The payload staged
    in GCS stays, as after ``up`` (content-addressed, reused by the next bake)."""
    from provisioner.bake import records
    from provisioner.verify.console import ConsoleFollower

    loaded = load_profile(tf)
    gce.play_serial(builder_name(vm_name(loaded.profile.name, loaded.hash)), _console("driver"))

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ConsoleFollower, "feed", interrupted)
    r = cli("bake", str(tf), "--cloud", "gcp")
    assert r.code == 130, (r.code, r.err[-2000:])
    (insert,) = gce.calls("instances.insert")
    assert all(d.get("autoDelete") for d in insert.body["disks"])
    assert [c.method_id for c in gce.requests if c.method_id == "compute.instances.delete"]
    assert gce.instances == {} and gce.baked == {} and not gce.calls("images.insert")
    assert records.load() == []
