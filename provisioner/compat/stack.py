"""What a profile's pinned packages mean for CUDA: which torch/TensorFlow/JAX build is installed,
the CUDA it targets, its bundled cuDNN and the GPU architectures it carries code for."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from provisioner.compat.facts import (
    ArchTarget,
    Facts,
    JaxExtra,
    TensorflowRelease,
    TorchRelease,
    TorchVariant,
    variant_cuda,
)


@dataclass(frozen=True, slots=True)
class Framework:
    """One CUDA-using framework found among the pins."""

    name: str  # torch | tensorflow | jax
    index: int  # position in stack.packages (for messages)
    version: Version
    cuda: str | None  # major.minor the build targets (None = unknown / CPU)
    cudnn: str | None  # bundled cuDNN when recorded
    python: tuple[str, ...] | None  # supported Python minors (None = not recorded)
    glibc: str | None
    arch: tuple[ArchTarget, ...] | None = None  # SASS/PTX targets of the build (None = not recorded)
    arch_source: str | None = None
    min_cc: tuple[int, int] | None = None  # tf/jax: oldest compute capability
    torch_release: TorchRelease | None = None
    torch_variant: TorchVariant | None = None
    local_label: str | None = None
    tf_release: TensorflowRelease | None = None
    tf_and_cuda: bool = False
    jax_extra: JaxExtra | None = None

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


def _pin(raw: str) -> tuple[str, set[str], Version]:
    req = Requirement(raw)
    spec = next(iter(req.specifier))
    return canonicalize_name(req.name), set(req.extras), Version(spec.version)


def frameworks(packages: list[str], facts: Facts) -> list[Framework]:
    """Frameworks in the pins, in pin order. Unknown releases come back with ``cuda=None``."""
    found: list[Framework] = []
    for i, raw in enumerate(packages):
        name, extras, version = _pin(raw)
        if name == "torch":
            rel = facts.torch_release(version)
            label = version.local
            variant = None
            if rel is not None:
                key = label if label else rel.pypi_default
                variant = rel.variants.get(key) if key else None
            cuda = variant.cuda if variant else (variant_cuda(label) if label and label.startswith("cu") else None)
            found.append(
                Framework(
                    "torch", i, version, cuda, variant.cudnn if variant else None,
                    rel.python if rel else None, rel.glibc if rel else None,
                    arch=variant.arch if variant else None, arch_source=variant.arch_source if variant else None,
                    torch_release=rel, torch_variant=variant, local_label=label,
                )
            )
        elif name in ("tensorflow", "tensorflow-gpu", "tensorflow-cpu"):
            tf = facts.tf_release(version)
            found.append(
                Framework(
                    "tensorflow", i, version, tf.cuda if tf and name != "tensorflow-cpu" else None,
                    tf.cudnn if tf else None, tf.python if tf else None, tf.glibc if tf else None,
                    arch=tf.arch if tf and name != "tensorflow-cpu" else None, arch_source=tf.arch_source if tf else None,
                    min_cc=tf.min_cc if tf else None, tf_release=tf, tf_and_cuda="and-cuda" in extras,
                )
            )
        elif name == "jax":
            extra = next((facts.jax_extras[e] for e in sorted(extras) if e in facts.jax_extras), None)
            python_min = None
            for spec, floor in facts.jax_python_floor:
                if version in SpecifierSet(spec):
                    python_min = floor
                    break
            pys = tuple(f"3.{m}" for m in range(int(python_min.split(".")[1]), 16)) if python_min else None
            found.append(
                Framework(
                    "jax", i, version, None, None, pys, facts.jax_glibc,
                    arch=extra.arch if extra else None, arch_source=extra.arch_source if extra else None,
                    min_cc=extra.min_cc if extra else None, jax_extra=extra,
                )
            )
    return found


def effective_cuda(stack_cuda: str | None, found: list[Framework] | tuple[Framework, ...]) -> str | None:
    """The CUDA a stack runs: ``stack.cuda`` when written, else the first pinned framework build that targets one
    (torch +cu124 -> 12.4); None when neither says. The one computation of it (issue 26): validate's rules, the
    render (``LoadedProfile.resolved.cuda``) and verify's expectation all read this."""
    return stack_cuda or next((fw.cuda for fw in found if fw.cuda), None)


def sass_or_ptx_covers(targets: tuple[ArchTarget, ...], cc: tuple[int, int]) -> str | None:
    """How a build with ``targets`` runs on compute capability ``cc``; None when it cannot.

    SASS for sm_XY runs on the same major X with minor >= Y (binary compatibility); arch-specific SASS
    (sm_90a, sm_100a) only on exactly X.Y; PTX for compute_XY is JIT-compiled by the driver for any
    cc >= XY (slower first start). Sources: cuda.yaml ``binary_compat``."""
    for t in targets:
        major, minor = divmod(t.sm, 10)
        if major == cc[0] and (minor == cc[1] if t.specific else minor <= cc[1]):
            return f"sm_{t.sm}{'a' if t.specific else ''} SASS"
    for t in targets:
        if t.ptx and not t.specific and divmod(t.sm, 10) <= cc:
            return f"compute_{t.sm} PTX (JIT)"
    return None
