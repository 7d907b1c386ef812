"""The expectation: what a machine must show to match a profile, with the compatibility facts applied.

``expected_record(profile)`` turns a resolved profile (``model_dump(mode="json")``, optionally with the
stored lock as ``lock.packages``) into a typed, frozen ``records.Expectation``; ``expectation(profile)`` is
its document, the agent's ``compare`` judges a report
against (``provisioner.agent.compare``). The workstation builds it for ``verify NAME`` and
``verify --local``; the renderer writes the same document into the VM's expected.json
(``provisioner.render.context``), so the ready gate and ``verify`` judge by one rule set.

What the facts add: the effective CUDA (``stack.cuda``, else the CUDA the pinned framework build
targets), the framework and its version (from the pins), the GPU count a profile implies, the
nominal-memory tolerance, and a container image's declared framework/CUDA/cuDNN when known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from provisioner.compat.facts import NOMINAL_TOLERANCE, load_facts
from provisioner.compat.stack import effective_cuda, frameworks
from provisioner.container.reference import parse_image_ref
from provisioner.verify.records import (
    SCHEMA,
    ContainerFacts,
    Expectation,
    ExpectedContainer,
    ExpectedFramework,
    ExpectedHardware,
    ExpectedStack,
    SourceRef,
)

if TYPE_CHECKING:
    from provisioner.compat.stack import Framework
    from provisioner.container.reference import ImageRef
    from provisioner.profile.resolved import Resolved

__all__ = ["SCHEMA", "allowed_gpus", "expectation", "expected_record", "parse_pin"]


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


def _mapping(value: object) -> Mapping[str, object]:
    """A nested part of the profile document, {} when absent (the document is a ``model_dump``: it is an object)."""
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def allowed_gpus(hardware: Mapping[str, object]) -> list[str] | None:
    gpu = hardware.get("gpu")
    if gpu is None or gpu == []:
        return None
    return [gpu] if isinstance(gpu, str) else [str(g) for g in _list(gpu)]


def _framework(packages: Iterable[str]) -> Framework | None:
    """The framework the pins install (compat facts), or None (also for pins the facts cannot parse)."""
    try:
        return next(iter(frameworks(list(packages), load_facts())), None)
    except Exception:  # noqa: BLE001 - a report-only diff may carry pins the facts cannot parse
        return None


def _framework_cuda_of_pins(packages: Iterable[str]) -> str | None:
    """The CUDA the pinned framework build targets (torch +cu124 -> 12.4), as `validate` derives it
    when a profile leaves stack.cuda out."""
    try:
        return effective_cuda(None, frameworks(list(packages), load_facts()))
    except Exception:  # noqa: BLE001
        return None


def _container(stack: Mapping[str, object], ref: ImageRef | None = None) -> ExpectedContainer | None:
    """``ref``: the image reference as the profile's record parsed it; parsed here (a document, no record) when not given."""
    container = _mapping(stack.get("container"))
    if not container:
        return None
    from provisioner.container.store import (
        lookup,  # lazy: startup (plan --json renders the expectation; the store is off that path)
    )

    try:
        digest = (ref or parse_image_ref(str(container.get("image", "")))).digest
    except ValueError:
        digest = None
    known = lookup(digest) if digest else None
    facts = None
    if known is not None:
        facts = ContainerFacts(framework=tuple(known.framework) if known.framework else None, cuda=known.cuda or None,
                               cudnn=known.env.get("CUDNN_VERSION") or None)
    return ExpectedContainer(image=container.get("image"), digest=digest, facts=facts)


def expectation(profile: Mapping[str, object], resolved: Resolved | None = None) -> dict[str, object]:
    """The expectation document of a resolved profile: ``expected_record(profile, resolved).as_dict()``."""
    return expected_record(profile, resolved).as_dict()


def expected_record(profile: Mapping[str, object], resolved: Resolved | None = None) -> Expectation:
    """The expectation of a resolved profile as a typed record (see the module docstring). ``resolved``: the
    profile's record (``LoadedProfile.resolved``, what the render has): its framework, effective CUDA and parsed
    image are taken from it, not derived again; a document alone (``verify`` of a stored profile) derives them here."""
    if not isinstance(profile, Mapping) or not isinstance(profile.get("stack"), Mapping):
        raise ValueError("compare() needs the resolved profile (with its stack); refusing to judge a report against nothing")
    stack, hardware = _mapping(profile["stack"]), _mapping(profile.get("hardware"))
    pins = [str(p) for p in _list(stack.get("packages"))]
    parsed = [parse_pin(p) for p in pins]
    pinned = {name for name, _ in parsed}
    lock = sorted((str(canonicalize_name(k)), str(v)) for k, v in _mapping(_mapping(profile.get("lock")).get("packages")).items())
    if resolved is not None:
        fw, cuda = (resolved.frameworks[0] if resolved.frameworks else None), resolved.cuda  # fields, no call back up
    else:
        fw = _framework(pins) if pins else None
        cuda = _str(stack.get("cuda")) or _framework_cuda_of_pins(pins)
    allowed, min_mem = allowed_gpus(hardware), hardware.get("min_gpu_memory_gib")
    count = hardware.get("gpu_count")
    if count is None:
        count = 1 if (allowed or min_mem) else 0
    framework = None
    if fw is not None:
        # a CUDA build must see the GPU; an unknown torch release is one unless its label says otherwise
        local = str(getattr(fw.version, "local", None) or "")
        gpu = bool(fw.cuda) or (fw.name == "torch" and not local.startswith(("cpu", "rocm", "xpu")))
        framework = ExpectedFramework(name=fw.name, version=str(fw.version), gpu=gpu)
    return Expectation(
        tolerance=NOMINAL_TOLERANCE,
        sources=tuple(SourceRef(**{k: s.get(k) for k in ("name", "url", "ref", "commit")})
                      for s in _list(profile.get("sources")) if isinstance(s, Mapping)),
        stack=ExpectedStack(
            os=stack.get("os"),
            driver=stack.get("driver"),
            cuda=cuda,
            cudnn=stack.get("cudnn"),
            cuda_toolkit=stack.get("cuda_toolkit") is True,
            python=stack.get("python"),
            packages=tuple(parsed),
            lock=tuple((n, v) for n, v in lock if n not in pinned),
            framework=framework,
            container=_container(stack, resolved.image if resolved is not None else None),
        ),
        hardware=ExpectedHardware(
            gpu=tuple(allowed) if allowed is not None else None,
            gpu_count=int(count) if isinstance(count, int | float | str) else count,  # else: pydantic refuses it
            min_gpu_memory_gib=min_mem,
            min_vcpus=hardware.get("min_vcpus"),
            min_memory_gib=hardware.get("min_memory_gib"),
            local_nvme=_positive(hardware.get("local_nvme_gib")),
        ),
    )


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and value > 0
