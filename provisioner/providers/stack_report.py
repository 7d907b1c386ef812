"""The stack report (schema 1): one typed model and the one decoder every reader uses.

Two writers produce it, with one probe (``provisioner.agent``): the VM's startup script (``python3 -m provisioner.agent report STATUS``,
``source: "vm"``) and the local probe (``provisioner.probe.report.probe``, ``source: "local"``). Readers
get it from a GCE guest attribute or serial console line, an Azure Run Command or boot-diagnostics
log, or a file; whatever the channel, the text goes through :func:`decode_report` (JSON, or base64 --
standard or url-safe -- of JSON or of gzip'd JSON) and :class:`StackReport` validates it. A
``tests/verify/test_report_contract.py`` test feeds both writers' output through the decoder.

``status`` is the startup script's console protocol: ``running:PHASE``, ``ready`` or
``failed:PHASE:LINE`` (``error`` then carries the script's message).

It lives beside the provider contract (``Provider.report`` returns it) so that a cloud package decodes it without
importing verify/ (issue 37: providers import nothing above them); ``provisioner.verify.report`` is its old name.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import re
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

REPORT_RE = re.compile(r"TRAINVM_REPORT=([A-Za-z0-9+/=_-]+)")
STATUS_RE = re.compile(r"^(ready|rehearsed|running:[\w.-]+|failed:[\w.-]+:\d*)$")
MAX_REPORT_BYTES = 4 * 1024 * 1024  # decoded; a report is a few KiB


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Gpu(_Part):
    name: str
    memory_mib: int | None = None
    compute_capability: str | None = None


class Framework(_Part):
    name: str | None = None
    version: str | None = None
    cuda: str | None = None
    cudnn: str | int | None = None  # torch reports 90100; normalised by verify.compare
    cuda_available: bool | None = False  # None: not checked (a rehearsal: no GPU)


class OsInfo(_Part):
    id: str | None = None
    version: str | None = None
    glibc: str | None = None


class CpuInfo(_Part):
    model: str | None = None
    count: int | None = None


class DiskInfo(_Part):
    path: str | None = None
    kind: str | None = None
    free_gib: float | None = None


class DataState(_Part):
    dest: str
    status: Literal["staged", "empty", "missing"]


class PhaseTiming(_Part):
    status: str
    seconds: float


class StackReport(_Part):
    schema_: Literal[1] = Field(1, alias="schema")
    source: Literal["vm", "local"] = "vm"
    status: str
    gpus: tuple[Gpu, ...] | None = ()  # None: not checked (a rehearsal: no GPU; ``not_checked``)
    driver: str | None = None
    cuda_driver_max: str | None = None
    framework: Framework | None = None
    cuda_runtime: str | None = None
    cuda_toolkit: str | None = None
    cudnn: str | None = None
    python: str | None = None
    packages: dict[str, str] = {}
    package_sources: dict[str, dict[str, object]] = {}
    python_env: dict[str, object] | None = None
    os: OsInfo | None = None
    cpu: CpuInfo | None = None
    memory_gib: float | None = None
    disk: DiskInfo | None = None
    blas: dict[str, object] | None = None
    data: tuple[DataState, ...] = ()
    phases: dict[str, PhaseTiming] = {}
    profile_hash: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()
    container: dict[str, object] | None = None  # stack.container: the image the VM runs (the agent's container-check)
    perf: dict[str, object] | None = None  # the perf probe's result (profile `perf:`), for `verify NAME --perf`
    #: a rehearsal (status ``rehearsed``): the GPU facts it could not check (``gpus``, ``driver``...) -> why
    not_checked: dict[str, str] = {}

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("status")
    @classmethod
    def _status(cls, value: str) -> str:
        if not STATUS_RE.match(value):
            raise ValueError(f"not a startup-script status: {value!r}")
        return value

    @property
    def state(self) -> Literal["ready", "rehearsed", "running", "failed"]:
        return self.status.split(":", 1)[0]  # type: ignore[return-value]

    @property
    def phase(self) -> str | None:
        parts = self.status.split(":")
        return parts[1] if len(parts) > 1 else None

    @property
    def line(self) -> int | None:
        parts = self.status.split(":")
        return int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None

    def as_dict(self) -> dict[str, object]:
        """The report as its JSON document (what the writers emit)."""
        return self.model_dump(mode="json", by_alias=True)


def _candidates(text: str) -> Iterable[bytes]:
    text = text.strip()
    if text.startswith("{"):
        yield text.encode()
    for decoder in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decoder(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            continue
        if raw[:2] == b"\x1f\x8b":
            try:
                raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read(MAX_REPORT_BYTES + 1)
            except (OSError, EOFError):
                continue
        yield raw


def decode_report(value: str | bytes | Mapping[str, object] | None) -> StackReport | None:
    """A report from any channel: a mapping, JSON text, or base64 (standard or url-safe) of JSON or of
    gzip'd JSON. None when it is none of those or does not validate as schema 1."""
    if value is None or value == "" or value == b"":
        return None
    if isinstance(value, Mapping):
        try:
            return StackReport.model_validate(dict(value))
        except ValidationError:
            return None
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    for raw in _candidates(text):
        if len(raw) > MAX_REPORT_BYTES:
            continue
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict):
            report = decode_report(doc)
            if report is not None:
                return report
    return None


def last_console_report(text: str | None) -> StackReport | None:
    """The last decodable ``TRAINVM_REPORT=<base64>`` line of a console log."""
    last = None
    for m in REPORT_RE.finditer(text or ""):
        last = decode_report(m.group(1)) or last
    return last
