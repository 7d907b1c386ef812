"""Issue 36 item 22: the expected time to ready is derived from what the profile installs (driver, CUDA toolkit,
the lock's wheel bytes, data to stage, a container pull, baked or not), each term with its basis, and "unknown" /
"at least" where a term cannot be known -- not one hard-coded number per cloud."""

from __future__ import annotations

import json
from pathlib import Path

from provisioner.bake import ready_time as R
from provisioner.profile import load_profile
from tests.helpers import REPO

EXAMPLES = REPO / "profiles" / "examples"
DIGEST = "sha256:" + "a" * 64


def _write(tmp_path: Path, stack: str, data: str = "", lock: dict | None = None) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(f"name: p\nhardware: {{gpu: T4}}\nstack:\n{stack}{data}")
    if lock is not None:
        path.with_suffix(".lock").write_text(json.dumps(lock))
    return path


PY = '  os: ubuntu-22.04\n  driver: "550.127.05"\n  python: "3.11.9"\n  packages: ["numpy==2.0.0"]\n'


def test_a_t4_and_an_8xa100_with_a_toolkit_and_data_are_not_the_same_number(tmp_path) -> None:
    t4 = R.ready_json(load_profile(EXAMPLES / "tf-resnet50.yaml"), "gcp", baked=False)
    big = _write(tmp_path, PY + "  cuda: '12.4'\n  cuda_toolkit: true\n",
                 "data:\n  - {source: 'gs://team-bucket/d/', dest: /mnt/data/d, size_gib: 500}\n")
    a100 = R.ready_json(load_profile(big), "gcp", baked=False)
    phases = {t["phase"]: t for t in a100["terms"]}
    assert phases["cuda_toolkit"]["seconds"] is None and "not measured" in phases["cuda_toolkit"]["basis"]
    assert phases["data"]["seconds"] == round(500 * 2**30 / R.DOWNLOAD_BYTES_S, 1) and "assumed" in phases["data"]["basis"]
    assert a100["seconds"] > t4["seconds"] and a100["at_least"] and "cuda_toolkit" in a100["unknown"]
    line = R.ready_line(a100, "gcp")
    assert line.startswith("expected time to ready: at least") and "not known: driver_module, cuda_toolkit, packages" in line


def test_the_lock_gives_the_package_bytes(tmp_path) -> None:
    loaded = load_profile(EXAMPLES / "tf-resnet50.yaml")  # it has a lock with every wheel's size
    pkgs = next(t for t in R.terms(loaded, "gcp", baked=False) if t.phase == "packages")
    size = loaded.lock.total_size()
    assert size > 0 and pkgs.seconds == R.PACKAGES_S + size / R.DOWNLOAD_BYTES_S
    assert f"{len(loaded.lock.packages)} wheels from the lock" in pkgs.basis and "not measured" in pkgs.basis
    no_lock = next(t for t in R.terms(load_profile(EXAMPLES / "bert-finetune-t4.yaml"), "gcp", baked=False)
                   if t.phase == "packages")
    assert no_lock.seconds is None and "no lock file" in no_lock.basis


def test_baked_skips_the_install_but_not_the_data(tmp_path) -> None:
    path = _write(tmp_path, PY, "data:\n  - {source: 'gs://team-bucket/d/', dest: /mnt/data/d, size_gib: 10}\n")
    doc = R.ready_json(load_profile(path), "gcp", baked=True)
    assert [t["phase"] for t in doc["terms"]] == ["boot", "install", "data"] and doc["unknown"] == []
    assert doc["seconds"] == round(75 + R.VERIFIED_S + 10 * 2**30 / R.DOWNLOAD_BYTES_S)
    assert R.ready_line(doc, "gcp").startswith(f"expected time to ready: about {R.minutes(doc['seconds'])} from the baked image")


def test_a_container_pull_counts_its_compressed_layers_or_is_unknown(tmp_path) -> None:
    stack = f'  os: ubuntu-22.04\n  driver: "560.35.03"\n  container: {{image: "nvcr.io/nvidia/pytorch:24.08-py3@{DIGEST}"}}\n'
    terms = {t.phase: t for t in R.terms(load_profile(_write(tmp_path, stack)), "gcp", baked=False)}
    assert "python" not in terms and "packages" not in terms  # the image brings them
    assert terms["container"].seconds is None and "not known offline" in terms["container"].basis


def test_a_cloud_without_a_published_boot_figure_is_unknown() -> None:
    doc = R.ready_json(load_profile(EXAMPLES / "bert-finetune-t4.yaml"), "aws", baked=False)
    assert doc["seconds"] is None and "boot" in doc["unknown"]
    assert R.ready_line(doc, "aws") == ("expected time to ready: unknown on aws (cold install; no published create-to-ready "
                                        "figure for aws)")


def test_plan_explain_prints_each_terms_basis(cli) -> None:
    r = cli("plan", str(EXAMPLES / "tf-resnet50.yaml"), "--cloud", "gcp", "--explain")
    assert r.code == 0, r.err
    assert "time to ready, by phase:" in r.out and "  driver_module: unknown - the NVIDIA kernel module build" in r.out
    assert "  packages: " in r.out and "wheels from the lock" in r.out
