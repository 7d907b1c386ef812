"""Stand-ins built from the hand-constructed recordings in tests/fixtures/perf (NOT real-GPU
recordings; see that folder's README): a pynvml module and the slice of torch the GPU blocks use."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "perf"


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


class NVMLError(Exception):
    pass


class FakeNvml:
    """pynvml's calls that context.nvml_gpus makes, answering from a recording."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, recording: dict[str, Any]) -> None:
        self.rec = recording
        self.inited = False

    def _v(self, value: Any) -> Any:
        if value == "NotSupported":
            raise NVMLError("Not Supported")
        return value

    def nvmlInit(self) -> None:
        self.inited = True

    def nvmlShutdown(self) -> None:
        self.inited = False

    def nvmlDeviceGetCount(self) -> int:
        assert self.inited, "nvmlInit first"
        return len(self.rec["gpus"])

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict[str, Any]:
        return self.rec["gpus"][i]

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> bytes:
        return h["name"].encode()  # older nvidia-ml-py returns bytes

    def nvmlDeviceGetMemoryInfo(self, h: dict[str, Any]) -> Any:
        return SimpleNamespace(total=h["memory_total_bytes"])

    def nvmlDeviceGetClockInfo(self, h: dict[str, Any], kind: int) -> int:
        return self._v(h["clock"]["sm" if kind == 1 else "mem"])

    def nvmlDeviceGetMaxClockInfo(self, h: dict[str, Any], kind: int) -> int:
        return self._v(h["max_clock"]["sm" if kind == 1 else "mem"])

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: dict[str, Any]) -> int:
        return self._v(h["throttle_mask"])

    def nvmlDeviceGetEnforcedPowerLimit(self, h: dict[str, Any]) -> int:
        return self._v(h["enforced_power_limit_mw"])

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: dict[str, Any]) -> int:
        return self._v(h["default_power_limit_mw"])

    def nvmlDeviceGetTemperature(self, h: dict[str, Any], sensor: int) -> int:
        return self._v(h["temperature_c"])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: dict[str, Any]) -> int:
        return self._v(h["pcie_gen"])

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: dict[str, Any]) -> int:
        return self._v(h["pcie_gen_max"])

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: dict[str, Any]) -> int:
        return self._v(h["pcie_width"])

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: dict[str, Any]) -> int:
        return self._v(h["pcie_width_max"])

    def nvmlDeviceGetEccMode(self, h: dict[str, Any]) -> list[int]:
        return self._v(h["ecc"])

    def nvmlDeviceGetMigMode(self, h: dict[str, Any]) -> list[int]:
        return self._v(h["mig"])

    def nvmlDeviceGetPersistenceMode(self, h: dict[str, Any]) -> int:
        return self._v(h["persistence"])


class FakeTorch:
    """torch.cuda events replay the recorded milliseconds; tensors are inert placeholders.
    Which recording an event pair returns is chosen by the block's state (dtype / copy kind)."""

    float32, bfloat16, float16, uint8 = "float32", "bfloat16", "float16", "uint8"

    def __init__(self, recording: dict[str, Any]) -> None:
        rec = recording
        self.rec = rec
        self.queue: list[float] = []
        self.calls: list[str] = []
        self.backends = SimpleNamespace(cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False)),
                                        cudnn=SimpleNamespace(allow_tf32=True))
        fake = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                pass

            def record(self) -> None:
                pass

            def elapsed_time(self, other: Any) -> float:
                return fake.queue.pop(0)

        self.cuda = SimpleNamespace(
            is_available=lambda: True,
            get_device_capability=lambda i=0: tuple(rec["capability"]),
            get_device_name=lambda i=0: rec["device_name"],
            is_bf16_supported=lambda: rec["bf16_supported"],
            device_count=lambda: rec["device_count"],
            synchronize=lambda: None,
            empty_cache=lambda: None,
            Event=Event,
        )

    def load(self, key: str) -> None:
        self.queue = list(self.rec["elapsed_ms"][key])

    def randn(self, n: int, m: int, device: str, dtype: str) -> Any:
        dt = {"float32": "tf32" if self.backends.cuda.matmul.allow_tf32 else "fp32", "bfloat16": "bf16", "float16": "fp16"}[dtype]
        self.calls.append(f"randn {dt}")
        self.load(f"matmul_{dt}")
        return SimpleNamespace(dtype=dtype)

    def matmul(self, a: Any, b: Any) -> None:
        return None

    def empty(self, n: int, dtype: str, device: str = "cpu", pin_memory: bool = False) -> Any:
        kind = "pinned" if pin_memory else "pageable"

        class T:
            def copy_(self, other: Any, non_blocking: bool = False) -> None:
                pass

        t = T()
        t.kind = kind if device == "cpu" else "device"
        if device == "cpu":
            self.calls.append(f"host {kind}")
            # the block times h2d then d2h for each host buffer
            self.queue = list(self.rec["elapsed_ms"][f"h2d_{kind}"]) + list(self.rec["elapsed_ms"][f"d2h_{kind}"])
        return t

    def empty_like(self, t: Any) -> Any:
        self.load("copy")
        return self.empty(0, "uint8", device="cuda")

    def get_num_threads(self) -> int:
        return 16

    def get_num_interop_threads(self) -> int:
        return 16

    def get_float32_matmul_precision(self) -> str:
        return "highest"
