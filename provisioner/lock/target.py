"""The machine a lock is for: the profile's Python on Linux x86_64 with the glibc of its OS image
(compat/data/os.yaml), the wheel tags that machine accepts, and which index serves which pin."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from provisioner.compat.facts import load_facts
from provisioner.errors import InputError

PYPI_INDEX = "https://pypi.org/simple"
TORCH_INDEX = "https://download.pytorch.org/whl/{label}"
_TORCH_LABEL = re.compile(r"cu\d{3}|cpu|rocm\d+(\.\d+)*|xpu")
# glibc minors uv's --python-platform knows (x86_64-manylinux_2_NN); others fall back to the next lower one
UV_MANYLINUX = (17, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40)
_LEGACY = {17: "manylinux2014_x86_64", 12: "manylinux2010_x86_64", 5: "manylinux1_x86_64"}


def glibc_of(os_name: str) -> str:
    image = load_facts().os_images.get(os_name)
    if image is None:
        raise InputError(f"stack.os: no facts for OS {os_name!r} in compat/data/os.yaml")
    return image.glibc


def python_platform(os_name: str) -> str:
    """uv's ``--python-platform`` for the OS image: ubuntu-22.04 (glibc 2.35) -> x86_64-manylinux_2_35."""
    minor = int(glibc_of(os_name).split(".")[1])
    usable = [m for m in UV_MANYLINUX if m <= minor]
    if not usable:
        raise InputError(f"stack.os: glibc 2.{minor} of {os_name} is older than manylinux_2_17")
    return f"x86_64-manylinux_2_{usable[-1]}"


def target_tags(python: str, os_name: str) -> list[Tag]:
    """Every wheel tag the target accepts, most specific first (what pip/uv would pick on the VM)."""
    major, minor = (int(x) for x in python.split(".")[:2])
    glibc_minor = int(glibc_of(os_name).split(".")[1])
    platforms: list[str] = []
    for m in range(glibc_minor, 4, -1):
        platforms.append(f"manylinux_2_{m}_x86_64")
        if m in _LEGACY:
            platforms.append(_LEGACY[m])
    platforms.append("linux_x86_64")
    tags = list(cpython_tags((major, minor), abis=[f"cp{major}{minor}"], platforms=platforms))
    tags += list(compatible_tags((major, minor), interpreter=f"cp{major}{minor}", platforms=platforms))
    return tags


def best_wheel(filenames: Sequence[str], tags: Sequence[Tag]) -> int | None:
    """Index of the wheel the target installs (its best-ranked tag), or None when none fits."""
    rank = {t: i for i, t in enumerate(tags)}
    best: tuple[int, int] | None = None
    for i, name in enumerate(filenames):
        try:
            _, _, _, wheel_tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        score = min((rank[t] for t in wheel_tags if t in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, i)
    return best[1] if best else None


def torch_label(pins: Iterable[str]) -> str:
    """The PyTorch build the pins ask for by local label (``cu124``), or ""."""
    labels = {label for _, label in _labelled(pins)}
    if len(labels) > 1:
        raise InputError(f"stack.packages: the pins mix PyTorch builds ({', '.join(sorted(labels))}); one index cannot serve them")
    return labels.pop() if labels else ""


def torch_routed(pins: Iterable[str]) -> list[str]:
    """Names that must come from the torch index: the pins with a PyTorch local label."""
    return sorted({name for name, _ in _labelled(pins)})


def _labelled(pins: Iterable[str]) -> list[tuple[str, str]]:
    out = []
    for pin in pins:
        req = Requirement(pin)
        spec = next(iter(req.specifier), None)
        if spec is None:
            continue
        local = Version(spec.version).local
        if local and _TORCH_LABEL.fullmatch(local):
            out.append((str(canonicalize_name(req.name)), local))
    return out
