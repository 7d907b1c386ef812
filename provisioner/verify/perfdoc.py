"""The perf document (``schema: trainvm.perf/1``) as typed, frozen models: what ``parity`` and
``verify --perf`` accept. The probe itself (``provisioner.perfprobe``) is stdlib-only and writes
plain dicts; these models are the contract it is checked against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, NotRequired, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provisioner.errors import InputError
from provisioner.perfprobe.context import BlasLibrary, GpuState, HostContext

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
    spec: dict[str, object] | None = None


class Block(_Frozen):
    status: Literal["ok", "skipped", "error"]
    reason: str | None = None
    metrics: dict[str, Metric] = Field(default_factory=dict)
    info: dict[str, object] = Field(default_factory=dict)
    seconds: float | None = None


class PerfDoc(_Frozen):
    schema_: Literal["trainvm.perf/1"] = Field(alias="schema")
    created: str
    python: dict[str, object]
    platform: str
    budget_s: float
    elapsed_s: float
    context: dict[str, object]
    blocks: dict[str, Block]


# The same document as the dicts trainvm reads back (parity, perfspec, ``probe --perf``'s table): a key misspelled on
# the reading side is a mypy error (tests/unit/test_no_explicit_any.py). The models above validate; these describe.
# Keys the readers treat as optional (``.get``) are NotRequired, as the probe's compact form may leave them out.


class SpecNote(TypedDict):
    """``metric.spec``, added on the host by ``perfspec.annotate``."""

    figure: float | None
    variant: str
    source: str


# ``class`` is a keyword: the functional form.
MetricDoc = TypedDict("MetricDoc", {
    "unit": str, "class": str, "higher_is_better": NotRequired[bool], "repeats": list[float], "median": float,
    "cv": float, "max": float, "dropped": NotRequired[int | None], "dtype": NotRequired[str | None],
    "raw_ms": NotRequired[list[float] | None], "n": NotRequired[int | None], "iters": NotRequired[int | None],
    "bytes": NotRequired[int | None], "world": NotRequired[int | None], "tool": NotRequired[str | None],
    "direct": NotRequired[bool | None], "file_mib": NotRequired[int | None], "workers": NotRequired[int | None],
    "processes": NotRequired[int | None], "threads": NotRequired[int | None],
    "efficiency": NotRequired[float | None], "spec": NotRequired[SpecNote | None],
})


class GpuContext(TypedDict, total=False):
    """``context.gpu`` (and a matmul block's ``info.context_under_load``): perfprobe/context.py gpu_context."""

    status: str
    reason: str | None
    gpus: list[GpuState]


class BlasContext(TypedDict, total=False):
    """``context.blas``: perfprobe/context.py blas_info."""

    status: str
    reason: str | None
    libraries: list[BlasLibrary]


class PerfContext(TypedDict, total=False):
    """Block 0, ``context``: what explains a slow run."""

    host: HostContext
    gpu: GpuContext
    torch: dict[str, object]
    blas: BlasContext


class BlockInfo(TypedDict, total=False):
    """The keys of a block's ``info`` that trainvm reads (a block may carry others: they are shown or passed on)."""

    gpu: str | None
    notes: dict[str, str]
    context_under_load: GpuContext
    blas: str
    data: str


class BlockDoc(TypedDict, total=False):
    status: str
    reason: str | None
    metrics: dict[str, MetricDoc]
    info: BlockInfo
    seconds: float | None


class PerfDocument(TypedDict):
    """A validated perf document (``validate_doc``'s answer), as parity, perfspec and ``probe --perf`` read it."""

    schema: str
    created: str
    python: dict[str, object]
    platform: str
    budget_s: float
    elapsed_s: float
    context: PerfContext
    blocks: dict[str, BlockDoc]


def validate_doc(doc: object, where: str) -> PerfDocument:
    """Check a perf document; returns it unchanged (a plain dict) or raises InputError."""
    if isinstance(doc, dict) and doc.get("schema") not in (None, SCHEMA):
        raise InputError(f"{where}: schema {doc.get('schema')!r} is not {SCHEMA!r} (a newer or older trainvm wrote it)")
    try:
        PerfDoc.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise InputError(f"{where}: {path}: {first['msg']} (not a trainvm perf result; `trainvm probe --perf -o FILE` writes one)") from None
    return cast(PerfDocument, doc)  # untyped JSON enters here: PerfDoc validated its shape


def load_perf(path: Path) -> PerfDocument:
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
