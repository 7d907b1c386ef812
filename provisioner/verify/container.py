"""Verify rules for container stacks (``stack.container``), used by ``compare``:

- ``stack.container.digest``: the image the VM pulled carries the pinned digest (the report's
  ``container.digest`` is set only when docker's RepoDigests include it).
- ``stack.container.gpu``: the framework inside the container sees the GPU.
- With the image's facts known (``provisioner.container.store``: recorded by ``lock`` or
  ``--resolve-image``): the framework version, CUDA major.minor and cuDNN seen *inside* the
  container equal what the image's config declares (PYTORCH_VERSION/TENSORFLOW_VERSION,
  CUDA_VERSION, CUDNN_VERSION at the precision the report gives).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def container_fields(stack: Mapping[str, Any], report: Mapping[str, Any]) -> Iterable[Any]:
    from provisioner.container.reference import parse_image_ref
    from provisioner.container.store import lookup
    from provisioner.probe.report import major_minor
    from provisioner.verify.compare import FieldResult, framework_cuda, report_cudnn

    container = stack.get("container")
    if not container:
        return
    try:
        digest = parse_image_ref(str(container.get("image", ""))).digest
    except ValueError:
        digest = None
    seen = report.get("container") or {}
    yield FieldResult("stack.container.digest", digest, seen.get("digest"), digest is not None and seen.get("digest") == digest)
    fw = report.get("framework") or {}
    yield FieldResult("stack.container.gpu", True, bool(fw.get("cuda_available")), bool(fw.get("cuda_available")))
    facts = lookup(digest) if digest else None
    if facts is None:
        return
    if facts.framework is not None:
        name, version = facts.framework
        observed = f"{fw.get('name')} {fw.get('version')}" if fw else None
        yield FieldResult("stack.container.framework", f"{name} {version}", observed, observed == f"{name} {version}")
    if facts.cuda:
        observed_cuda = framework_cuda(report)
        yield FieldResult("stack.container.cuda", facts.cuda, observed_cuda, observed_cuda == major_minor(facts.cuda))
    declared = facts.env.get("CUDNN_VERSION")
    if declared:
        observed_cudnn = report_cudnn(report)
        n = len(observed_cudnn.split(".")) if observed_cudnn else 0
        ok = observed_cudnn is not None and declared.split(".")[:n] == observed_cudnn.split(".")
        yield FieldResult("stack.container.cudnn", declared, observed_cudnn, ok)
