"""Container compatibility rules: the image's facts against the host driver and the GPU."""

from __future__ import annotations

import pytest

from provisioner.compat.container import driver_mode, gpu_problems
from provisioner.compat.facts import load_facts
from provisioner.container.image import ImageFacts

D = "sha256:" + "a" * 64


def image(cuda: str = "12.6.0.022", arch: str | None = "7.0 7.5 8.0 8.6 9.0+PTX", size: int = 9 * 10**9, **env: str) -> ImageFacts:
    e = {"CUDA_VERSION": cuda, **env}
    if arch is not None:
        e["TORCH_CUDA_ARCH_LIST"] = arch
    return ImageFacts(image=f"r.example/x:1@{D}", digest=D, manifest_digest=D, config_digest=D, os="linux",
                      architecture="amd64", compressed_size=size, env=e)


def gpu(name: str):
    return load_facts().gpus[name]


def errors(msgs):
    return [m for m in msgs if m.level == "error"]


def test_native_when_the_driver_meets_the_image_cuda_release():
    assert driver_mode("12.6", "560.35.03", gpu("A100")) == ("native", None)
    assert gpu_problems(image(), "560.35.03", gpu("A100")) == []


def test_forward_compatible_on_a_data_center_gpu_is_a_warning():
    mode, msg = driver_mode("12.6", "535.216.03", gpu("A100"))
    assert mode == "forward" and msg is not None and msg.level == "warning"
    assert "forward-compatibility" in msg.message and "NGC" in (msg.source or "")
    assert errors(gpu_problems(image(), "535.216.03", gpu("H100"))) == []


def test_refused_on_a_consumer_gpu():
    mode, msg = driver_mode("12.6", "535.216.03", gpu("RTX-4090"))
    assert mode == "refused" and msg is not None and msg.level == "error"
    assert "not a data-center GPU" in msg.message and "Compatibility" in (msg.source or "")
    # a new enough driver runs natively there too
    assert driver_mode("12.6", "560.35.03", gpu("RTX-4090"))[0] == "native"


@pytest.mark.parametrize("driver,why", [
    ("530.30.02", "R530 is not a forward-compatible branch"),
    ("555.42.06", "R555 is not a forward-compatible branch"),
    ("535.54.03", "older than 535.86, the first R535 driver"),
])
def test_refused_on_a_branch_that_release_does_not_allow(driver, why):
    mode, msg = driver_mode("12.6", driver, gpu("A100"))
    assert mode == "refused" and msg is not None and why in msg.message
    assert "compatibility mode is UNAVAILABLE" in msg.message


def test_arch_list_mismatch_and_ptx():
    t4 = errors(gpu_problems(image(arch="8.0 9.0"), "560.35.03", gpu("T4")))
    assert len(t4) == 1 and "TORCH_CUDA_ARCH_LIST (8.0 9.0) has no code for T4 (sm_75)" in t4[0].message
    # SASS for 8.0 runs on 8.6 (same major, newer minor); 9.0 SASS does not run on 8.9
    assert errors(gpu_problems(image(arch="8.0"), "560.35.03", gpu("A10"))) == []
    assert errors(gpu_problems(image(arch="9.0"), "560.35.03", gpu("L4")))
    # PTX JITs forward: 8.0+PTX covers a cc 9.0 GPU
    assert errors(gpu_problems(image(arch="7.0 8.0+PTX"), "560.35.03", gpu("H100"))) == []
    # no arch list: nothing to check
    assert errors(gpu_problems(image(arch=None), "560.35.03", gpu("T4"))) == []


def test_cuda13_image_compute_capability_floor():
    msgs = errors(gpu_problems(image(cuda="13.0.1", arch=None), "580.82.07", gpu("V100")))
    assert len(msgs) == 1 and "outside the range 7.5-12.1 of CUDA 13.0" in msgs[0].message
    assert "13.0 release notes" in (msgs[0].source or "")
    assert errors(gpu_problems(image(cuda="13.0.1", arch=None), "580.82.07", gpu("T4"))) == []


def test_unknown_image_cuda_is_a_warning_not_a_guess():
    mode, msg = driver_mode("12.7", "560.35.03", gpu("A100"))
    assert mode == "unknown" and msg is not None and msg.level == "warning"


def test_arch_list_parsing():
    assert image(arch="8.0;8.6 9.0a+PTX 10.0").arch_list == ((80, False), (86, False), (90, True), (100, False))
    assert image(cuda="12.4.1").cuda == "12.4"
