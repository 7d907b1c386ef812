"""parity: verdicts, tolerance and cause rules on synthetic results, including the issue's seed cases."""

from __future__ import annotations

import json

import pytest

from provisioner.verify.parity import Verdict, compare, judge, tolerance
from provisioner.verify.perfdoc import validate_doc
from tests.perf.docs import doc, gpu, m


def by_metric(verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.metric: v for v in verdicts}


def test_tolerance_is_class_floor_or_three_cv() -> None:
    assert tolerance("gpu_compute", 0.001, 0.002) == pytest.approx(0.07)
    assert tolerance("gpu_compute", 0.05, 0.01) == pytest.approx(0.15)
    assert tolerance("disk", 0.0, 0.0) == pytest.approx(0.20)


@pytest.mark.parametrize(("a", "b", "tol", "expected"), [
    (100, 95, 0.07, "match"), (100, 92, 0.07, "worse"), (100, 108, 0.07, "better"), (100, 100, 0.0, "match")])
def test_judge(a: float, b: float, tol: float, expected: str) -> None:
    assert judge(a, b, tol)[0] == expected


def test_lower_is_better_flips() -> None:
    assert judge(10, 20, 0.1, higher_is_better=False)[0] == "worse"


def test_noisy_metric_is_not_called_worse() -> None:
    a = doc(disk_data_seq_read_mbs=m(1000, "disk", cv=0.02))
    b = doc(disk_data_seq_read_mbs=m(700, "disk", cv=0.15))  # 30% lower but 3 x cv = 45%
    v = by_metric(compare(a, b))["disk_data_seq_read_mbs"]
    assert v.verdict == "match" and v.tolerance == pytest.approx(0.45)


def test_seed_nfs_loader_three_times_slower_with_no_workers() -> None:
    a = doc(loader_data_w0_items_s=m(900, "loader", workers=0), loader_data_wN_items_s=m(5000, "loader", workers=16))
    b = doc(loader_data_w0_items_s=m(300, "loader", workers=0), loader_data_wN_items_s=m(4900, "loader", workers=16),
            host={"data_fs": {"path": "/mnt/data", "fstype": "nfs4", "mount_point": "/mnt/data", "network": True}})
    v = by_metric(compare(a, b))
    w0 = v["loader_data_w0_items_s"]
    assert w0.verdict == "worse" and w0.ratio == pytest.approx(1 / 3)
    causes = " | ".join(c.cause for c in w0.causes)
    fixes = " | ".join(c.fix or "" for c in w0.causes)
    assert "network file system (nfs4" in causes and "num_workers=0" in causes
    assert "local_nvme_gib" in fixes and "num_workers=N" in fixes
    assert v["loader_data_wN_items_s"].verdict == "match"


def test_seed_omp_threads_one_vs_sixteen() -> None:
    a = doc(blas_default_gflops=m(400, "blas"), host={"thread_env": {"OMP_NUM_THREADS": "16"}})
    b = doc(blas_default_gflops=m(40, "blas"), host={"thread_env": {"OMP_NUM_THREADS": "1"}})
    (v,) = compare(a, b)
    assert v.verdict == "worse"
    assert any("OMP_NUM_THREADS=1" in c.cause for c in v.causes)
    assert any('stack.env: {OMP_NUM_THREADS: "16"}' in (c.fix or "") for c in v.causes)


def test_omp_threads_set_only_on_b_uses_usable_cpus() -> None:
    a = doc(blas_default_gflops=m(400, "blas"))
    b = doc(blas_default_gflops=m(40, "blas"), host={"thread_env": {"OMP_NUM_THREADS": "1"}, "affinity": 8})
    (v,) = compare(a, b)
    assert any('OMP_NUM_THREADS: "8"' in (c.fix or "") for c in v.causes)


def test_seed_pcie_x8() -> None:
    a = doc(gpus=[gpu("NVIDIA L4")], h2d_pinned_gbs=m(25, "host_device"))
    b = doc(gpus=[gpu("NVIDIA L4", pcie_gen=4, pcie_gen_max=4, pcie_width=8, pcie_width_max=16)],
            h2d_pinned_gbs=m(12.5, "host_device"))
    (v,) = compare(a, b)
    assert v.verdict == "worse"
    assert any("PCIe link x8 (max x16" in c.cause for c in v.causes)


def test_seed_power_capped_gpu() -> None:
    a = doc(gpus=[gpu()], matmul_bf16_tflops=m(740, "gpu_compute"))
    b = doc(gpus=[gpu(power_limit_w=400.0, throttle_reasons=["sw_power_cap"], sm_clock_mhz=1290)],
            matmul_bf16_tflops=m(480, "gpu_compute"))
    (v,) = compare(a, b)
    assert v.verdict == "worse" and v.basis == "median"
    text = " | ".join(c.cause for c in v.causes)
    assert "power-capped" in text and "1290 MHz" in text


def test_gpu_causes_prefer_the_reading_under_load() -> None:
    a = doc(gpus=[gpu()], matmul_bf16_tflops=m(740, "gpu_compute"))
    b = doc(gpus=[gpu(sm_clock_mhz=345, throttle_reasons=["gpu_idle"])], matmul_bf16_tflops=m(600, "gpu_compute"))
    b["blocks"]["gpu_matmul"]["info"]["context_under_load"] = {"gpus": [gpu(throttle_reasons=["hw_thermal_slowdown"], temperature_c=91)]}
    (v,) = compare(a, b)
    assert "thermally throttled" in v.causes[0].cause and "91 C" in v.causes[0].cause


