"""``plan`` says offline whether ``up`` will boot a baked image (the local record of bakes that ``trainvm bake``
writes: provisioner/bake/records.py) and the expected time to ready (provisioner/bake/ready_time.py, estimates).
The bake itself runs against the GCE emulator (as in test_bake_gce.py); ``plan`` then runs with no cloud at all."""

from __future__ import annotations

import dataclasses
import json
import types

from tests.bake.test_up_baked_gce import _bake, gce, tf  # noqa: F401 - fixtures
from tests.helpers import REPO


def _plan(cli, path, *args):
    r = cli("plan", str(path), "--cloud", "gcp", *args)
    assert r.code == 0, r.err[-2000:]
    return r


def test_plan_names_the_baked_image_from_the_local_record(cli, gce, tf, monkeypatch):  # noqa: F811
    name = _bake(cli, gce, tf)
    monkeypatch.delenv("TRAINVM_GCE_ENDPOINT")  # plan asks no cloud
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    n = len(gce.requests)
    doc = _plan(cli, tf, "--json").json()["baked_image"]
    assert doc["used"] is True and doc["name"] == name and doc["reason"] is None
    ready = doc["ready"]
    # boot + every install phase verified; its data has no size_gib, so that term is unknown (issue 36 item 22)
    assert ready["seconds"] == round(75 + 0.5) and ready["estimate"] is True and ready["unknown"] == ["data"]
    assert "issue #28" in ready["terms"][0]["basis"] and [t["phase"] for t in ready["terms"]] == ["boot", "install", "data"]
    text = _plan(cli, tf).out
    assert f"baked image: {name} (from a local record of bakes; `up` confirms in the cloud)" in text
    assert "expected time to ready: at least 1m16s from the baked image (boot 1m15s, install 0s; not known: data" in text
    assert len(gce.requests) == n
    # what keeping it costs, from the record's size and copies and the catalog's image row (docs/bake.md)
    from provisioner.bake import records
    from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog

    (price,) = load_catalog(EMBEDDED_DIR).disk_prices.rows_for("gcp", "*", "image")
    (rec,) = records.load()
    monthly = round(rec["size_gib"] * price.price_month, 2)
    assert doc["storage"] == {"monthly": monthly, "copies": 1, "price_gib_month": price.price_month,
                              "source": price.source}
    assert f"baked image storage: ${monthly:.2f}/month (1 copy) until `trainvm images delete {name}`" in text


def test_plan_says_why_a_recorded_image_is_not_used(cli, gce, tf):  # noqa: F811
    name = _bake(cli, gce, tf)
    lock = tf.with_suffix(".lock")
    data = json.loads(lock.read_text())
    data["packages"][0]["sha256"] = "0" * 64  # same versions, another lock sha256
    lock.write_text(json.dumps(data, indent=2) + "\n")
    doc = _plan(cli, tf, "--json").json()["baked_image"]
    assert doc["used"] is False and doc["reason"].startswith(f"{name} is not this stack: lock sha256 differs")
    assert "storage" not in doc  # only the image `up` would boot is priced here; `trainvm images` lists them all
    assert doc["ready"]["seconds"] > 75 and doc["ready"]["baked"] is False  # the cold install's terms, from this profile
    assert "expected time to ready: at least" in _plan(cli, tf).out and "cold install" in _plan(cli, tf).out


def test_plan_without_a_record_or_a_lock(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    doc = _plan(cli, REPO / "profiles" / "examples" / "tf-resnet50.yaml", "--json").json()["baked_image"]
    assert doc["used"] is False and doc["reason"] == "no local record of a bake on gcp (`trainvm bake` makes one)"
    t4 = _plan(cli, REPO / "profiles" / "examples" / "bert-finetune-t4.yaml", "--json").json()["baked_image"]
    assert t4["used"] is False and "a baked image must be exact" in t4["reason"]


def test_plan_on_a_cloud_that_cannot_bake(monkeypatch):
    """A cloud without a baker (every registered cloud has one now: simulated for Azure) gets the reason, and no
    time for a baked image (none can exist)."""

    from provisioner import hooks
    from provisioner.bake.offline import plan_baked
    from provisioner.planner.from_profile import Overrides, make_plan
    from provisioner.profile import load_profile

    table = {**hooks.HOOKS, "azure": dataclasses.replace(hooks.HOOKS["azure"], baker=None)}
    monkeypatch.setattr(hooks, "HOOKS", types.MappingProxyType(table))  # a cloud without a Baker

    loaded = load_profile(REPO / "profiles" / "examples" / "tf-resnet50.yaml")
    offer = make_plan(loaded, Overrides(("gcp",), None, None)).plan.chosen
    doc = plan_baked(loaded, dataclasses.replace(offer, cloud="azure"))
    assert doc["used"] is False and doc["reason"] == "trainvm cannot bake images on azure yet"
    assert doc["ready"]["baked"] is False  # the cold-install estimate, never a baked one
