"""GPU probe: recorded nvidia-smi outputs (CSV and XML) and a fake pynvml module."""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.probe.gpu import (
    CommandResult,
    GpuInfo,
    canonical_gpu_name,
    cloud_gpus,
    gpu_spec,
    is_consumer,
    nominal_memory_gib,
    parse_smi_csv,
    parse_smi_xml,
    probe_gpus,
    probe_nvml,
    probe_smi,
    version_from_int,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class SmiRunner:
    """Answers nvidia-smi calls from recorded outputs; records the calls."""

    def __init__(self, csv: tuple[int, str], xml: tuple[int, str] | None = None,
                 csv_no_cc: tuple[int, str] | None = None) -> None:
        self.answers = {"csv": csv, "xml": xml or (0, ""), "csv_no_cc": csv_no_cc or (2, "")}
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> CommandResult:
        self.calls.append(list(argv))
        if argv[0] != "nvidia-smi":
            return CommandResult(127, "", "not found")
        if "-x" in argv:
            key = "xml"
        elif any(a.startswith("--query-gpu=") and "compute_cap" in a for a in argv):
            key = "csv"
        else:
            key = "csv_no_cc"
        rc, out = self.answers[key]
        return CommandResult(rc, out if rc == 0 else "", "" if rc == 0 else out)


def missing_smi(argv: Sequence[str]) -> CommandResult:
    return CommandResult(127, "", f"{argv[0]}: not found")


@pytest.fixture(autouse=True)
def no_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default pynvml is not importable (as on this machine); tests opt in with fake_nvml."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # type: ignore[arg-type]


# --- names ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("smi_name", "memory", "canonical"), [
    ("Tesla T4", 15360, "T4"),
    ("Tesla K80", 11441, "K80"),
    ("Tesla M60", 8129, "M60"),
    ("Tesla P4", 7611, "P4"),
    ("Tesla P100-PCIE-16GB", 16280, "P100"),
    ("Tesla V100-SXM2-16GB", 16384, "V100"),
    ("Tesla V100-SXM2-32GB", 32768, "V100-32GB"),
    ("Tesla V100S-PCIE-32GB", 32768, "V100-32GB"),
    ("NVIDIA A10", 23028, "A10"),
    ("NVIDIA A10G", 23028, "A10G"),
    ("NVIDIA L4", 23034, "L4"),
    ("NVIDIA L40S", 46068, "L40S"),
    ("NVIDIA A100-SXM4-40GB", 40960, "A100"),
    ("A100-SXM4-40GB", 40960, "A100"),
    ("NVIDIA A100-PCIE-40GB", 40960, "A100"),
    ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
    ("NVIDIA A100 80GB PCIe", 81920, "A100-80GB"),
    ("NVIDIA H100 80GB HBM3", 81559, "H100"),
    ("NVIDIA H100 PCIe", 81559, "H100"),
    ("NVIDIA H100 NVL", 95830, "H100"),
    ("NVIDIA H200", 143771, "H200"),
    ("NVIDIA B200", 183359, "B200"),
    ("NVIDIA GeForce RTX 4090", 24564, "RTX 4090"),
    ("NVIDIA GeForce RTX 3090 Ti", 24564, "RTX 3090 Ti"),
    ("NVIDIA RTX 6000 Ada Generation", 49140, "RTX 6000 Ada"),
    ("NVIDIA RTX A6000", 49140, "RTX A6000"),
    ("NVIDIA GeForce GT 1030", 2048, "GeForce GT 1030"),
])
def test_canonical_names(smi_name: str, memory: int, canonical: str) -> None:
    assert canonical_gpu_name(smi_name, memory) == canonical


def test_a100_without_size_in_name_uses_memory() -> None:
    assert canonical_gpu_name("NVIDIA A100-SXM4", 81920) == "A100-80GB"
    assert canonical_gpu_name("NVIDIA A100-SXM4", 40960) == "A100"


@given(st.sampled_from(sorted(cloud_gpus())))
def test_canonical_name_is_a_fixed_point(name: str) -> None:
    spec = cloud_gpus()[name]
    assert canonical_gpu_name(name, int(spec.vram_gib * 1024)) == name


def test_consumer_detection() -> None:
    assert is_consumer("NVIDIA GeForce RTX 4090")
    assert is_consumer("NVIDIA GeForce GT 1030")
    assert not is_consumer("Tesla T4")
    assert not is_consumer("NVIDIA RTX 6000 Ada Generation")


