"""The one comparison of a machine (a stack report) with what its profile expects (an expectation).

``compare(expectation, report)`` is what ``trainvm verify NAME`` (a VM's report), ``verify --local``
(this machine's probe) and the VM's ready gate (``python3 -m provisioner.agent gpu-check`` /
``stack-check``) all run. The workstation builds the expectation from the profile with the
compatibility facts applied (``provisioner.verify.expect``); the VM reads the same document from
/var/lib/trainvm/expected.json. ``groups`` picks the fields a gate judges (the GPU gate runs before
Python is installed).

Rules (field -> verdict):
- ``status``: ``provisioning`` (no report yet, or ``running:PHASE``: nothing else is judged),
  ``failed`` (``failed:PHASE:LINE``: every field is still compared, with the script's message),
  ``drift`` (a field differs) or ``match`` (every field agrees or was skipped, visibly).
- ``stack.driver``, ``stack.python``: exact strings. ``stack.os``: "<id>-<version>".
- ``stack.cuda``: major.minor of the CUDA the framework was built with (without a framework, the
  CUDA runtime wheel, then nvcc) equals major.minor of the expectation's effective CUDA.
- ``stack.cudnn``: the cuDNN in use (the framework's answer, refined by an agreeing cuDNN library:
  the nvidia-cudnn wheel or the system package) matches at the precision the profile asks for
  ("9.1" matches "9.1.0.70"). An observation less precise than the pin ("9.1.0" for "9.1.0.70")
  cannot prove it: drift, with the observation shown.
- ``stack.cuda_toolkit``: nvcc is present and its major.minor is the CUDA expected.
- ``stack.packages.<name>`` / ``lock.packages.<name>``: exact version with local label (or the
  specifier); names canonicalised; missing is drift. A report whose ``packages`` is not the schema's
  object {name: version} (an older agent's, a hand-edited one) has no packages, and ``stack.packages``
  says so (drift), as every pin does (missing).
- ``stack.framework``: the framework imports and reports the pinned version; ``stack.framework.gpu``
  (a CUDA build): it can use the GPU.
- ``hardware.*``: at least ``gpu_count`` GPUs; the best of them named as allowed (canonical names)
  and with at least the memory asked (down to the nominal tolerance); vCPUs, RAM, local NVMe.
- ``stack.container.*``: the pulled digest, the GPU seen inside, and the image's declared facts.
- ``data[<dest>]``: every destination the report lists is "staged".
- ``rehearsed`` (a machine without a GPU the profile was rehearsed on: ``CloudSpec.rehearsal``, the expectation's
  ``rehearsal``): every GPU fact (the driver, the GPUs, their memory, the framework's and the container's GPU
  access) is *not checked* (``not_checked``: ``ok`` false, not drift, never ``match``); the rest is judged as for a
  VM. A rehearsal without drift is ``rehearsed``, with drift ``drift``; a failed script is ``failed``.
- A local report from a machine without an NVIDIA GPU: the driver, the GPU count a profile does not
  ask for explicitly, and the framework's GPU access are *skipped*: shown with the reason, ``ok``
  false (they were not verified), and not counted as drift.

Part of the agent: standard library and ``packaging``; CPython >= 3.8 syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from provisioner.agent import versions
from provisioner.agent.gpu import canonical_gpu_name
from provisioner.agent.pyenv import normalize_cudnn
from provisioner.agent.report import REHEARSAL, cudnn_wheel, major_minor, refine_cudnn

GPULESS = "no NVIDIA GPU on this machine"
#: the fields a rehearsal cannot see (no GPU): never judged, never ``match``
GPU_FIELDS = ("stack.driver", "hardware.gpu_count", "hardware.gpu", "hardware.min_gpu_memory_gib", "stack.framework.gpu",
              "stack.container.gpu")
STATUS_RE = re.compile(r"^(ready|rehearsed|running:[\w.-]+|failed:[\w.-]+:\d*)$")
GROUPS = ("report", "gpu", "stack", "host", "container")


@dataclass(frozen=True)
class FieldResult:
    field: str
    expected: Any
    observed: Any
    ok: bool
    skipped: Optional[str] = None  # why the field was not judged (ok is then false, and it is not drift)
    pending: Optional[str] = None  # not judged *yet*: the machine is still provisioning ("provisioning (phase P)"); not drift
    not_checked: Optional[str] = None  # the machine cannot show it (REHEARSAL): ok false, not drift, never match

    def as_dict(self) -> Dict[str, Any]:
        doc = {"field": self.field, "expected": self.expected, "observed": self.observed, "ok": self.ok}
        if self.skipped:
            doc["skipped"] = self.skipped
        if self.pending:
            doc["pending"] = self.pending
        if self.not_checked:
            doc["not_checked"] = self.not_checked
        return doc

    @property
    def drifted(self) -> bool:
        return not self.ok and not self.skipped and not self.pending and not self.not_checked


@dataclass(frozen=True)
class VerifyResult:
    status: str  # match | drift | provisioning | failed | rehearsed
    fields: Tuple[FieldResult, ...]
    phase: Optional[str] = None  # provisioning/failed: the startup phase
    line: Optional[int] = None  # failed: the script line
    message: Optional[str] = None  # failed: the script's error message; a cluster: which nodes are failed/provisioning

    def describe(self) -> str:
        """``match``, ``drift``, ``provisioning (phase packages)``, ``failed (phase driver, line 212: ...)``."""
        if self.status == "provisioning":
            if self.message:
                return "provisioning (%s)" % self.message
            return "provisioning (phase %s)" % self.phase if self.phase else "provisioning (no report from the startup script yet)"
        if self.status == "failed":
            where = ", ".join(p for p in ("phase %s" % self.phase if self.phase else "", "line %s" % self.line if self.line else "") if p)
            return "failed (%s%s)" % (where, ((": " if where else "") + self.message) if self.message else "")
        if self.status == "rehearsed":
            unseen = sum(1 for f in self.fields if f.not_checked and f.field != "status")
            return "rehearsed (%s: %d field%s not checked; never a match)" % (REHEARSAL, unseen, "" if unseen == 1 else "s")
        return self.status

    @property
    def drifted(self) -> Tuple[FieldResult, ...]:
        return tuple(f for f in self.fields if f.drifted)

    def as_dict(self, target: str) -> Dict[str, Any]:
        """The `verify --json` document: {target, status, phase, line, message, fields: [...]}."""
        return {"target": target, "status": self.status, "phase": self.phase, "line": self.line,
                "message": self.message, "fields": [f.as_dict() for f in self.fields]}

    def rows(self) -> List[Tuple[str, str, str, str]]:
        """Drift-table rows: (field, expected, observed, verdict "ok" | "DRIFT" | "skipped: ..." | "pending" |
        "not checked (...)")."""
        return [(f.field, show(f.expected), show(f.observed),
                 "skipped: %s" % f.skipped if f.skipped else "pending" if f.pending
                 else "not checked (%s)" % f.not_checked if f.not_checked else "ok" if f.ok else "DRIFT")
                for f in self.fields]


def show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def _get(data: Any, *path: str) -> Any:
    node = data
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def package_ok(expected: Optional[str], observed: Optional[str]) -> bool:
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


def framework_cuda(report: Mapping[str, Any]) -> Optional[str]:
    """CUDA in use: the framework's build; else the CUDA runtime wheel; with no framework at all,
    the toolkit (nvcc). A CPU-only framework build means no CUDA."""
    if report.get("framework"):
        return major_minor(_get(report, "framework", "cuda") or report.get("cuda_runtime"))
    return major_minor(report.get("cuda_runtime") or report.get("cuda_toolkit"))


def report_packages(report: Mapping[str, Any]) -> Dict[str, str]:
    """The report's packages, {name: version} (schema 1: ``StackReport.packages``); none when ``packages`` is
    anything else (a list from an older agent or a hand-edited report: ``stack.packages`` says so)."""
    packages = report.get("packages")
    if not isinstance(packages, Mapping):
        return {}
    return dict(packages)


def _bad_packages(report: Mapping[str, Any]) -> Optional[str]:
    """What ``packages`` is when it is present and not the schema's object, else None."""
    packages = report.get("packages")
    if packages is None or isinstance(packages, Mapping):
        return None
    return "a JSON %s, not an object {name: version}" % ("array" if isinstance(packages, (list, tuple)) else type(packages).__name__)


