"""stack.container in profiles: schema, validate/plan messages, and the facts read from a real registry."""

from __future__ import annotations

import json

import pytest

from tests.container.registry_server import NGC_ENV, push_image

DIGEST = "sha256:" + "b" * 64


def container_profile(image: str, driver: str = "560.35.03", **extra):
    doc = {"name": "ngc", "stack": {"os": "ubuntu-22.04", "driver": driver, "container": {"image": image}}}
    doc.update(extra)
    return doc


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)


def test_exactly_one_of_python_and_container(cli, write_yaml):
    both = container_profile(f"nvcr.io/nvidia/pytorch:24.08-py3@{DIGEST}")
    both["stack"]["python"] = "3.11.9"
    r = cli("validate", str(write_yaml(both)), "--json")
    err = r.json()["results"][0]["errors"][0]
    assert r.code == 1 and err["path"] == "stack.container" and "exactly one" in err["message"] and err["line"]
    neither = {"name": "n", "stack": {"os": "ubuntu-22.04", "driver": "560.35.03"}}
    r = cli("validate", str(write_yaml(neither)), "--json")
    assert r.code == 1 and "set stack.python" in r.json()["results"][0]["errors"][0]["message"]
    packages = container_profile(f"nvcr.io/nvidia/pytorch:24.08-py3@{DIGEST}")
    packages["stack"]["packages"] = ["numpy==2.0.0"]
    r = cli("validate", str(write_yaml(packages)), "--json")
    assert r.code == 1 and "stack.packages cannot be combined" in r.json()["results"][0]["errors"][0]["message"]


@pytest.mark.parametrize("image,why", [
    ("nvcr.io/nvidia/PyTorch:24.08", "not a repository name"),
    ("nvcr.io/nvidia/pytorch@sha256:abc", "not a sha256 digest"),
    ("nvcr.io/nvidia/pytorch", "neither a tag nor a digest"),
    ("nvcr.io/nvidia/pytorch:24.08\n", "not an image reference"),
])
def test_bad_image_references(cli, write_yaml, image, why):
    r = cli("validate", str(write_yaml(container_profile(image))), "--json")
    errs = r.json()["results"][0]["errors"]
    assert r.code == 1 and errs[0]["path"] == "stack.container.image" and why in errs[0]["message"]


def test_tag_without_digest_is_a_warning_at_validate(cli, write_yaml):
    r = cli("validate", str(write_yaml(container_profile("nvcr.io/nvidia/pytorch:24.08-py3"))), "--json")
    res = r.json()["results"][0]
    assert r.code == 0 and res["valid"]
    assert any("tag without a digest" in w["message"] and "`up` refuses it" in w["message"] for w in res["warnings"])


def test_existing_profiles_keep_their_hash(cli):
    from tests.helpers import EXAMPLES

    r = cli("validate", str(EXAMPLES[0]), "--json")
    golden = json.loads((EXAMPLES[0].parents[2] / "tests/cli/golden" / f"plan-{EXAMPLES[0].stem}.json").read_text())
    assert r.json()["results"][0]["hash"] == golden["hash"]


def test_validate_resolve_image_reads_the_registry(cli, write_yaml, registry, monkeypatch):
    pushed = push_image(registry, "nvidia/pytorch", "24.08-py3", NGC_ENV, seed="profile")
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", registry.host)
    ref = f"{registry.host}/nvidia/pytorch:24.08-py3"
    # tag only: resolution is reported as a warning naming the digest to pin
    r = cli("validate", str(write_yaml(container_profile(ref))), "--json", "--resolve-image")
    warnings = [w["message"] for w in r.json()["results"][0]["warnings"]]
    assert r.code == 0 and any(f"pin {ref}@{pushed.digest}" in w for w in warnings), warnings
    assert any("pulling it takes about" in w for w in warnings)
    # pinned, forward compatibility on a data-center GPU (R535 < 560 for CUDA 12.6) is a warning ...
    pinned = f"{ref}@{pushed.digest}"
    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES")
    r = cli("validate", str(write_yaml(container_profile(pinned, driver="535.216.03", hardware={"gpu": "A100"}))), "--json")
    res = r.json()["results"][0]
    assert r.code == 0, res  # facts come from the digest-keyed store now: offline
    assert any("forward-compatibility mode" in w["message"] for w in res["warnings"])
    # ... an old branch is an error, located at the image line
    r = cli("validate", str(write_yaml(container_profile(pinned, driver="530.30.02", hardware={"gpu": "A100"}))), "--json")
    err = r.json()["results"][0]["errors"]
    assert r.code == 1 and "R530 is not a forward-compatible branch" in err[0]["message"] and err[0]["line"]
    # a boot disk too small for the image
    small = container_profile(pinned, hardware={"gpu": "A100", "boot_disk": {"size_gib": 30}})
    pushed_big = push_image(registry, "nvidia/big", "1", {**NGC_ENV}, seed="big")
    small["stack"]["container"]["image"] = f"{registry.host}/nvidia/big:1@{pushed_big.digest}"
    from provisioner.container import store

    big = store.ImageFacts.model_validate({**_facts_record(registry, pushed_big), "compressed_size": 12 * 10**9})
    store.record(big)
    r = cli("validate", str(write_yaml(small)), "--json")
    errs = r.json()["results"][0]["errors"]
    assert r.code == 1 and errs[0]["path"] == "hardware.boot_disk.size_gib" and "too small for the image" in errs[0]["message"]


