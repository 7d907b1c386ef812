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
    script = (out / "payload" / "startup.sh").read_text()
    assert script.startswith("#!/bin/bash") and "TRAINVM_REPORT" in script
    user_data = (out / "user-data").read_bytes()
    assert user_data.startswith(b"#!/bin/bash\n") and b"trainvm bootstrap" in user_data
    assert len(gzip.compress(user_data, 9, mtime=0)) <= 4096  # the aim, whatever the profile
    request = json.loads((out / "request.json").read_text())
    if cloud == "gcp":
        items = {i["key"]: i["value"] for i in request["metadata"]["items"]}
        assert items["startup-script"] == user_data.decode() and items["enable-guest-attributes"] == "TRUE"
    elif cloud == "azure":
        body = json.dumps(request)
        assert base64.b64encode(user_data).decode() in body and len(base64.b64encode(user_data)) <= 87_380
    else:
        assert len(user_data) <= 16_384
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


def test_render_out_writes_the_bootstrap_and_the_payload_side_by_side(cli, tmp_path: Path, write_yaml) -> None:
    """s3:// data with a large lock no longer shapes AWS user data: render --out writes user-data (the bootstrap,
    a few KB whatever the profile), payload.tar.gz (its sha256 is the one the bootstrap names) and the payload
    unpacked, so a reviewer sees every file the VM runs; request.json carries the bootstrap."""
    import hashlib

    p = write_yaml(f"extends: {T4}\nname: bert-finetune\ndata:\n  - {{source: 's3://example-ml-data/glue/', dest: /mnt/data/glue}}\n")
    out = tmp_path / "out"
    doc = cli("render", str(p), "--cloud", "aws", "--out", str(out), "--json").json()
    boot = (out / "user-data").read_text()
    sha = hashlib.sha256((out / "payload.tar.gz").read_bytes()).hexdigest()
    assert doc["payload"]["sha256"] == sha and f"TV_SHA256='{sha}'" in boot
    assert doc["sizes"]["user-data"] == len(boot.encode()) and doc["sizes"]["user-data-gzip"] <= 4096
    assert (out / "payload" / "startup.sh").read_text().startswith("#!/bin/bash\n")
    manifest = json.loads((out / "payload" / "manifest.json").read_text())
    assert manifest["files"]["startup.sh"] == hashlib.sha256((out / "payload" / "startup.sh").read_bytes()).hexdigest()
    request = json.loads((out / "request.json").read_text())["RunInstances"]
    assert base64.b64decode(request["UserData"]).decode() == boot
    assert not [t for t in request["TagSpecifications"][0]["Tags"] if t["Key"].startswith("tv-f")]
    text = cli("render", str(p), "--cloud", "aws")
    assert "payload" in text.err and "bootstrap" in text.err


def test_render_no_offer_on_that_cloud_exit_1(cli, write_yaml) -> None:
    p = write_yaml("name: t\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\nplacement: {regions: [mars-*]}\n")
    r = cli("render", str(p), "--cloud", "gcp")
    assert r.code == 1 and "no feasible offer" in r.err


def test_render_bad_cloud_exit_2(cli) -> None:
    assert cli("render", T4, "--cloud", "ibm").code == 2


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_render_for_a_cloud_the_profile_leaves_out_warns(cli, write_yaml, tmp_path, json_out) -> None:
    p = write_yaml("name: x\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\nplacement: {clouds: [gcp]}\n")
    r = cli("render", str(p), "--cloud", "aws", "--out", str(tmp_path / "aws"), *(["--json"] if json_out else []))
    assert r.code == 0, r.err  # render is for review: it still renders
    said = f"{p}:4: placement.clouds is [gcp]: `plan` and `up` leave aws out for this profile"
    assert said in r.err
    if json_out:
        assert any(w.startswith(said) for w in r.json()["warnings"])
    ok = cli("render", str(p), "--cloud", "gcp", "--out", str(tmp_path / "gcp"))
    assert ok.code == 0 and "placement.clouds" not in ok.err  # the other side: a cloud the profile names