def report_cudnn(report: Mapping[str, Any]) -> Optional[str]:
    """The cuDNN in use, as precisely as the report proves it (see ``report.refine_cudnn``)."""
    return refine_cudnn(_get(report, "framework", "cudnn"), [cudnn_wheel(report_packages(report)), normalize_cudnn(report.get("cudnn"))])


def _packages(report: Mapping[str, Any]) -> Dict[str, str]:
    return {_canonical(str(k)): v for k, v in report_packages(report).items()}


def _stack_fields(stack: Mapping[str, Any], report: Mapping[str, Any]) -> Iterable[FieldResult]:
    cuda = stack.get("cuda")
    if cuda:
        observed_cuda = framework_cuda(report)
        yield FieldResult("stack.cuda", cuda, observed_cuda, major_minor(str(cuda)) == observed_cuda)
    if stack.get("cudnn"):
        observed_cudnn = report_cudnn(report)
        yield FieldResult("stack.cudnn", stack["cudnn"], observed_cudnn, versions.matches_at_precision(str(stack["cudnn"]), observed_cudnn))
    if stack.get("cuda_toolkit"):
        toolkit = report.get("cuda_toolkit")
        ok = toolkit is not None and (not cuda or major_minor(toolkit) == major_minor(str(cuda)))
        yield FieldResult("stack.cuda_toolkit", major_minor(str(cuda)) if cuda else True, toolkit, ok)
    if stack.get("python"):
        yield FieldResult("stack.python", stack["python"], report.get("python"), str(stack["python"]) == report.get("python"))
    bad = _bad_packages(report)
    if bad:
        yield FieldResult("stack.packages", "an object {name: version}", bad, False)
    observed = _packages(report)
    for name, expected in stack.get("packages") or []:
        yield FieldResult("stack.packages.%s" % name, expected, observed.get(name), package_ok(expected, observed.get(name)))
    for name, expected in stack.get("lock") or []:
        yield FieldResult("lock.packages.%s" % name, expected, observed.get(name), package_ok(str(expected), observed.get(name)))
    want = stack.get("framework")
    if want:
        fw = report.get("framework") or {}
        seen = "%s %s" % (fw.get("name"), fw.get("version")) if fw.get("name") else None
        ok = fw.get("name") == want["name"] and versions.equal(str(want["version"]), str(fw.get("version")))
        yield FieldResult("stack.framework", "%s %s" % (want["name"], want["version"]), seen, ok)
        if want.get("gpu") and fw.get("name"):  # (a framework that does not import is drift above)
            yield FieldResult("stack.framework.gpu", True, bool(fw.get("cuda_available")), bool(fw.get("cuda_available")))


