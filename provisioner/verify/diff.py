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
from typing import TypedDict

from packaging.utils import canonicalize_name

from provisioner.probe.gpu import canonical_gpu_name, nominal_memory_gib
from provisioner.probe.report import major_minor
from provisioner.verify.compare import framework_cuda, parse_pin, report_cudnn

# Report fields that always differ between two runs and say nothing about the stack.
_VOLATILE = ("notes", "disk.free_gib")
_PROJECTED = ("hardware.gpu", "hardware.gpu_count", "hardware.min_gpu_memory_gib", "hardware.min_vcpus",
              "hardware.min_memory_gib", "stack.os", "stack.driver", "stack.cuda", "stack.cudnn",
              "stack.cuda_toolkit", "stack.python")


class Difference(TypedDict):
    """One row of ``diff``: the dotted field and its value on each side (None: absent)."""

    field: str
    a: object
    b: object


def _mapping(value: object) -> Mapping[str, object]:
    """A nested part of a profile or report document, {} when it is absent (or not an object)."""
    return value if isinstance(value, Mapping) else {}


def _objects(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _int(value: object) -> int | None:
    """A number of the document (a JSON number, or a number written as a string), None when absent or not one."""
    try:
        return int(value) if isinstance(value, int | float | str) else None
    except ValueError:
        return None


def is_report(doc: Mapping[str, object]) -> bool:
    """Reports carry ``schema``/``status``/``gpus``; profiles carry ``name``/``stack``/``hardware``."""
    if "stack" in doc or "hardware" in doc:
        return False
    return any(k in doc for k in ("schema", "status", "gpus", "packages"))


def project_report(report: Mapping[str, object]) -> dict[str, object]:
    """A report as profile-shaped fields (the pins and requirements this machine satisfies exactly)."""
    gpus = _objects(report.get("gpus"))
    names = sorted({canonical_gpu_name(str(g.get("name")), _int(g.get("memory_mib"))) for g in gpus})
    hardware: dict[str, object] = {"gpu": names or None, "gpu_count": len(gpus)}
    if gpus:
        hardware["min_gpu_memory_gib"] = min(nominal_memory_gib(str(g.get("name")), _int(g.get("memory_mib")) or 0)
                                             for g in gpus)
    cpu = _mapping(report.get("cpu")).get("count")
    hardware["min_vcpus"] = cpu
    mem = report.get("memory_gib")
    hardware["min_memory_gib"] = _int(mem)
    os_info = _mapping(report.get("os"))
    stack = {
        "os": f"{os_info.get('id')}-{os_info.get('version')}" if os_info.get("id") else None,
        "driver": report.get("driver"),
        "cuda": framework_cuda(report),
        "cudnn": report_cudnn(report),
        "cuda_toolkit": report.get("cuda_toolkit") is not None,
        "python": report.get("python"),
        "packages": [f"{k}=={v}" for k, v in sorted(_mapping(report.get("packages")).items())],
    }
    return {"hardware": hardware, "stack": stack}


def _key_of(item: Mapping[str, object]) -> str | None:
    for key in ("dest", "name"):
        if isinstance(item.get(key), str):
            return str(item[key])
    return None


def flatten(doc: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """Nested dicts -> {dotted path: scalar or list of scalars}."""
    flat: dict[str, object] = {}
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
            flat[path] = (sorted(value) if isinstance(value, list) else [value]) if value else None
        elif isinstance(value, Mapping):
            flat.update(flatten(value, path + "."))
        elif isinstance(value, list) and value and len(items := _objects(value)) == len(value):
            keys = [_key_of(v) for v in items]
            unique = None not in keys and len(set(keys)) == len(keys) and path != "gpus"
            for index, item in enumerate(items):
                flat.update(flatten(item, f"{path}[{keys[index] if unique else index}]."))
        else:
            flat[path] = value
    return flat


def _drop_volatile(flat: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in flat.items()
            if not (k in _VOLATILE or k.startswith("notes") or (k.startswith("phases.") and k.endswith(".seconds")))}


def _same(field: str, a: object, b: object) -> bool:
    if a == b:
        return True
    if field == "stack.cudnn" and a is not None and b is not None:
        want, got = str(a).split("."), str(b).split(".")
        n = min(len(want), len(got))
        return want[:n] == got[:n]
    if field == "stack.cuda" and a is not None and b is not None:
        return major_minor(str(a)) == major_minor(str(b))
    return False


def diff(a: Mapping[str, object], b: Mapping[str, object]) -> list[Difference]:
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
    out = [Difference(field=k, a=fa.get(k), b=fb.get(k)) for k in keys if not _same(k, fa.get(k), fb.get(k))]
    return sorted(out, key=lambda d: d["field"])
