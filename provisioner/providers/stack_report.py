"""The stack report (schema 1): one typed model and the one decoder every reader uses.

Two writers produce it, with one probe (``provisioner.agent``): the VM's startup script (``python3 -m provisioner.agent report STATUS``,
``source: "vm"``) and the local probe (``provisioner.probe.report.probe``, ``source: "local"``). Readers
get it from a GCE guest attribute or serial console line, an Azure Run Command or boot-diagnostics
log, or a file; whatever the channel, the text goes through :func:`read_report` (JSON, or base64 --
standard or url-safe -- of JSON or of gzip'd JSON) and :class:`StackReport` validates it. A report that is there but
cannot be read is ``ReportUnreadableError`` (exit 3) naming the channel and each bad field, never "no report yet";
:func:`decode_report` is the lenient form (None) for probing text that may hold anything. A
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

from provisioner.errors import ReportUnreadableError

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


#: what an unreadable report's error suggests (the VM wrote it; nothing here can repair it)
UNREADABLE_HINT = ("the VM wrote a stack report this trainvm cannot read (an agent of another trainvm version, a "
                   "truncated write or a hand edit): `trainvm logs NAME` shows what the VM wrote, and "
                   "`trainvm down NAME --yes` then `trainvm up` makes a VM whose report this trainvm reads")
_MAX_ERRORS, _MAX_TEXT = 5, 160


def _clean(text: str) -> str:
    """A field path or message from the report itself, printable and short (a hostile key is named, not echoed)."""
    text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text[: _MAX_TEXT * 2])
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def _why(exc: ValidationError) -> str:
    """Each failing field as ``path.to.field: pydantic's message`` (the first few, then how many more)."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    parts = [f"{_clean('.'.join(str(p) for p in e['loc']) or '(the document)')}: {_clean(_json_words(e['msg']))}"
             for e in errors[:_MAX_ERRORS]]
    more = len(errors) - _MAX_ERRORS
    return "; ".join(parts) + (f"; and {more} more field error(s)" if more > 0 else "")


def _json_words(msg: str) -> str:
    """pydantic's Python kinds in JSON's words (the report is a JSON document)."""
    for python, json_kind in (("a valid tuple", "an array"), ("a valid list", "an array"),
                              ("a valid dictionary", "an object"), ("a valid string", "a string")):
        msg = msg.replace(python, json_kind)
    return msg


def validate_report(doc: Mapping[str, object], where: str = "the stack report") -> StackReport:
    """``doc`` as a :class:`StackReport`; :class:`ReportUnreadableError` naming each bad field otherwise."""
    try:
        return StackReport.model_validate(dict(doc))
    except ValidationError as exc:
        raise ReportUnreadableError(f"{where} is not a stack report this trainvm reads (schema 1): {_why(exc)}",
                                    hint=UNREADABLE_HINT) from None


def _candidates(text: str) -> Iterable[bytes | str]:
    """The bytes ``text`` may encode (as written, base64, url-safe base64; gunzipped), or why a try failed."""
    text = text.strip()
    if text[:1] in ("{", "[", '"'):  # JSON as written (an array or a string is named as such, not as bad base64)
        yield text.encode()
    for decoder in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decoder(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            yield "neither JSON nor base64"
            continue
        if raw[:2] == b"\x1f\x8b":
            try:
                raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read(MAX_REPORT_BYTES + 1)
            except (OSError, EOFError) as exc:
                yield f"base64 of a gzip stream that does not decompress ({_clean(str(exc)) or type(exc).__name__})"
                continue
        yield raw


def read_report(value: str | bytes | Mapping[str, object] | None, where: str = "the stack report") -> StackReport | None:
    """A report from any channel (a mapping, JSON text, or base64 -- standard or url-safe -- of JSON or of gzip'd
    JSON). None only when there is none (None or blank); a value that is there but cannot be read (not JSON, not an
    object, a field that fails schema 1, over ``MAX_REPORT_BYTES``) is :class:`ReportUnreadableError`, whose message
    starts with ``where`` and says why: the field path and pydantic's message, or the JSON error's line and column."""
    if value is None or isinstance(value, str | bytes) and not value.strip():
        return None
    if isinstance(value, Mapping):
        return validate_report(value, where)
    doc = _document(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
    if isinstance(doc, str):
        raise ReportUnreadableError(f"{where} is unreadable: {doc}", hint=UNREADABLE_HINT)
    return validate_report(doc, where)


def _document(text: str) -> dict[str, object] | str:
    """The JSON object ``text`` encodes, or why it encodes none."""
    why = None
    for raw in _candidates(text):
        if isinstance(raw, str):
            why = why or raw
            continue
        if len(raw) > MAX_REPORT_BYTES:
            why = why or f"over {MAX_REPORT_BYTES // 2**20} MiB decoded (a report is a few KiB)"
            continue
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: deeply nested brackets
            why = why or f"not JSON ({_clean(str(exc))})"
            continue
        if not isinstance(doc, dict):
            why = why or f"a JSON {_json_kind(doc)}, not an object"
            continue
        return doc
    return why or "empty"


def _json_kind(doc: object) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(doc), "number")


def decode_report(value: str | bytes | Mapping[str, object] | None) -> StackReport | None:
    """Lenient :func:`read_report`: None also when the value is not a readable report (a probe of a channel that
    may hold anything). The providers' ``read_report`` use the strict one: a report that is there and malformed is
    an error there, never "no report yet"."""
    try:
        return read_report(value)
    except ReportUnreadableError:
        return None


def last_console_report(text: str | None, where: str = "the console") -> StackReport | None:
    """The report of the last ``TRAINVM_REPORT=<base64>`` line of a console log that decodes to a JSON object; None
    when there is none. A serial console garbles lines (a line that is not base64 of JSON is noise, skipped), but the
    last object is the VM's newest word: when it fails schema 1 that is :class:`ReportUnreadableError`, not an older
    line's report (a stale ``running:PHASE`` would read as "provisioning" for ever)."""
    for line in reversed(REPORT_RE.findall(text or "")):
        doc = _document(line)
        if isinstance(doc, dict):
            return validate_report(doc, f"the last TRAINVM_REPORT line of {where}")
    return None