def _gpu_fields(stack: Mapping[str, Any], hardware: Mapping[str, Any], report: Mapping[str, Any], tolerance: float) -> Iterable[FieldResult]:
    if stack.get("driver"):
        yield FieldResult("stack.driver", stack["driver"], report.get("driver"), str(stack["driver"]) == report.get("driver"))
    allowed = hardware.get("gpu")
    min_mem = hardware.get("min_gpu_memory_gib")
    count = int(hardware.get("gpu_count") or 0)
    if not count and not allowed and not min_mem:
        return
    gpus = [(canonical_gpu_name(str(g.get("name", "")), g.get("memory_mib")), int(g.get("memory_mib") or 0)) for g in report.get("gpus") or []]
    allowed_keys = {str(a).lower() for a in allowed} if allowed else None

    def name_ok(name: str) -> bool:
        return allowed_keys is None or name.lower() in allowed_keys

    best = sorted(gpus, key=lambda g: (name_ok(g[0]), g[1]), reverse=True)[: max(count, 1)]
    yield FieldResult("hardware.gpu_count", count, len(gpus), len(gpus) >= count)
    if allowed:
        names = sorted({n for n, _ in best})
        yield FieldResult("hardware.gpu", list(allowed), names, bool(best) and all(name_ok(n) for n, _ in best))
    if min_mem:
        smallest = min((m for _, m in best), default=None)
        observed = round(smallest / 1024, 1) if smallest is not None else None
        ok = smallest is not None and smallest >= float(min_mem) * 1024 * tolerance
        yield FieldResult("hardware.min_gpu_memory_gib", min_mem, observed, ok)


