"""GPU blocks (1-3) and the NVML part of block 0 against hand-constructed recordings of pynvml and
torch.cuda outputs (tests/fixtures/perf: NOT real-GPU recordings; no GPU was available)."""

from __future__ import annotations

import pytest

from provisioner.perfprobe import gpu as gpublocks
from provisioner.perfprobe.context import decode_throttle, gpu_context
from provisioner.verify.parity import compare
from provisioner.verify.perfdoc import validate_doc
from provisioner.verify.perfspec import annotate
from tests.perf.fakes import FakeNvml, FakeTorch, load


def test_nvml_context_from_recording() -> None:
    ctx = gpu_context(FakeNvml(load("nvml_h100_power_capped.json")))
    assert ctx["status"] == "ok"
    (g,) = ctx["gpus"]
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["memory_mib"] == 81559
    assert g["throttle_reasons"] == ["sw_power_cap"]
    assert (g["power_limit_w"], g["power_default_limit_w"]) == (400.0, 700.0)
    assert (g["sm_clock_mhz"], g["sm_clock_max_mhz"]) == (1290, 1980)
    assert g["ecc"] is True and g["mig"] is False and g["persistence"] == 1


def test_nvml_not_supported_fields_are_none() -> None:
    (g,) = gpu_context(FakeNvml(load("nvml_l4_pcie_x8.json")))["gpus"]
    assert g["mig"] is None and (g["pcie_width"], g["pcie_width_max"]) == (8, 16)


def test_nvml_missing_library_is_a_skip() -> None:
    class Broken:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    ctx = gpu_context(Broken())
    assert ctx["status"] == "skipped" and "NVML Shared Library Not Found" in ctx["reason"]


def test_throttle_mask_decoding() -> None:
    assert decode_throttle(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]


def test_matmul_block_from_recorded_events() -> None:
    torch = FakeTorch(load("torch_events_h100.json"))
    blk = gpublocks.matmul_block(torch, budget_s=0.0)
    assert blk["status"] == "ok"
    ms = blk["metrics"]
    assert set(ms) == {"matmul_fp32_tflops", "matmul_tf32_tflops", "matmul_bf16_tflops", "matmul_fp16_tflops"}
    # 5 x 2 x 8192^3 flops in 7.45 ms
    assert ms["matmul_bf16_tflops"]["median"] == pytest.approx(5 * 2 * 8192**3 / 7.45e-3 / 1e12, rel=1e-4)
    assert ms["matmul_fp32_tflops"]["median"] < 60 < ms["matmul_tf32_tflops"]["median"]
    assert torch.backends.cuda.matmul.allow_tf32 is False  # restored after the tf32 run
    assert "randn tf32" in torch.calls


def test_matmul_block_skips_tf32_and_bf16_before_ampere() -> None:
    rec = load("torch_events_h100.json")
    rec.update(device_name="Tesla T4", capability=[7, 5], bf16_supported=False)
    blk = gpublocks.matmul_block(FakeTorch(rec), budget_s=0.0)
    assert set(blk["metrics"]) == {"matmul_fp32_tflops", "matmul_fp16_tflops"}
    assert blk["info"]["notes"] == {"tf32": "no TF32 on compute capability 7.5", "bf16": "bf16 not supported on this GPU"}


def test_memory_and_host_device_blocks() -> None:
    torch = FakeTorch(load("torch_events_h100.json"))
    mem = gpublocks.memory_block(torch, budget_s=0.0)
    assert mem["metrics"]["device_copy_gbs"]["median"] == pytest.approx(2 * 2**30 * 10 / 8.21e-3 / 1e9, rel=1e-4)
    hd = gpublocks.host_device_block(torch, budget_s=0.0)
    assert set(hd["metrics"]) == {"h2d_pinned_gbs", "d2h_pinned_gbs", "h2d_pageable_gbs", "d2h_pageable_gbs"}
    assert hd["metrics"]["h2d_pinned_gbs"]["median"] > 2 * hd["metrics"]["h2d_pageable_gbs"]["median"]


def test_gpu_blocks_skip_without_torch_or_gpu() -> None:
    assert gpublocks.matmul_block(None, 1.0) == {"status": "skipped", "reason": "torch not importable", "metrics": {}, "info": {}}
    torch = FakeTorch(load("torch_events_h100.json"))
    torch.cuda.is_available = lambda: False
    assert "is_available() is False" in gpublocks.memory_block(torch, 1.0)["reason"]
    torch = FakeTorch(load("torch_events_h100.json"))
    assert gpublocks.allreduce_block(torch, 1.0)["reason"] == "1 GPU: all-reduce needs several"


def test_bus_bandwidth_formula() -> None:
    # nccl-tests: busbw = algbw * 2(n-1)/n; 1 GB in 10 ms on 8 ranks -> 100 GB/s algbw -> 175 GB/s
    assert gpublocks.bus_bandwidth(10**9, 10.0, 8) == pytest.approx(175.0)


def test_recorded_document_annotates_efficiency_and_finds_the_power_cap() -> None:
    torch = FakeTorch(load("torch_events_h100.json"))
    blocks = {"gpu_matmul": gpublocks.matmul_block(torch, 0.0), "gpu_memory": gpublocks.memory_block(torch, 0.0)}
    base = {"schema": "trainvm.perf/1", "created": "x", "python": {}, "platform": "Linux", "budget_s": 1, "elapsed_s": 1,
            "context": {"host": {}, "gpu": gpu_context(FakeNvml(load("nvml_h100_power_capped.json")))}, "blocks": blocks}
    doc = validate_doc(annotate(base), "recorded")
    bf16 = doc["blocks"]["gpu_matmul"]["metrics"]["matmul_bf16_tflops"]
    assert bf16["efficiency"] == pytest.approx(738 / 989.5, rel=0.01)
    assert bf16["spec"]["variant"] == "H100 SXM5 80GB"
    healthy = {**base, "context": {"host": {}, "gpu": {"status": "ok", "gpus": [{**doc["context"]["gpu"]["gpus"][0],
               "throttle_reasons": [], "power_limit_w": 700.0, "sm_clock_mhz": 1980}]}}}
    slower = {**base, "blocks": {"gpu_matmul": {**blocks["gpu_matmul"], "metrics": {"matmul_bf16_tflops": {**bf16, "median": bf16["median"] * 0.6,
                                                                                                          "repeats": [bf16["median"] * 0.6]}}}}}
    (v,) = [v for v in compare(healthy, slower) if v.metric == "matmul_bf16_tflops"]
    assert v.verdict == "worse" and "power-capped" in v.causes[0].cause