def test_different_gpu_models_compare_efficiency_and_state_expected_ratio() -> None:
    a = doc(gpus=[gpu("NVIDIA A100-SXM4-40GB", memory_mib=40960)], matmul_bf16_tflops=m(250, "gpu_compute"))
    b = doc(gpus=[gpu("NVIDIA H100 80GB HBM3")], matmul_bf16_tflops=m(790, "gpu_compute"))
    (v,) = compare(a, b)
    assert v.basis == "efficiency" and v.verdict == "match"  # 80% of 312 vs 80% of 989.5
    assert "expected B/A ratio from the spec 3.17" in (v.note or "")
    b2 = doc(gpus=[gpu("NVIDIA H100 80GB HBM3")], matmul_bf16_tflops=m(400, "gpu_compute"))
    assert compare(a, b2)[0].verdict == "worse"  # faster than the A100, yet only 40% of its spec


def test_different_models_without_spec_are_not_comparable() -> None:
    a = doc(gpus=[gpu("NVIDIA A10G")], matmul_bf16_tflops=m(60, "gpu_compute"))
    b = doc(gpus=[gpu("NVIDIA L4")], matmul_bf16_tflops=m(90, "gpu_compute"))
    (v,) = compare(a, b)
    assert v.verdict == "not-comparable" and "A10G" in (v.note or "")


def test_missing_metric_is_reported_not_worse() -> None:
    a = doc(cpu_single_units_s=m(100, "cpu"), disk_data_seq_read_mbs=m(1000, "disk"))
    b = doc(cpu_single_units_s=m(100, "cpu"))
    v = by_metric(compare(a, b))
    assert v["disk_data_seq_read_mbs"].verdict == "missing"
    assert v["cpu_single_units_s"].verdict == "match"


def test_cpu_quota_and_fewer_vcpus_are_causes() -> None:
    a = doc(cpu_all_units_s=m(1600, "cpu"))
    b = doc(cpu_all_units_s=m(400, "cpu"), host={"cpu_count": 16, "affinity": 16, "cgroup_cpu_quota": 4.0})
    (v,) = compare(a, b)
    text = " | ".join(c.cause for c in v.causes)
    assert "cgroup CPU quota of 4.0" in text and "4 usable CPUs here, 16 on the reference" in text
    assert any("hardware.min_vcpus: 16" in (c.fix or "") for c in v.causes)


def test_blas_vendor_difference() -> None:
    mkl = [{"user_api": "blas", "internal_api": "mkl", "num_threads": 16}]
    obl = [{"user_api": "blas", "internal_api": "openblas", "num_threads": 16}]
    (v,) = compare(doc(blas_all_gflops=m(900, "blas"), blas=mkl), doc(blas_all_gflops=m(500, "blas"), blas=obl))
    assert any("BLAS is openblas here, mkl on the reference" == c.cause for c in v.causes)


def test_worse_without_a_known_cause_says_so() -> None:
    (v,) = compare(doc(cpu_single_units_s=m(100, "cpu")), doc(cpu_single_units_s=m(50, "cpu")))
    assert v.verdict == "worse" and v.causes[0].fix is None and "no cause found" in v.causes[0].cause


def test_synthetic_docs_are_valid_documents() -> None:
    validate_doc(doc(gpus=[gpu()], matmul_bf16_tflops=m(740, "gpu_compute")), "synthetic")


def test_parity_cli_exit_codes_and_json(cli, tmp_path) -> None:
    a = doc(loader_data_w0_items_s=m(900, "loader", workers=0))
    b = doc(loader_data_w0_items_s=m(300, "loader", workers=0),
            host={"data_fs": {"path": "/mnt/data", "fstype": "nfs", "mount_point": "/mnt/data", "network": True}})
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    r = cli("parity", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json")
    assert r.code == 1, r.err
    out = r.json()
    assert out["worse"] is True and out["metrics"][0]["verdict"] == "worse"
    r = cli("parity", str(tmp_path / "a.json"), str(tmp_path / "a.json"))
    assert r.code == 0 and "no metric is worse" in r.out
    r = cli("parity", str(tmp_path / "a.json"), str(tmp_path / "missing.json"))
    assert r.code == 2 and "no such file" in r.err


def test_parity_rejects_a_non_perf_document(cli, tmp_path) -> None:
    (tmp_path / "r.json").write_text(json.dumps({"schema": 1, "gpus": []}))
    r = cli("parity", str(tmp_path / "r.json"), str(tmp_path / "r.json"))
    assert r.code == 2 and "trainvm.perf/1" in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_a_noisy_run_never_makes_a_machine_100x_slower_a_match(higher_is_better: bool) -> None:
    """On a loaded machine a run's cv of 0.4 makes the tolerance 1.2 (3 x cv): a band of +-tol on b/a - 1 could then
    never say "worse" of a higher-is-better metric (b/a - 1 >= -1), and `verify --local --perf` against a baseline
    100x faster said "match" on the CI machine. The band is a factor both ways."""
    tol = tolerance("cpu", 0.01, 0.4)
    assert tol == pytest.approx(1.2)
    slow, fast = (0.01, 100.0) if higher_is_better else (100.0, 0.01)
    assert judge(1.0, slow, tol, higher_is_better)[0] == "worse"
    assert judge(1.0, fast, tol, higher_is_better)[0] == "better"
    assert judge(1.0, 1.5 if higher_is_better else 1 / 1.5, tol, higher_is_better)[0] == "match"  # inside 2.2x