def _host_fields(stack: Mapping[str, Any], hardware: Mapping[str, Any], report: Mapping[str, Any], tolerance: float) -> Iterable[FieldResult]:
    if stack.get("os"):
        os_id, os_ver = _get(report, "os", "id"), _get(report, "os", "version")
        observed = "%s-%s" % (os_id, os_ver) if os_id and os_ver else None
        yield FieldResult("stack.os", stack["os"], observed, observed == stack["os"])
    if hardware.get("min_vcpus"):
        cpus = _get(report, "cpu", "count")
        yield FieldResult("hardware.min_vcpus", hardware["min_vcpus"], cpus, cpus is not None and int(cpus) >= int(hardware["min_vcpus"]))
    if hardware.get("min_memory_gib"):
        mem = report.get("memory_gib")
        yield FieldResult("hardware.min_memory_gib", hardware["min_memory_gib"], mem,
                          mem is not None and float(mem) >= float(hardware["min_memory_gib"]) * tolerance)
    if hardware.get("local_nvme"):
        kind = _get(report, "disk", "kind")
        yield FieldResult("hardware.local_nvme_gib", "nvme", kind, kind == "nvme")


def _container_fields(stack: Mapping[str, Any], report: Mapping[str, Any]) -> Iterable[FieldResult]:
    container = stack.get("container")
    if not container:
        return
    digest = container.get("digest")
    seen = report.get("container") or {}
    yield FieldResult("stack.container.digest", digest, seen.get("digest"), digest is not None and seen.get("digest") == digest)
    fw = report.get("framework") or {}
    yield FieldResult("stack.container.gpu", True, bool(fw.get("cuda_available")), bool(fw.get("cuda_available")))
    facts = container.get("facts") or {}
    if facts.get("framework"):
        name, version = facts["framework"]
        observed = "%s %s" % (fw.get("name"), fw.get("version")) if fw else None
        yield FieldResult("stack.container.framework", "%s %s" % (name, version), observed, observed == "%s %s" % (name, version))
    if facts.get("cuda"):
        observed_cuda = framework_cuda(report)
        yield FieldResult("stack.container.cuda", facts["cuda"], observed_cuda, observed_cuda == major_minor(facts["cuda"]))
    declared = facts.get("cudnn")
    if declared:  # the image declares it (CUDNN_VERSION); the report proves it at its own precision
        observed_cudnn = report_cudnn(report)
        n = len(observed_cudnn.split(".")) if observed_cudnn else 0
        ok = observed_cudnn is not None and declared.split(".")[:n] == observed_cudnn.split(".")
        yield FieldResult("stack.container.cudnn", declared, observed_cudnn, ok)


def _report_fields(expectation: Mapping[str, Any], report: Mapping[str, Any]) -> Iterable[FieldResult]:
    # which commit of each team source the VM was built from (informational: always ok)
    for s in expectation.get("sources") or []:
        yield FieldResult("source.%s" % s.get("name"), "%s %s" % (s.get("url"), s.get("ref")), s.get("commit"), True)
    for d in report.get("data") or []:
        yield FieldResult("data[%s]" % d.get("dest"), "staged", d.get("status"), d.get("status") == "staged")


def _skip_gpuless(fields: List[FieldResult], hardware: Mapping[str, Any]) -> List[FieldResult]:
    """``verify --local`` on a machine without an NVIDIA GPU (a laptop, a CI runner): a driver and a
    framework's GPU access cannot be observed, and a profile that names no GPU (what ``capture`` writes
    there) is only held to the GPU count it defaults to on a VM. Those fields are skipped, visibly; a
    profile that names a GPU or its memory still drifts."""
    explicit = hardware.get("gpu") or hardware.get("min_gpu_memory_gib")
    out = []
    for f in fields:
        if f.field in ("stack.driver", "stack.framework.gpu") or (f.field == "hardware.gpu_count" and not explicit):
            f = FieldResult(f.field, f.expected, f.observed, False, skipped=GPULESS)
        out.append(f)
    return out


