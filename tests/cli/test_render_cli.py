"""CLI: render for every cloud (files, sizes, JSON), plan --show-script."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
BIG = str(REPO / "profiles" / "examples" / "bert-pretrain-8xa100.yaml")


@pytest.fixture(autouse=True)
def _today(monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")


@pytest.mark.parametrize("cloud", ["gcp", "azure", "aws"])
@pytest.mark.parametrize("profile", [T4, BIG], ids=["t4", "8xa100"])
def test_render_writes_script_user_data_and_request(cli, tmp_path: Path, cloud: str, profile: str) -> None:
    out = tmp_path / "out"
    r = cli("render", profile, "--cloud", cloud, "--out", str(out), "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["cloud"] == cloud and doc["offer"]["cloud"] == cloud
    script = (out / "startup.sh").read_text()
    assert script.startswith("#!/bin/bash") and "TRAINVM_REPORT" in script
    user_data = (out / "user-data").read_bytes()
    request = json.loads((out / "request.json").read_text())
    if cloud == "gcp":
        assert user_data.decode() == script
        items = {i["key"]: i["value"] for i in request["metadata"]["items"]}
        assert items["startup-script"] == script and items["enable-guest-attributes"] == "TRUE"
    elif cloud == "azure":
        assert user_data.startswith(b"#cloud-config")
        body = json.dumps(request)
        assert "customData" in body and len(base64.b64encode(user_data)) <= 87_380
    else:
        assert len(user_data) <= 16_384
        if user_data[:2] == b"\x1f\x8b":
            assert gzip.decompress(user_data).startswith(b"#!")
        assert base64.b64decode(request["RunInstances"]["UserData"]) == user_data
    assert doc["sizes"]["user-data"] == len(user_data)


def test_render_to_stdout_and_plan_show_script(cli) -> None:
    r = cli("render", T4, "--cloud", "gcp")
    assert r.code == 0 and r.out.startswith("#!/bin/bash") and "request.json" in r.err
    p = cli("plan", T4, "--show-script")
    assert p.code == 0 and "#!/bin/bash" in p.out and "chosen:" in p.out
    j = cli("plan", T4, "--json", "--show-script").json()
    import hashlib

    assert hashlib.sha256(j["script"].encode()).hexdigest() == j["script_sha256"]


def test_render_shows_the_spilled_files_and_their_tags(cli, tmp_path: Path, write_yaml) -> None:
    """With s3:// data the T4 script does not fit AWS user data whole: render says what went into instance tags,
    and request.json carries those tags on the instance (render/spill.py)."""
    p = write_yaml(f"extends: {T4}\nname: bert-finetune\ndata:\n  - {{source: 's3://example-ml-data/glue/', dest: /mnt/data/glue}}\n")
    out = tmp_path / "out"
    doc = cli("render", str(p), "--cloud", "aws", "--out", str(out), "--json").json()
    assert doc["sizes"]["user-data"] <= 16_384 and doc["spilled"]
    request = json.loads((out / "request.json").read_text())["RunInstances"]
    inst = {t["Key"]: t["Value"] for t in request["TagSpecifications"][0]["Tags"]}
    keys = [k for f in doc["spilled"] for k in f["tags"]]
    assert keys and all(k in inst and 0 < len(inst[k]) <= 256 for k in keys)
    assert len(inst) <= 50 and request["MetadataOptions"]["InstanceMetadataTags"] == "enabled"
    script = (out / "startup.sh").read_text()
    assert all(f"'{f['file']}:" in script and "/" + f["file"] in script for f in doc["spilled"])
    text = cli("render", str(p), "--cloud", "aws")
    assert "embedded files in" in text.err and "instance tags" in text.err


def test_render_no_offer_on_that_cloud_exit_1(cli, write_yaml) -> None:
    p = write_yaml("name: t\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\nplacement: {regions: [mars-*]}\n")
    r = cli("render", str(p), "--cloud", "gcp")
    assert r.code == 1 and "no feasible offer" in r.err


def test_render_bad_cloud_exit_2(cli) -> None:
    assert cli("render", T4, "--cloud", "ibm").code == 2