def test_cloud_table_matches_compat_facts() -> None:
    table = {n: (s.compute_capability, s.vram_gib) for n, s in cloud_gpus().items()}
    assert table["T4"] == ("7.5", 16)
    assert table["L4"] == ("8.9", 24)
    assert table["A100-80GB"] == ("8.0", 80)
    assert table["B200"] == ("10.0", 180)
    assert len(table) == 16


def test_cloud_table_agrees_with_the_compat_facts() -> None:
    """cloud_gpus() is the module's own table until the compat engine is its source; keep them equal."""
    facts_mod = pytest.importorskip("provisioner.compat.facts")
    facts = facts_mod.load_facts()
    nvidia = {n: g for n, g in facts.gpus.items() if g.cloud and g.vendor == "nvidia"}
    assert set(nvidia) == set(cloud_gpus())
    for name, spec in cloud_gpus().items():
        assert (spec.compute_capability, float(spec.vram_gib)) == (nvidia[name].cc_str, nvidia[name].memory_gib)


def test_nominal_memory() -> None:
    assert nominal_memory_gib("Tesla T4", 15360) == 16
    assert nominal_memory_gib("NVIDIA GeForce RTX 4090", 24564) == 24
    assert nominal_memory_gib("NVIDIA Mystery GPU", 12000) == 11
    assert gpu_spec("NVIDIA GeForce RTX 4090") is not None


@pytest.mark.parametrize(("value", "text"), [(12040, "12.4"), (11080, "11.8"), (13000, "13.0"), (12090, "12.9")])
def test_version_from_int(value: int, text: str) -> None:
    assert version_from_int(value) == text


# --- CSV / XML parsing --------------------------------------------------------------------------

def test_csv_t4() -> None:
    gpus, driver = parse_smi_csv(fixture("smi-t4.csv"))
    assert gpus == [GpuInfo("Tesla T4", 15360, "7.5")]
    assert driver == "550.90.07"


def test_csv_with_header_and_units() -> None:
    assert parse_smi_csv(fixture("smi-t4-header-units.csv")) == parse_smi_csv(fixture("smi-t4.csv"))


def test_csv_a100x8() -> None:
    gpus, driver = parse_smi_csv(fixture("smi-a100x8.csv"))
    assert len(gpus) == 8 and driver == "535.183.01"
    assert {g.compute_capability for g in gpus} == {"8.0"}
    assert {g.memory_mib for g in gpus} == {40960}


def test_csv_h100x8() -> None:
    gpus, _ = parse_smi_csv(fixture("smi-h100x8.csv"))
    assert len(gpus) == 8 and gpus[0] == GpuInfo("NVIDIA H100 80GB HBM3", 81559, "9.0")


def test_csv_rtx4090() -> None:
    gpus, driver = parse_smi_csv(fixture("smi-rtx4090.csv"))
    assert gpus == [GpuInfo("NVIDIA GeForce RTX 4090", 24564, "8.9")] and driver == "550.127.05"


@pytest.mark.parametrize(("name", "count", "driver", "cuda", "memory"), [
    ("smi-t4.xml", 1, "550.90.07", "12.4", 15360),
    ("smi-h100x2.xml", 2, "535.129.03", "12.2", 81559),
    ("smi-rtx4090.xml", 1, "550.127.05", "12.4", 24564),
])
def test_xml(name: str, count: int, driver: str, cuda: str, memory: int) -> None:
    gpus, got_driver, got_cuda = parse_smi_xml(fixture(name))
    assert (len(gpus), got_driver, got_cuda) == (count, driver, cuda)
    assert gpus[0].memory_mib == memory
    assert gpus[0].compute_capability == gpu_spec(gpus[0].name, memory).compute_capability  # type: ignore[union-attr]


# --- probe_smi ------------------------------------------------------------------------------------

def test_probe_smi_t4_reads_cuda_from_xml() -> None:
    runner = SmiRunner((0, fixture("smi-t4.csv")), (0, fixture("smi-t4.xml")))
    result = probe_smi(runner)
    assert result.source == "nvidia-smi"
    assert result.gpus == (GpuInfo("Tesla T4", 15360, "7.5"),)
    assert (result.driver, result.cuda_driver_max) == ("550.90.07", "12.4")
    assert runner.calls[0] == ["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap,pci.bus_id",
                               "--format=csv,noheader,nounits"]