def rehearsal(expectation: Mapping[str, Any], report: Mapping[str, Any]) -> bool:
    """Whether the machine is a rehearsal's (no GPU): the VM's expectation says so (expected.json), or its report's
    status is ``rehearsed``."""
    return bool(expectation.get("rehearsal")) or report.get("status") == "rehearsed"


def _not_checked(fields: List[FieldResult]) -> List[FieldResult]:
    """A rehearsal's GPU facts: not checked (the machine has no GPU), whatever the report holds."""
    return [FieldResult(f.field, f.expected, None, False, not_checked=REHEARSAL) if f.field in GPU_FIELDS else f
            for f in fields]


def judge(expectation: Mapping[str, Any], report: Mapping[str, Any], groups: Sequence[str] = GROUPS) -> List[FieldResult]:
    """The fields of ``groups`` (report, gpu, stack, host, container) for a report, whatever its status."""
    stack = expectation.get("stack") or {}
    hardware = expectation.get("hardware") or {}
    tolerance = float(expectation.get("tolerance") or 1.0)
    parts = {
        "report": lambda: _report_fields(expectation, report),
        "gpu": lambda: _gpu_fields(stack, hardware, report, tolerance),
        "stack": lambda: _stack_fields(stack, report),
        "host": lambda: _host_fields(stack, hardware, report, tolerance),
        "container": lambda: _container_fields(stack, report),
    }
    fields = [f for g in ("gpu", "stack", "host", "container", "report") if g in groups for f in parts[g]()]
    if rehearsal(expectation, report):
        return _not_checked(fields)
    if report.get("source") == "local" and not report.get("gpus") and report.get("driver") is None:
        fields = _skip_gpuless(fields, hardware)
    return fields


def compare(expectation: Mapping[str, Any], report: Optional[Mapping[str, Any]]) -> VerifyResult:
    """Judge a report (the schema-1 document) against an expectation (``provisioner.verify.expect``)."""
    if not isinstance(expectation, Mapping) or not isinstance(expectation.get("stack"), Mapping):
        raise ValueError("compare() needs an expectation (with its stack); refusing to judge a report against nothing")
    if report is None:
        waiting = "provisioning (no report from the startup script yet)"
        return VerifyResult("provisioning", (FieldResult("status", "ready", None, False, pending=waiting),))
    status = str(report.get("status") or "")
    parts = status.split(":")
    state, phase = parts[0], (parts[1] if len(parts) > 1 else None)
    line = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
    status_field = FieldResult("status", "ready", status, state == "ready" and bool(STATUS_RE.match(status)))
    if state == "rehearsed":  # the script ran every phase, and its GPU gate could check no GPU: not ready, not drift
        status_field = FieldResult("status", "ready", status, False, not_checked=REHEARSAL)
    if state == "running":
        pending = FieldResult("status", "ready", status, False, pending="provisioning (phase %s)" % phase)
        return VerifyResult("provisioning", (pending,), phase=phase)
    fields = judge(expectation, report)
    sources = [f for f in fields if f.field.startswith("source.")]
    rest = [f for f in fields if not f.field.startswith("source.") and not f.field.startswith("data[")]
    data = [f for f in fields if f.field.startswith("data[")]
    ordered = (status_field, *sources, *_ordered(rest), *data)
    if state == "failed":
        return VerifyResult("failed", ordered, phase=phase, line=line, message=report.get("error"))
    if any(f.drifted for f in ordered):
        return VerifyResult("drift", ordered)
    return VerifyResult("rehearsed" if rehearsal(expectation, report) else "match", ordered)


_ORDER = ("stack.os", "stack.driver", "stack.cuda", "stack.cudnn", "stack.cuda_toolkit", "stack.python", "stack.packages",
          "stack.framework", "lock.packages.", "hardware.gpu", "hardware.min_gpu", "hardware.min_vcpus", "hardware.min_memory",
          "hardware.local_nvme", "stack.container.")


def _ordered(fields: List[FieldResult]) -> List[FieldResult]:
    """verify's row order: the stack as the profile lists it, the lock, the hardware, the container."""
    def rank(f: FieldResult) -> int:
        return next((i for i, p in enumerate(_ORDER) if f.field.startswith(p)), len(_ORDER))
    return sorted(fields, key=rank)
