"""diff A B: field-by-field difference of two profiles, two reports, or a profile and a report.

Documents are flattened to dotted paths (``stack.driver``, ``hardware.gpu_count``); profile
packages become ``stack.packages.<canonical name>`` and report packages ``packages.<name>``, so
packages are compared by name, not by list position. ``data`` entries are keyed by ``dest``.

A profile and a report are compared after projecting the report into profile fields (what a
``capture`` of that machine would pin); only the fields a report can speak to are compared, and
only the fields and packages the profile sets. cuDNN is compared at the profile's precision.
Descriptive, not a verdict: ``verify`` judges requirements (>=), ``diff`` shows every difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.utils import canonicalize_name

from provisioner.probe.gpu import canonical_gpu_name, nominal_memory_gib
from provisioner.probe.report import major_minor
from provisioner.verify.compare import framework_cuda, parse_pin, report_cudnn

# Report fields that always differ between two runs and say nothing about the stack.
_VOLATILE = ("notes", "disk.free_gib")
_PROJECTED = ("hardware.gpu", "hardware.gpu_count", "hardware.min_gpu_memory_gib", "hardware.min_vcpus",
              "hardware.min_memory_gib", "stack.os", "stack.driver", "stack.cuda", "stack.cudnn",
              "stack.cuda_toolkit", "stack.python")


def is_report(doc: Mapping[str, Any]) -> bool:
    """Reports carry ``schema``/``status``/``gpus``; profiles carry ``name``/``stack``/``hardware``."""
    if "stack" in doc or "hardware" in doc:
        return False
    return any(k in doc for k in ("schema", "status", "gpus", "packages"))


def project_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """A report as profile-shaped fields (the pins and requirements this machine satisfies exactly)."""
    gpus = report.get("gpus") or []
    names = sorted({canonical_gpu_name(str(g.get("name")), g.get("memory_mib")) for g in gpus})
    hardware: dict[str, Any] = {"gpu": names or None, "gpu_count": len(gpus)}
    if gpus:
        hardware["min_gpu_memory_gib"] = min(nominal_memory_gib(str(g.get("name")), int(g.get("memory_mib") or 0))
                                             for g in gpus)
    cpu = (report.get("cpu") or {}).get("count")
    hardware["min_vcpus"] = cpu
    mem = report.get("memory_gib")
    hardware["min_memory_gib"] = int(mem) if mem is not None else None
    os_info = report.get("os") or {}
    stack = {
        "os": f"{os_info.get('id')}-{os_info.get('version')}" if os_info.get("id") else None,
        "driver": report.get("driver"),
        "cuda": framework_cuda(report),
        "cudnn": report_cudnn(report),
        "cuda_toolkit": report.get("cuda_toolkit") is not None,
        "python": report.get("python"),
        "packages": [f"{k}=={v}" for k, v in sorted((report.get("packages") or {}).items())],
    }
    return {"hardware": hardware, "stack": stack}


def _key_of(item: Mapping[str, Any]) -> str | None:
    for key in ("dest", "name"):
        if isinstance(item.get(key), str):
            return str(item[key])
    return None


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> {dotted path: scalar or list of scalars}."""
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        path = f"{prefix}{key}"
        if path == "stack.packages" and isinstance(value, list):
            for pin in value:
                name, version = parse_pin(str(pin))
                flat[f"{path}.{name}"] = version
        elif path == "packages" and isinstance(value, Mapping):
            for name, version in value.items():
                flat[f"packages.{canonicalize_name(str(name))}"] = version
        elif path == "hardware.gpu":
            flat[path] = sorted([value] if isinstance(value, str) else value) if value else None
        elif isinstance(value, Mapping):
            flat.update(flatten(value, path + "."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            keys = [_key_of(v) for v in value]
            unique = None not in keys and len(set(keys)) == len(keys) and path != "gpus"
            for index, item in enumerate(value):
                flat.update(flatten(item, f"{path}[{keys[index] if unique else index}]."))
        else:
            flat[path] = value
    return flat


def _drop_volatile(flat: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in flat.items()
            if not (k in _VOLATILE or k.startswith("notes") or (k.startswith("phases.") and k.endswith(".seconds")))}


def _same(field: str, a: Any, b: Any) -> bool:
    if a == b:
        return True
    if field == "stack.cudnn" and a is not None and b is not None:
        want, got = str(a).split("."), str(b).split(".")
        n = min(len(want), len(got))
        return want[:n] == got[:n]
    if field == "stack.cuda" and a is not None and b is not None:
        return major_minor(str(a)) == major_minor(str(b))
    return False


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """[{field, a, b}] for every field that differs, sorted by field."""
    a_report, b_report = is_report(a), is_report(b)
    if a_report != b_report:
        pa = project_report(a) if a_report else a
        pb = project_report(b) if b_report else b
        fa, fb = flatten(pa), flatten(pb)
        profile_flat = fb if a_report else fa
        pinned = {k for k in profile_flat if k.startswith("stack.packages.")}
        keys = [k for k in _PROJECTED if profile_flat.get(k) not in (None, False, [], "")] + sorted(pinned)
    else:
        fa, fb = flatten(a), flatten(b)
        if a_report:
            fa, fb = _drop_volatile(fa), _drop_volatile(fb)
        keys = sorted(set(fa) | set(fb))
    out = [{"field": k, "a": fa.get(k), "b": fb.get(k)} for k in keys if not _same(k, fa.get(k), fb.get(k))]
    return sorted(out, key=lambda d: d["field"])