def test_probe_smi_old_driver_without_compute_cap_field() -> None:
    runner = SmiRunner((2, fixture("smi-old-driver-compute-cap.txt")), None, (0, fixture("smi-k80-no-cc.csv")))
    result = probe_smi(runner)
    assert result.gpus == (GpuInfo("Tesla K80", 11441, "3.7"),)
    assert result.driver == "470.256.02"


def test_probe_smi_csv_fails_xml_still_answers() -> None:
    runner = SmiRunner((15, "Unknown Error"), (0, fixture("smi-h100x2.xml")))
    result = probe_smi(runner)
    assert len(result.gpus) == 2 and result.cuda_driver_max == "12.2"
    assert any("rc 15" in n for n in result.notes)


@pytest.mark.parametrize(("rc", "name"), [(9, "smi-no-driver.txt"), (6, "smi-no-devices.txt")])
def test_probe_smi_no_driver_or_no_device_is_empty(rc: int, name: str) -> None:
    result = probe_smi(SmiRunner((rc, fixture(name)), (rc, fixture(name))))
    assert result.gpus == () and result.driver is None and result.source is None
    assert result.notes and f"rc {rc}" in result.notes[0]


def test_probe_without_nvml_or_smi_is_empty() -> None:
    result = probe_gpus(missing_smi)
    assert result.gpus == () and result.driver is None
    assert result.notes == ("nvidia-smi not found",)


def test_probe_smi_garbage_does_not_raise() -> None:
    result = probe_smi(SmiRunner((0, "Tesla T4, lots, 1, 7.5, x\n"), (0, "<not xml")))
    assert result.gpus == ()
    assert any("unreadable" in n for n in result.notes)


# --- NVML ------------------------------------------------------------------------------------------

class NVMLError(Exception):
    pass


def fake_nvml(gpus: list[tuple[str | bytes, int, tuple[int, int]]], driver: str | bytes = "550.127.05",
              cuda: int = 12040, init_error: str | None = None) -> types.ModuleType:
    mod = types.ModuleType("pynvml")
    state = {"shutdown": False}

    def nvmlInit() -> None:  # noqa: N802 - pynvml's names
        if init_error:
            raise NVMLError(init_error)

    def nvmlShutdown() -> None:  # noqa: N802
        state["shutdown"] = True

    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    mod.nvmlInit = nvmlInit  # type: ignore[attr-defined]
    mod.nvmlShutdown = nvmlShutdown  # type: ignore[attr-defined]
    mod.nvmlSystemGetDriverVersion = lambda: driver  # type: ignore[attr-defined]
    mod.nvmlSystemGetCudaDriverVersion = lambda: cuda  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: len(gpus)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda h: gpus[h][0]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=gpus[h][1] * 1024 * 1024, free=0, used=0)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCudaComputeCapability = lambda h: gpus[h][2]  # type: ignore[attr-defined]
    mod.state = state  # type: ignore[attr-defined]
    return mod


def test_nvml_a100x8(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_nvml([("NVIDIA A100-SXM4-80GB", 81920, (8, 0))] * 8, driver="535.183.01", cuda=12020)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    result = probe_gpus(missing_smi)
    assert result.source == "nvml" and len(result.gpus) == 8
    assert result.gpus[0] == GpuInfo("NVIDIA A100-SXM4-80GB", 81920, "8.0")
    assert (result.driver, result.cuda_driver_max) == ("535.183.01", "12.2")
    assert mod.state["shutdown"]  # type: ignore[attr-defined]


def test_nvml_old_bindings_return_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([(b"Tesla T4", 15360, (7, 5))], driver=b"470.256.02"))
    result = probe_nvml()
    assert result is not None and result.gpus[0].name == "Tesla T4" and result.driver == "470.256.02"


def test_nvml_init_failure_falls_back_to_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], init_error="Driver Not Loaded"))
    result = probe_gpus(SmiRunner((0, fixture("smi-rtx4090.csv")), (0, fixture("smi-rtx4090.xml"))))
    assert result.source == "nvidia-smi" and result.gpus[0].name == "NVIDIA GeForce RTX 4090"
    assert any("Driver Not Loaded" in n for n in result.notes)


def test_nvml_missing_module_is_none() -> None:
    assert probe_nvml() is None


def test_nvml_query_error_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_nvml([("Tesla T4", 15360, (7, 5))])

    def boom(_: int) -> str:
        raise NVMLError("GPU is lost")

    mod.nvmlDeviceGetName = boom  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    result = probe_gpus(missing_smi)
    assert result.gpus == ()
    assert any("GPU is lost" in n for n in result.notes)