def _facts_record(registry, pushed):
    from provisioner.container.registry import RegistryClient

    return RegistryClient(scheme="http").resolve(f"{registry.host}/nvidia/big:1@{pushed.digest}").to_record()


def test_plan_skips_gpus_the_image_has_no_code_for(cli, write_yaml, registry, monkeypatch):
    env = {**NGC_ENV, "TORCH_CUDA_ARCH_LIST": "8.0 8.6 9.0"}  # no 7.5: T4 is out
    pushed = push_image(registry, "team/ampere", "v1", env, seed="ampere")
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", registry.host)
    doc = container_profile(f"{registry.host}/team/ampere:v1@{pushed.digest}", hardware={"gpu": ["T4", "L4"]})
    r = cli("plan", str(write_yaml(doc)), "--json", "--resolve-image")
    assert r.code == 0, r.err
    plan = r.json()
    assert plan["chosen"]["gpu_name"] == "L4"
    assert all(o["gpu_name"] != "T4" for o in plan["alternatives"])


def test_up_refuses_a_tag_without_digest_before_anything_else(cli, write_yaml, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent")  # nothing may get as far as a cloud
    path = write_yaml(container_profile("nvcr.io/nvidia/pytorch:24.08-py3"))
    r = cli("up", str(path), "--yes")
    assert r.code == 1, r.err
    lines = path.read_text().splitlines()
    line = next(i for i, ln in enumerate(lines, 1) if "image:" in ln)
    assert f"{path}:{line}: stack.container.image:" in r.err and "`up` runs only images pinned" in r.err


def test_lock_resolves_the_tag_and_records_the_facts(cli, write_yaml, registry, monkeypatch):
    pushed = push_image(registry, "team/locked", "v3", NGC_ENV, seed="lock")
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", registry.host)
    ref = f"{registry.host}/team/locked:v3"
    r = cli("lock", str(write_yaml(container_profile(ref))), "--json")
    doc = r.json()
    assert r.code == 1 and doc["resolved"] == f"{ref}@{pushed.digest}" and not doc["pinned"]
    assert doc["facts"]["env"]["CUDA_VERSION"] == "12.6.0.022"
    path = write_yaml(container_profile(f"{ref}@{pushed.digest}"), name="pinned.yaml")
    r = cli("lock", str(path))
    assert r.code == 0, r.err
    assert "CUDA 12.6.0.022, cuDNN 9.3.0.75, NCCL 2.22.3, torch 2.5.0a0+872d972" in r.out
    from provisioner.lock.model import read_lock  # the pinned image's facts are NAME.lock

    lock = read_lock(path.with_suffix(".lock"))
    assert lock.container["digest"] == pushed.digest and lock.container["env"]["CUDA_VERSION"] == "12.6.0.022"
    assert lock.packages == () and lock.driver.version == "560.35.03"
    assert cli("lock", str(path), "--check").code == 0
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    script = render_script(load_profile(path), RenderTarget("gcp", "a2-highgpu-1g", "A100-40GB", 1, "us-central1", "us-central1-a")).startup_sh
    assert "TV_LOCK=" not in script.replace("TV_LOCK=''", "").replace("TV_LOCK_", "") and pushed.digest in script  # no Python closure: the image is pinned by digest
    other = push_image(registry, "team/locked", "v4", NGC_ENV, seed="lock-v4")
    write_yaml(container_profile(f"{ref}@{other.digest}"), name="pinned.yaml")  # another image: the lock is stale
    assert cli("lock", str(path), "--check").code == 1
