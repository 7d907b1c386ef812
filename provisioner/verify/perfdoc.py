"""The perf document (``schema: trainvm.perf/1``) as typed, frozen models: what ``parity`` and
``verify --perf`` accept. The probe itself (``provisioner.perfprobe``) is stdlib-only and writes
plain dicts; these models are the contract it is checked against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provisioner.errors import InputError

SCHEMA = "trainvm.perf/1"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Metric(_Frozen):
    unit: str
    klass: Literal["gpu_compute", "gpu_memory", "host_device", "interconnect", "disk", "loader", "cpu", "blas"] = Field(alias="class")
    higher_is_better: bool = True
    repeats: list[float] = Field(min_length=1)
    median: float
    cv: float = Field(ge=0)
    max: float
    dropped: int | None = None
    # block-specific details
    dtype: str | None = None
    raw_ms: list[float] | None = None
    n: int | None = None
    iters: int | None = None
    bytes: int | None = None
    world: int | None = None
    tool: str | None = None
    direct: bool | None = None
    file_mib: int | None = None
    workers: int | None = None
    processes: int | None = None
    threads: int | None = None
    # added on the host from the facts (provisioner.verify.perfspec.annotate)
    efficiency: float | None = None
    spec: dict[str, Any] | None = None


class Block(_Frozen):
    status: Literal["ok", "skipped", "error"]
    reason: str | None = None
    metrics: dict[str, Metric] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)
    seconds: float | None = None


class PerfDoc(_Frozen):
    schema_: Literal["trainvm.perf/1"] = Field(alias="schema")
    created: str
    python: dict[str, Any]
    platform: str
    budget_s: float
    elapsed_s: float
    context: dict[str, Any]
    blocks: dict[str, Block]


def validate_doc(doc: Any, where: str) -> dict[str, Any]:
    """Check a perf document; returns it unchanged (a plain dict) or raises InputError."""
    if isinstance(doc, dict) and doc.get("schema") not in (None, SCHEMA):
        raise InputError(f"{where}: schema {doc.get('schema')!r} is not {SCHEMA!r} (a newer or older trainvm wrote it)")
    try:
        PerfDoc.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise InputError(f"{where}: {path}: {first['msg']} (not a trainvm perf result; `trainvm probe --perf -o FILE` writes one)") from None
    valid: dict[str, Any] = doc  # PerfDoc validated it: a mapping
    return valid


def load_perf(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: not a JSON document ({exc})") from None
    if isinstance(doc, dict) and "perf" in doc and "schema" in doc and doc.get("schema") != SCHEMA:
        doc = doc["perf"]  # a VM report carrying its perf result
    return validate_doc(doc, str(path))
