"""The one comparison of a resolved profile with a stack report (VM or local probe).

``compare(profile, report)`` is used by ``verify NAME`` (report from the VM's startup script)
and ``verify --local`` (report from ``provisioner.probe.probe()``), so both are judged alike.

Rules (field -> verdict):
- ``status`` of the result (``verify``'s states, exit codes in docs/spec.md):
  ``provisioning`` (no report yet, or ``running:PHASE``: nothing else is judged), ``failed`` (the
  startup script reported ``failed:PHASE:LINE``; every field is still compared and shown, with the
  script's message), ``drift`` (a field differs) or ``match`` (every field the profile pins agrees).
  ``compare`` needs the resolved profile: it raises rather than judge a report against nothing.
- ``stack.driver``: exact string.  ``stack.python``: exact string.
- ``stack.cuda``: major.minor of the CUDA the framework was built with (``framework.cuda``;
  without a framework, the report's ``cuda_runtime``, then nvcc's) equals major.minor of the pin.
- ``stack.cudnn`` (when pinned): compared at the precision given ("9" = major, "9.1" = major.minor,
  "9.1.0" = three parts). The framework's cuDNN wins over the library; ints like 90100 -> 9.1.0.
- ``stack.cuda_toolkit`` (when true): nvcc is present and its major.minor equals ``stack.cuda``.
- ``stack.os`` (when set): "<id>-<version>" of the report.
- ``stack.packages.<name>``: exact version including the local label (+cu124); names are
  canonicalised (PEP 503); a missing package is drift.
- ``source.<name>``: the team source commit the VM's profile was built from (shown, always ok).
- ``lock.packages.<name>``: when the stored profile carries its lock (``trainvm lock``), every other
  package of the locked closure, judged the same way.
- GPUs: the machine must have at least ``gpu_count`` GPUs (more is fine: a workstation with two
  GPUs runs a one-GPU profile); the best ``gpu_count`` of them must each be in ``hardware.gpu`` (when
  given) and have at least ``min_gpu_memory_gib``. nvidia-smi reports usable memory, 2-7% under the
  nominal size that catalogs and profiles use (T4: 15360 MiB for "16 GB"), so memory is accepted
  down to NOMINAL_TOLERANCE of the requirement. The same tolerance applies to RAM (MemTotal).
- ``hardware.min_vcpus``: logical CPUs >= requirement.
- ``hardware.local_nvme_gib`` (when > 0): the reported data disk is NVMe.
- ``data[<dest>]``: every destination the report lists must be "staged".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

from provisioner import versions
from provisioner.compat.facts import NOMINAL_TOLERANCE
from provisioner.probe.gpu import canonical_gpu_name
from provisioner.probe.python_env import normalize_cudnn
from provisioner.probe.report import major_minor
from provisioner.verify.report import StackReport

Status = Literal["match", "drift", "provisioning", "failed"]


@dataclass(frozen=True)
class FieldResult:
    field: str
    expected: Any
    observed: Any
    ok: bool
    skipped: str | None = None  # why the field was not judged (it then counts as ok, and says so)

    def as_dict(self) -> dict[str, Any]:
        doc = {"field": self.field, "expected": self.expected, "observed": self.observed, "ok": self.ok}
        return {**doc, "skipped": self.skipped} if self.skipped else doc


@dataclass(frozen=True)
class VerifyResult:
    status: Status
    fields: tuple[FieldResult, ...]
    phase: str | None = None  # provisioning/failed: the startup phase
    line: int | None = None  # failed: the script line
    message: str | None = None  # failed: the script's error message

    def describe(self) -> str:
        """``match``, ``drift``, ``provisioning (phase packages)``, ``failed (phase driver, line 212: ...)``."""
        if self.status == "provisioning":
            return f"provisioning (phase {self.phase})" if self.phase else "provisioning (no report from the startup script yet)"
        if self.status == "failed":
            where = ", ".join(p for p in (f"phase {self.phase}" if self.phase else "",
                                          f"line {self.line}" if self.line else "") if p)
            return f"failed ({where}{(': ' if where else '') + self.message if self.message else ''})"
        return self.status

    @property
    def drifted(self) -> tuple[FieldResult, ...]:
        return tuple(f for f in self.fields if not f.ok)

    def as_dict(self, target: str) -> dict[str, Any]:
        """The `verify --json` document of SPEC: {target, status, fields: [...]}."""
        return {"target": target, "status": self.status, "phase": self.phase, "line": self.line,
                "message": self.message, "fields": [f.as_dict() for f in self.fields]}

    def rows(self) -> list[tuple[str, str, str, str]]:
        """Drift-table rows: (field, expected, observed, verdict "ok" | "DRIFT")."""
        return [(f.field, _show(f.expected), _show(f.observed),
                 f"skipped: {f.skipped}" if f.skipped else "ok" if f.ok else "DRIFT") for f in self.fields]


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def _get(data: Mapping[str, Any] | None, *path: str) -> Any:
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def parse_pin(pin: str) -> tuple[str, str | None]:
    """"Torch==2.4.1+cu124" -> ("torch", "2.4.1+cu124"); a non-== spec gives (name, spec)."""
    try:
        req = Requirement(pin)
    except InvalidRequirement:
        name, _, version = pin.partition("==")
        return str(canonicalize_name(name.strip())), version.strip() or None
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return str(canonicalize_name(req.name)), specs[0].version
    return str(canonicalize_name(req.name)), str(req.specifier) or None


def _package_ok(expected: str | None, observed: str | None) -> bool:
    if observed is None:
        return False
    if expected is None:
        return True
    if expected[:1] in "<>=!~":
        try:
            return SpecifierSet(expected).contains(observed, prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            return False
    return versions.equal(expected, observed)


def framework_cuda(report: Mapping[str, Any]) -> str | None:
    """CUDA in use: the framework's build; else the CUDA runtime wheel; with no framework at all,
    the toolkit (nvcc). A CPU-only framework build means no CUDA."""
    if report.get("framework"):
        return major_minor(_get(report, "framework", "cuda") or report.get("cuda_runtime"))
    return major_minor(report.get("cuda_runtime") or report.get("cuda_toolkit"))


def report_cudnn(report: Mapping[str, Any]) -> str | None:
    return normalize_cudnn(_get(report, "framework", "cudnn")) or normalize_cudnn(report.get("cudnn"))


def allowed_gpus(hardware: Mapping[str, Any]) -> list[str] | None:
    gpu = hardware.get("gpu")
    if gpu is None or gpu == []:
        return None
    return [gpu] if isinstance(gpu, str) else [str(g) for g in gpu]


def _framework_cuda_of_pins(packages: Iterable[str]) -> str | None:
    """The CUDA the pinned framework build targets (torch +cu124 -> 12.4), as `validate` derives it
    when a profile leaves stack.cuda out."""
    from provisioner.compat.facts import load_facts
    from provisioner.compat.stack import frameworks

    try:
        return next((fw.cuda for fw in frameworks(list(packages), load_facts()) if fw.cuda), None)
    except Exception:  # noqa: BLE001 - a report-only diff may carry pins the facts cannot parse
        return None


def _stack_fields(stack: Mapping[str, Any], report: Mapping[str, Any]) -> Iterable[FieldResult]:
    if stack.get("os"):
        os_id, os_ver = _get(report, "os", "id"), _get(report, "os", "version")
        observed = f"{os_id}-{os_ver}" if os_id and os_ver else None
        yield FieldResult("stack.os", stack["os"], observed, observed == stack["os"])
    if stack.get("driver"):
        yield FieldResult("stack.driver", stack["driver"], report.get("driver"),
                          str(stack["driver"]) == report.get("driver"))
    cuda = stack.get("cuda") or _framework_cuda_of_pins(stack.get("packages") or [])
    if cuda:
        observed_cuda = framework_cuda(report)
        yield FieldResult("stack.cuda", cuda, observed_cuda, major_minor(str(cuda)) == observed_cuda)
    if stack.get("cudnn"):
        observed_cudnn = report_cudnn(report)
        yield FieldResult("stack.cudnn", stack["cudnn"], observed_cudnn,
                          versions.matches_at_precision(str(stack["cudnn"]), observed_cudnn))
    if stack.get("cuda_toolkit") is True:
        toolkit = report.get("cuda_toolkit")
        ok = toolkit is not None and (not cuda or major_minor(toolkit) == major_minor(str(cuda)))
        yield FieldResult("stack.cuda_toolkit", major_minor(str(cuda)) if cuda else True, toolkit, ok)
    if stack.get("python"):
        yield FieldResult("stack.python", stack["python"], report.get("python"),
                          str(stack["python"]) == report.get("python"))
    observed_pkgs = {str(canonicalize_name(k)): v for k, v in (report.get("packages") or {}).items()}
    for pin in stack.get("packages") or []:
        name, expected = parse_pin(str(pin))
        observed = observed_pkgs.get(name)
        yield FieldResult(f"stack.packages.{name}", expected, observed, _package_ok(expected, observed))


def _lock_fields(lock: Mapping[str, Any], stack: Mapping[str, Any], report: Mapping[str, Any]) -> Iterable[FieldResult]:
    """Every package of the lock's closure (the stored profile's ``lock.packages``) that is not a top-level pin."""
    pinned = {parse_pin(str(p))[0] for p in stack.get("packages") or []}
    observed_pkgs = {str(canonicalize_name(k)): v for k, v in (report.get("packages") or {}).items()}
    for raw, expected in sorted((lock.get("packages") or {}).items()):
        name = str(canonicalize_name(raw))
        if name in pinned:
            continue
        observed = observed_pkgs.get(name)
        yield FieldResult(f"lock.packages.{name}", expected, observed, _package_ok(str(expected), observed))


def _gpu_fields(hardware: Mapping[str, Any], report: Mapping[str, Any]) -> Iterable[FieldResult]:
    allowed = allowed_gpus(hardware)
    min_mem = hardware.get("min_gpu_memory_gib")
    count = hardware.get("gpu_count")
    if count is None:
        count = 1 if (allowed or min_mem) else 0
    if not count and not allowed and not min_mem:
        return
    gpus = [(canonical_gpu_name(str(g.get("name", "")), g.get("memory_mib")), int(g.get("memory_mib") or 0))
            for g in report.get("gpus") or []]
    allowed_keys = {a.lower() for a in allowed} if allowed else None

    def name_ok(name: str) -> bool:
        return allowed_keys is None or name.lower() in allowed_keys

    best = sorted(gpus, key=lambda g: (name_ok(g[0]), g[1]), reverse=True)[: max(int(count), 1)]
    yield FieldResult("hardware.gpu_count", count, len(gpus), len(gpus) >= int(count))
    if allowed:
        names = sorted({n for n, _ in best})
        yield FieldResult("hardware.gpu", allowed, names, bool(best) and all(name_ok(n) for n, _ in best))
    if min_mem:
        smallest = min((m for _, m in best), default=None)
        observed = round(smallest / 1024, 1) if smallest is not None else None
        ok = smallest is not None and smallest >= float(min_mem) * 1024 * NOMINAL_TOLERANCE
        yield FieldResult("hardware.min_gpu_memory_gib", min_mem, observed, ok)


def _host_fields(hardware: Mapping[str, Any], report: Mapping[str, Any]) -> Iterable[FieldResult]:
    if hardware.get("min_vcpus"):
        cpus = _get(report, "cpu", "count")
        yield FieldResult("hardware.min_vcpus", hardware["min_vcpus"], cpus,
                          cpus is not None and int(cpus) >= int(hardware["min_vcpus"]))
    if hardware.get("min_memory_gib"):
        mem = report.get("memory_gib")
        yield FieldResult("hardware.min_memory_gib", hardware["min_memory_gib"], mem,
                          mem is not None and float(mem) >= float(hardware["min_memory_gib"]) * NOMINAL_TOLERANCE)
    if (hardware.get("local_nvme_gib") or 0) > 0:
        kind = _get(report, "disk", "kind")
        yield FieldResult("hardware.local_nvme_gib", "nvme", kind, kind == "nvme")


GPULESS = "no NVIDIA GPU on this machine"


def _gpuless_workstation(fields: list[FieldResult], hardware: Mapping[str, Any]) -> list[FieldResult]:
    """``verify --local`` on a machine without an NVIDIA GPU (a laptop, a CI runner): a driver cannot be
    observed, and a profile that names no GPU (what ``capture`` writes there) is only held to the GPU
    count it defaults to on a VM. Those two fields are shown as skipped, not passed silently; a profile
    that names a GPU or its memory still drifts."""
    explicit = allowed_gpus(hardware) or hardware.get("min_gpu_memory_gib")
    out = []
    for f in fields:
        if f.field == "stack.driver" or (f.field == "hardware.gpu_count" and not explicit):
            f = FieldResult(f.field, f.expected, f.observed, True, skipped=GPULESS)
        out.append(f)
    return out


def compare(profile: Mapping[str, Any], report: StackReport | Mapping[str, Any] | None) -> VerifyResult:
    """Judge a report against a resolved profile (the profile model's ``model_dump()``)."""
    if not isinstance(profile, Mapping) or not isinstance(profile.get("stack"), Mapping):
        raise ValueError("compare() needs the resolved profile (with its stack); refusing to judge a report against nothing")
    if report is not None and not isinstance(report, StackReport):
        report = StackReport.model_validate(dict(report))
    if report is None:
        return VerifyResult("provisioning", (FieldResult("status", "ready", None, False),))
    status_field = FieldResult("status", "ready", report.status, report.state == "ready")
    if report.state == "running":
        return VerifyResult("provisioning", (status_field,), phase=report.phase)
    doc = report.as_dict()
    hardware = profile.get("hardware") or {}
    stack = profile["stack"]
    # which commit of each team source the VM was built from (informational: always ok)
    sources = [FieldResult(f"source.{s.get('name')}", f"{s.get('url')} {s.get('ref')}", s.get("commit"), True)
               for s in profile.get("sources") or [] if isinstance(s, Mapping)]
    from provisioner.verify.container import container_fields

    fields = [status_field, *sources, *_stack_fields(stack, doc), *_lock_fields(profile.get("lock") or {}, stack, doc),
              *_gpu_fields(hardware, doc), *_host_fields(hardware, doc), *container_fields(stack, doc)]
    fields += [FieldResult(f"data[{d.dest}]", "staged", d.status, d.status == "staged") for d in report.data]
    if report.source == "local" and not report.gpus and report.driver is None:
        fields = _gpuless_workstation(fields, hardware)
    if report.state == "failed":
        return VerifyResult("failed", tuple(fields), phase=report.phase, line=report.line, message=report.error)
    return VerifyResult("match" if all(f.ok for f in fields) else "drift", tuple(fields))
