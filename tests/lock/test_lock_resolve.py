"""`trainvm lock` with real uv against the local index: the closure for the target, one hashed
wheel per package, the torch index restricted to the labelled pins, refusals named."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from provisioner.lock.model import read_lock


def _file_for(indexes, url: str) -> Path:
    part = unquote(urlparse(url).path).lstrip("/")
    return indexes.root / part


def test_lock_writes_the_closure_with_the_exact_wheel_hashes(write_yaml, lock_cli, indexes, profile_doc) -> None:
    path = write_yaml(profile_doc(["torch==2.4.1+cu124", "alpha==1.0", "multi==1.0"]))
    r = lock_cli(path)
    assert r.code == 0, r.err
    lock = read_lock(path.with_suffix(".lock"))
    assert lock.versions() == {"alpha": "1.0", "beta": "1.2", "multi": "1.0", "nvidia-cublas-cu12": "12.4.5.8", "torch": "2.4.1+cu124"}
    for p in lock.packages:
        data = _file_for(indexes, p.url).read_bytes()
        assert hashlib.sha256(data).hexdigest() == p.sha256, p.name
    by_name = {p.name: p for p in lock.packages}
    # torch (the labelled pin) from the CUDA index; everything else, even what that index mirrors, from PyPI
    assert by_name["torch"].url.startswith(indexes.torch.rsplit("/simple", 1)[0] + "/")
    assert "/torch/" not in by_name["beta"].url and "/torch/" not in by_name["nvidia-cublas-cu12"].url
    assert by_name["beta"].version != "9.9"
    # the target's best wheel, not this machine's and not the mac one
    assert by_name["multi"].filename == "multi-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    assert lock.target.python_platform == "x86_64-manylinux_2_35" and lock.target.python == "3.11.9"
    assert lock.images["gcp"]["family"] == "ubuntu-2204-lts" and lock.driver.version == "550.127.05"
    assert lock.uv_version and "wrote" in r.out and "5 packages" in r.out


def test_a_package_without_a_wheel_fails_lock_by_name(write_yaml, lock_cli, profile_doc) -> None:
    path = write_yaml(profile_doc(["promise==2.3"]))
    r = lock_cli(path)
    assert r.code == 1 and "promise==2.3 has no wheel for the target" in r.err
    assert not path.with_suffix(".lock").exists()


def test_a_transitive_sdist_only_dependency_is_named(write_yaml, lock_cli, profile_doc) -> None:
    r = lock_cli(write_yaml(profile_doc(["gamma==2.0"])))
    assert r.code == 1 and "delta==0.5 (required by gamma" in r.err, r.err


@pytest.mark.parametrize(("os_name", "ok"), [("ubuntu-22.04", False), ("debian-12", False), ("ubuntu-24.04", True)])
def test_the_os_images_glibc_decides_which_wheels_fit(write_yaml, lock_cli, os_name: str, ok: bool, profile_doc) -> None:
    path = write_yaml(profile_doc(["newglibc==1.0"], os=os_name))
    r = lock_cli(path)
    assert (r.code == 0) is ok, r.err
    if not ok:
        assert "newglibc==1.0 has no wheel" in r.err


def test_the_profiles_python_decides_which_wheels_fit(write_yaml, lock_cli, profile_doc) -> None:
    assert lock_cli(write_yaml(profile_doc(["only312==1.0"]))).code == 1
    assert lock_cli(write_yaml(profile_doc(["only312==1.0"], python="3.12.7"), name="p312.yaml")).code == 0


def test_check_fresh_stale_and_missing(write_yaml, lock_cli, cli, profile_doc) -> None:
    path = write_yaml(profile_doc(["alpha==1.0"]))
    assert cli("lock", str(path), "--check").code == 1  # no lock yet
    assert lock_cli(path).code == 0
    assert cli("lock", str(path), "--check").code == 0
    again = lock_cli(path)
    assert again.code == 0 and "up to date" in again.out
    write_yaml(profile_doc(["alpha==1.0", "multi==1.0"]))  # the profile changes
    r = cli("lock", str(path), "--check", "--json")
    assert r.code == 1 and r.json()["state"] == "stale"
    write_yaml(profile_doc(["alpha==1.0"], env={"PYTHONHASHSEED": "0"}))  # env does not change what is installed
    assert cli("lock", str(path), "--check").code == 0


def test_plan_warns_without_a_lock_and_refuses_a_stale_one(write_yaml, lock_cli, cli, profile_doc) -> None:
    path = write_yaml(profile_doc(["alpha==1.0"]))
    r = cli("plan", str(path), "--json")
    assert r.code == 0 and any("no lock file p.lock" in w for w in r.json()["warnings"])
    assert lock_cli(path).code == 0
    r = cli("plan", str(path), "--json")
    assert r.code == 0 and not any("no lock file" in w for w in r.json()["warnings"])
    write_yaml(profile_doc(["alpha==1.0"], python="3.11.10"))
    r = cli("plan", str(path))
    assert r.code == 1 and "p.lock is stale" in r.err and "trainvm lock" in r.err


def test_the_profile_hash_covers_the_lock(write_yaml, lock_cli, profile_doc) -> None:
    from provisioner.profile import load_profile

    path = write_yaml(profile_doc(["alpha==1.0"]))
    before = load_profile(path).hash
    assert lock_cli(path).code == 0
    locked = load_profile(path)
    assert locked.hash != before and locked.lock_state == "fresh"
    doc = json.loads(path.with_suffix(".lock").read_text())
    doc["packages"][0]["sha256"] = "0" * 64
    path.with_suffix(".lock").write_text(json.dumps(doc))
    assert load_profile(path).hash != locked.hash


def test_a_malformed_or_future_lock_is_an_input_error(write_yaml, cli, profile_doc) -> None:
    path = write_yaml(profile_doc(["alpha==1.0"]))
    path.with_suffix(".lock").write_text('{"lock_version": 2}')
    r = cli("validate", str(path))
    assert r.code == 2 and "lock_version 2 is not supported" in r.err
    path.with_suffix(".lock").write_text("not json")
    assert cli("validate", str(path)).code == 2


def test_upgrade_prints_package_changes(write_yaml, lock_cli, indexes, profile_doc) -> None:
    path = write_yaml(profile_doc(["alpha==1.0"]))
    assert lock_cli(path).code == 0
    doc = json.loads(path.with_suffix(".lock").read_text())
    beta = next(p for p in doc["packages"] if p["name"] == "beta")
    beta["version"] = "1.0"  # as if locked before beta 1.2 was released
    path.with_suffix(".lock").write_text(json.dumps(doc))
    r = lock_cli(path, "--upgrade")
    assert r.code == 0 and "beta: 1.0 -> 1.2" in r.out


def test_the_users_uv_settings_do_not_change_the_closure(write_yaml, lock_cli, profile_doc, monkeypatch) -> None:
    monkeypatch.setenv("UV_RESOLUTION", "lowest")
    monkeypatch.setenv("UV_CONSTRAINT", "/nonexistent/constraints.txt")
    path = write_yaml(profile_doc(["alpha==1.0"]))
    assert lock_cli(path).code == 0
    assert read_lock(path.with_suffix(".lock")).versions()["beta"] == "1.2"


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_an_unreachable_package_index_is_a_network_error_exit_3(write_yaml, cli, profile_doc, json_out) -> None:
    path = write_yaml(profile_doc(["alpha==1.0"]))
    dead = "http://127.0.0.1:9/simple"  # nothing listens on port 9
    r = cli("lock", str(path), "--index-url", dead, "--torch-index-url", dead, *(["--json"] if json_out else []))
    assert r.code == 3, r.err
    assert "cannot reach the package index" in r.err and "Connection refused" in r.err and "Traceback" not in r.err
    assert not path.with_suffix(".lock").exists()
    if json_out:
        assert r.json()["error"]["exit_code"] == 3
