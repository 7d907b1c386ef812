"""Compatibility rules for container stacks (``stack.container``): the image's own facts (read from
its config by ``provisioner.container.registry``) against the host driver and the GPU.

- ``container-native``: host driver >= the driver of the image's CUDA release (cuda.yaml, Table 3).
- ``container-forward``: otherwise the image can only run through forward compatibility (its
  cuda-compat libraries): on a data-center GPU, on a branch that release allows, from its minimum on;
  never on a workstation/consumer GPU; anything else is an error (Error 803/804, "compatibility mode
  is UNAVAILABLE").
- ``container-cc-floor``: the GPU's compute capability inside the image CUDA release's range (CUDA 13
  dropped cc < 7.5).
- ``container-arch``: TORCH_CUDA_ARCH_LIST covers the GPU with SASS (same major, minor <= the GPU's)
  or PTX (older than the GPU).
- ``container-disk`` / ``container-pull``: the compressed size against the boot disk, and a pull-time
  estimate.
Sources are in ``data/containers.yaml`` and cited by every message.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, NamedTuple

from packaging.version import Version

from provisioner.compat.facts import ArchTarget, Facts, GpuFact, _load, load_facts
from provisioner.compat.rules import StackContext
from provisioner.compat.rules import gpu_problems as host_problems
from provisioner.compat.stack import sass_or_ptx_covers
from provisioner.container import store as image_store  # called through the module: tests count store.image_facts
from provisioner.messages import Message

if TYPE_CHECKING:  # types only: the profile package imports compat, not the other way round
    from provisioner.profile.model import Hardware, Stack

RULES = {
    "container-native": "host driver >= the driver of the image's CUDA release (native)",
    "container-forward": "otherwise forward compatibility: data-center GPU and an allowed driver branch, else an error",
    "container-cc-floor": "the GPU's compute capability is inside the image CUDA release's range (CUDA 13: >= 7.5)",
    "container-arch": "TORCH_CUDA_ARCH_LIST has SASS or PTX for the GPU",
    "container-disk": "the boot disk holds the OS, driver, docker and the extracted image",
}
PATH = "stack.container.image"


class ContainerFacts(NamedTuple):
    forward: dict[str, dict[int, str]]  # CUDA major -> branch -> minimum driver
    base_gib: float
    unpack_factor: float
    pull_mb_per_s: float
    sources: dict[str, str]


@functools.cache
def container_facts() -> ContainerFacts:
    doc = _load("containers")
    forward = {str(major): {int(b): str(v) for b, v in branches.items()} for major, branches in doc["forward_compat"].items()}
    return ContainerFacts(forward, float(doc["disk"]["base_gib"]), float(doc["disk"]["unpack_factor"]),
                          float(doc["pull_mb_per_s"]), dict(doc["sources"]))



def driver_mode(image_cuda: str, driver: str, gpu: GpuFact, facts: Facts | None = None) -> tuple[str, Message | None]:
    """("native" | "forward" | "refused" | "unknown", the message to show)."""
    facts = facts or load_facts()
    cf = container_facts()
    rel = facts.cuda_releases.get(image_cuda)
    if rel is None:
        return "unknown", Message(PATH, f"the image's CUDA {image_cuda} is not in trainvm's facts; the driver check is skipped (update provisioner/compat/data/cuda.yaml)", level="warning", source=facts.cuda_sources["table3"])
    host = Version(driver)
    if host >= Version(rel.min_driver):
        return "native", None
    branch = int(driver.split(".")[0])
    allowed = cf.forward.get(image_cuda.split(".")[0], {})
    listing = ", ".join(f"R{b} >= {v}" for b, v in sorted(allowed.items())) or "none"
    if not gpu.cloud:
        return "refused", Message(PATH, f"driver {driver} is older than {rel.min_driver}, which CUDA {image_cuda} (the image's) needs, and {gpu.name} is not a data-center GPU, so forward compatibility is not available", source=cf.sources["forward"])
    floor = allowed.get(branch)
    if floor is None or host < Version(floor):
        why = f"R{branch} is not a forward-compatible branch" if floor is None else f"{driver} is older than {floor}, the first R{branch} driver that is forward-compatible"
        return "refused", Message(PATH, f"driver {driver} is older than {rel.min_driver}, which CUDA {image_cuda} (the image's) needs, and {why} (allowed: {listing}); the container would fail with 'compatibility mode is UNAVAILABLE' / Error 803", source=cf.sources["ngc_driver"])
    return "forward", Message(PATH, f"driver {driver} is older than {rel.min_driver} (CUDA {image_cuda}); the image runs on {gpu.name} in forward-compatibility mode (its cuda-compat libraries); pin driver >= {rel.min_driver} to run natively", level="warning", source=cf.sources["ngc_driver"])


def gpu_problems(image: Any, driver: str, gpu: GpuFact, facts: Facts | None = None) -> list[Message]:
    """Errors (and forward-compat warnings) for running ``image`` (ImageFacts) on ``gpu`` with ``driver``."""
    facts = facts or load_facts()
    cf = container_facts()
    out: list[Message] = []
    if gpu.vendor != "nvidia" or gpu.cc is None:
        return [Message("hardware.gpu", f"{gpu.name} is not an NVIDIA GPU; a CUDA image never runs on it", source=facts.gpu_sources["cc"])]
    cuda = image.cuda
    if cuda:
        _, msg = driver_mode(cuda, driver, gpu, facts)
        if msg is not None:
            out.append(msg)
        rel = facts.cuda_releases.get(cuda)
        if rel is not None and not (rel.cc_min <= gpu.cc <= rel.cc_max):
            lo, hi = (f"{c[0]}.{c[1]}" for c in (rel.cc_min, rel.cc_max))
            source = cf.sources["cuda13_floor"] if cuda.startswith("13.") and gpu.cc < rel.cc_min else facts.cuda_sources["arch"]
            out.append(Message(PATH, f"{gpu.name} has compute capability {gpu.cc_str}, outside the range {lo}-{hi} of CUDA {cuda} (the image's)", source=source))
    arch = image.arch_list
    if arch is not None:
        targets = tuple(ArchTarget(sm, ptx) for sm, ptx in arch)
        if sass_or_ptx_covers(targets, gpu.cc) is None:
            listed = image.env.get("TORCH_CUDA_ARCH_LIST", "")
            out.append(Message(PATH, f"the image's TORCH_CUDA_ARCH_LIST ({listed}) has no code for {gpu.name} (sm_{gpu.cc[0]}{gpu.cc[1]}): SASS runs only on the same major with minor >= its own, PTX only on newer GPUs", source=cf.sources["arch"]))
    return out


def disk_gib_needed(image: Any) -> float:
    cf = container_facts()
    return cf.base_gib + image.compressed_size * (1 + cf.unpack_factor) / 2**30


def pull_minutes(image: Any) -> float:
    return image.compressed_size / (container_facts().pull_mb_per_s * 1e6) / 60


def image_rules(stack: Any, boot_disk_gib: int, image: Any) -> list[Message]:
    """Profile-level checks that need the image facts but not a GPU."""
    cf = container_facts()
    out: list[Message] = []
    if (image.os, image.architecture) != ("linux", "amd64"):
        out.append(Message(PATH, f"the image is {image.os}/{image.architecture}; trainvm VMs are linux/amd64"))
    if not image.cuda:
        out.append(Message(PATH, "the image's config sets no CUDA_VERSION; it is not a CUDA image (or not built FROM nvidia/cuda / NGC), so its CUDA cannot be checked", level="warning"))
    elif stack.cuda and stack.cuda != image.cuda:
        out.append(Message("stack.cuda", f"{stack.cuda} does not match the image's CUDA_VERSION {image.env.get('CUDA_VERSION')}"))
    cudnn = image.env.get("CUDNN_VERSION")
    if stack.cudnn and cudnn and not cudnn.startswith(stack.cudnn):
        out.append(Message("stack.cudnn", f"{stack.cudnn} does not match the image's CUDNN_VERSION {cudnn}"))
    need = disk_gib_needed(image)
    size_gb = image.compressed_size / 1e9
    if boot_disk_gib < need:
        out.append(Message("hardware.boot_disk.size_gib", f"{boot_disk_gib} GiB is too small for the image ({size_gb:.1f} GB compressed, about {need:.0f} GiB with the OS, driver and the extracted layers)", source=cf.sources["disk"]))
    out.append(Message(PATH, f"the image is {size_gb:.2f} GB compressed; pulling it takes about {max(pull_minutes(image), 0.1):.1f} min at {cf.pull_mb_per_s:g} MB/s (estimate, in parallel with the driver install)", level="warning", source=cf.sources["disk"]))
    return out


#: (the image's facts or None when not known offline, what the lookup says): ``container.store.image_facts``
Known = tuple[Any, "list[Message] | tuple[Message, ...]"]


def _gpu_table(stack: Any, image: Any, facts: Facts) -> dict[str, list[Message]]:
    """Every GPU -> host-driver problems (driver branch, GPU minimum) plus the image's problems."""
    ctx = StackContext(stack, facts, (), None, Version(stack.driver))
    return {name: host_problems(g, ctx) + (gpu_problems(image, stack.driver, g, facts) if image is not None else [])
            for name, g in facts.gpus.items()}


