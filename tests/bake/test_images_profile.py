"""``trainvm images --profile PATH``: the baked images whose identity matches the profile, and which one ``up`` would
boot per cloud and region of the plan (or why none, in ``up``'s and ``plan``'s words). Through the CLI, the real
google-cloud-compute SDK and the GCE emulator (``trainvm bake`` first, its builder's console planted)."""

from __future__ import annotations

import json

from tests.bake.test_up_baked_gce import _bake, gce, tf  # noqa: F401 - fixtures
from tests.helpers import REPO


def _images(cli, path, *args):
    r = cli("images", "--profile", str(path), "--cloud", "gcp", *args)
    assert r.code == 0, r.err[-3000:]
    return r


def test_lists_the_matching_image_and_says_up_boots_it_in_each_region(cli, gce, tf):  # noqa: F811
    name = _bake(cli, gce, tf)
    doc = _images(cli, tf, "--json").json()
    assert doc["profile"] == "tf-resnet50"
    assert [i["name"] for i in doc["images"]] == [name] and doc["images"][0]["storage"]["copies"] == 1
    assert doc["boot"] and {b["cloud"] for b in doc["boot"]} == {"gcp"}
    assert len({b["region"] for b in doc["boot"]}) == len(doc["boot"])  # one row per region
    assert all(b["used"] and b["name"] == name and b["ref"] == f"projects/e2e-proj/global/images/{name}"
               and b["reason"] is None for b in doc["boot"])
    text = _images(cli, tf).out
    assert f"{name}  gcp  profile tf-resnet50" in text
    assert f"up boots on gcp {doc['boot'][0]['region']}: {name}" in text


def test_a_changed_lock_matches_nothing_and_says_why(cli, gce, tf):  # noqa: F811
    name = _bake(cli, gce, tf)
    lock = tf.with_suffix(".lock")
    data = json.loads(lock.read_text())
    data["packages"][0]["sha256"] = "0" * 64  # same versions, another lock sha256
    lock.write_text(json.dumps(data, indent=2) + "\n")
    doc = _images(cli, tf, "--json").json()
    assert doc["images"] == []
    assert all(not b["used"] and b["reason"].startswith(f"{name} is not this stack: lock sha256 differs")
               for b in doc["boot"])
    text = _images(cli, tf).out
    assert "no baked image matches profile tf-resnet50" in text
    assert f"up installs on gcp {doc['boot'][0]['region']}: {name} is not this stack: lock sha256 differs" in text


def test_without_a_bake_or_a_lock(cli, gce, tf):  # noqa: F811
    doc = _images(cli, tf, "--json").json()
    assert doc["images"] == [] and doc["boot"]
    assert all(b["reason"] == "no baked image for this stack on gcp (`trainvm bake` makes one)" for b in doc["boot"])
    t4 = _images(cli, REPO / "profiles" / "examples" / "bert-finetune-t4.yaml", "--json").json()
    assert t4["images"] == []
    assert all(b["reason"] == "a baked image must be exact, and the profile has no lock" for b in t4["boot"])


def test_a_bad_profile_path_is_a_one_line_error(cli, gce, tmp_path):  # noqa: F811
    r = cli("images", "--profile", str(tmp_path / "nope.yaml"), "--cloud", "gcp")
    assert r.code == 2 and "Traceback" not in r.err and "nope.yaml" in r.err
