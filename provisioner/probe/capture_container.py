"""``capture --container IMAGE``: a profile for a workstation that trains in a container.

The host part (hardware, OS, driver) comes from the usual probe (``provisioner.probe.capture``); the
stack is the image, pinned by digest: the digest docker recorded when it pulled the image here
(``docker image inspect``), else the registry's answer for the tag, else the tag alone with a
warning (``up`` refuses it). With the image's facts known, a workstation whose driver is older
than the image's CUDA needs is said to rely on forward compatibility, which clouds give only on
data-center GPUs and on some driver branches."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from provisioner.compat.facts import load_facts
from provisioner.container.reference import parse_image_ref
from provisioner.container.registry import RegistryError, resolve_image
from provisioner.container.store import lookup, record
from provisioner.errors import InputError
from provisioner.output import emit_json, escape, notice, stderr_console, write_output
from provisioner.probe import report as host_probe  # called through the module: tests replace report.probe
from provisioner.probe.capture import build_profile, comment_block, to_yaml
from provisioner.probe.gpu import is_consumer


def local_digest(image: str) -> str | None:
    """The registry digest docker recorded for ``image`` on this machine (None without docker)."""
    try:
        proc = subprocess.run(["docker", "image", "inspect", image], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    try:
        digests = json.loads(proc.stdout)[0].get("RepoDigests") or []
    except (ValueError, IndexError, AttributeError):
        return None
    ref = parse_image_ref(image)
    for entry in digests:
        try:
            seen = parse_image_ref(str(entry))
        except ValueError:
            continue
        if (seen.registry, seen.repository) == (ref.registry, ref.repository) and seen.digest:
            return seen.digest
    return None


def container_stack(image: str, host_stack: Mapping[str, Any], warnings: list[str], *, resolve: bool = True) -> tuple[dict[str, Any], Any]:
    """(stack with ``container``, the image's facts or None)."""

    try:
        ref = parse_image_ref(image)
    except ValueError as exc:

        raise InputError(f"--container: {exc}") from None
    digest = ref.digest or local_digest(image)
    facts = lookup(digest) if digest else None
    if facts is None and resolve:
        try:
            facts = resolve_image(str(ref.with_digest(digest)) if digest else image)
            record(facts)
            digest = digest or facts.digest
        except RegistryError as exc:
            warnings.append(f"could not read {image} from its registry ({exc}); the image's CUDA and arch list are not checked")
    pinned = str(ref.with_digest(digest)) if digest else str(ref)
    if not digest:
        warnings.append(f"{image}: no digest known (not pulled here, registry unreachable); `up` refuses a tag: pin it with `trainvm validate --resolve-image`")
    stack = {k: host_stack[k] for k in ("os", "driver") if k in host_stack}
    stack["container"] = {"image": pinned}
    return stack, facts


def forward_compat_warning(driver: str | None, gpu_is_datacenter: bool, facts: Any) -> str | None:


    if not driver or facts is None or not facts.cuda:
        return None
    rel = load_facts().cuda_releases.get(facts.cuda)
    if rel is None or Version(driver) >= Version(rel.min_driver):
        return None
    where = "" if gpu_is_datacenter else " (a workstation GPU: NVIDIA supports forward compatibility only on data-center GPUs)"
    return (f"this workstation runs CUDA {facts.cuda} (the image's) on driver {driver}, older than {rel.min_driver}: it relies on "
            f"forward compatibility{where}; on the cloud that works only on data-center GPUs and some driver branches; "
            f"consider stack.driver >= {rel.min_driver}")


def run_capture_container(*, image: str, out: Any, name: str | None, data: str | None, json_out: bool) -> int:
    """``trainvm capture --container IMAGE``: the host probe plus the image as the stack."""


    if data is not None and not Path(data).exists():
        raise InputError(f"--data: {data} does not exist")
    report = host_probe.probe(data_path=data or ".")
    profile, _comment, warnings = build_profile(report, name or "workstation")
    # the host's Python stack is not what runs: drop its warnings about packages/frameworks
    warnings = [w for w in warnings if not any(k in w for k in ("framework", "CPU-only", "nvcc", "pip", "conda", "packag"))]
    stack, facts = container_stack(image, profile["stack"], warnings)
    profile["stack"] = stack
    gpus = report.get("gpus") or []
    consumer = any(is_consumer(str(g.get("name", ""))) for g in gpus)
    note = forward_compat_warning(report.get("driver"), bool(gpus) and not consumer, facts)
    if note:
        warnings.append(note)
    text = to_yaml(profile, comment_block(report, profile, warnings))
    err = stderr_console()
    for w in warnings:
        notice("warning", escape(w))
    if json_out:
        emit_json(profile)
    elif out is None:

        sys.stdout.write(text)
    if out is not None:

        write_output(Path(out), text, "-o")
        err.print(f"wrote {out}")
    return 0
