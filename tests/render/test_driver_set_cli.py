"""`trainvm render` says which driver set the script installs: on debian-12 NVIDIA's compute-only (headless) set
(``nvidia-driver-cuda`` + the kernel modules' DKMS package, no X/GL desktop stack), exactly pinned and held;
Ubuntu keeps ``nvidia-open``/``cuda-drivers`` (desktop and compute). What apt installs for each set is proved
with real apt in tests/aptsim/test_driver_resolution.py."""

from __future__ import annotations

import pytest

from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


@pytest.fixture(autouse=True)
def _today(monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")


@pytest.mark.parametrize(("os_name", "gpu", "want_set", "packages"), [
    ("debian-12", "T4", "compute-only (headless)", ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"]),
    ("debian-12", "V100", "compute-only (headless)", ["nvidia-driver-cuda", "nvidia-kernel-dkms"]),
    ("ubuntu-22.04", "T4", "desktop and compute", ["nvidia-open"]),
])
def test_render_names_the_driver_set(cli, write_yaml, os_name, gpu, want_set, packages) -> None:
    p = write_yaml(f"extends: {T4}\nname: drv\nhardware: {{gpu: {gpu}, gpu_count: 1}}\nplacement: {{max_price_per_hour: 10}}\nstack: {{os: {os_name}}}\n")
    doc = cli("render", str(p), "--cloud", "gcp", "--json").json()
    assert doc["driver"]["set"] == want_set and doc["driver"]["packages"] == packages
    text = cli("render", str(p), "--cloud", "gcp")
    assert text.code == 0
    assert f"the {want_set} set, {' + '.join(packages)} (exact version, held)" in text.err
    assert f"TV_DRIVER_SET='{want_set}'" in text.out
    assert "TV_DRIVER_PKGS=(" + "".join(f" '{n}'" for n in packages) + " )" in text.out