def container_gpu_exclusions(stack: Any, facts: Facts | None = None, known: Known | None = None) -> dict[str, list[Message]]:
    """For the planner: every cloud GPU -> the errors that keep this container stack off it (``known``: the image's
    facts as the profile's record looked them up, else looked up here)."""
    facts = facts or load_facts()
    image, _ = known if known is not None else image_store.image_facts(stack.container.image)
    table = _gpu_table(stack, image, facts)
    return {n: [m for m in table[n] if m.level == "error"] for n, g in facts.gpus.items() if g.cloud}


def check_container_profile(profile: Any, facts: Facts | None = None, known: Known | None = None) -> list[Message]:
    """All messages for a profile with ``stack.container`` (the counterpart of rules.check_profile; ``known``: the
    image's facts and notes from the profile's record)."""
    return check_container_stack(profile.stack, profile.hardware, facts, known)


def check_container_stack(stack: Stack, hardware: Hardware, facts: Facts | None = None, known: Known | None = None) -> list[Message]:
    """``check_container_profile`` over the parts it reads: the profile's ``stack`` (with ``container``) and
    ``hardware`` (rules.check_stack's counterpart)."""
    if stack.container is None:
        raise ValueError("check_container_stack: the stack has no container (rules.check_stack checks it)")
    facts = facts or load_facts()
    image, said = known if known is not None else image_store.image_facts(stack.container.image)
    out = list(said)
    if image is not None:
        out.extend(image_rules(stack, hardware.boot_disk.size_gib, image))
    table = _gpu_table(stack, image, facts)
    listed = hardware.gpu_names()
    names = list(listed) if listed is not None else [n for n, g in facts.gpus.items() if g.cloud]
    runnable = [n for n in names if not any(m.level == "error" for m in table[n])]
    warned = False
    for i, name in enumerate(names):
        for m in table[name]:
            if m.level == "warning":
                if listed is not None or (name in runnable and not warned):  # unlisted: one example, not one per GPU
                    out.append(Message(m.path, f"{name}: {m.message}", level="warning", source=m.source))
                    warned = warned or listed is None
            elif listed is not None:
                skip = f" (plan skips {name})" if runnable else ""
                path = f"hardware.gpu[{i}]" if m.path == "hardware.gpu" else m.path
                out.append(Message(path, f"{name}: {m.message}{skip}", level="warning" if runnable else "error", source=m.source))
    if listed is None and not runnable:
        out.append(Message("hardware", "no cloud GPU can run this container stack with this driver"))
    seen, unique = set(), []
    for m in out:
        key = (m.path, m.message, m.level)
        if key not in seen:
            seen.add(key)
            unique.append(m)
    return unique
