"""The compatibility rule chain (SPEC "Compatibility rules").

GPU vendor -> compute capability inside the CUDA release's range -> driver branch still supports
the GPU and the GPU's own minimum driver -> driver >= the CUDA family floor (error) and >= the
toolkit's own minimum (warning) -> framework build covers the GPU (SASS/PTX rule) -> framework's
CUDA/cuDNN/Python agree with the profile -> wheel tags (glibc of the OS image).

Every message names the fact and cites its source. ``RULES`` lists the rule ids for documentation
and tests; ``check_profile`` returns messages (not located: the loader adds file:line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from packaging.version import Version

from provisioner import versions
from provisioner.compat.facts import Facts, GpuFact, load_facts
from provisioner.compat.stack import Framework, effective_cuda, frameworks, sass_or_ptx_covers
from provisioner.messages import Message

if TYPE_CHECKING:  # types only: the profile package imports compat, not the other way round
    from provisioner.profile.model import Hardware, Profile, Stack

RULES = {
    "cuda-exists": "stack.cuda names a CUDA release that exists",
    "gpu-vendor": "a CUDA stack never runs on an AMD GPU",
    "gpu-cc-in-cuda": "the GPU's compute capability is inside the CUDA release's range; above it only within the toolkit's newest major, where the frameworks' arch lists decide",
    "gpu-driver-branch": "the driver branch still supports the GPU (K80 <= R470; Maxwell/Pascal/Volta <= R580)",
    "gpu-min-driver": "the GPU's own minimum driver is met (e.g. HGX B200 >= 570.133.20)",
    "driver-cuda-floor": "driver >= the CUDA family floor (minor-version compatibility)",
    "driver-toolkit-min": "driver >= the toolkit release's own minimum (warning)",
    "driver-known": "the driver branch is not newer than every branch in the facts (warning: facts may be stale)",
    "framework-known": "the framework release is in the facts (warning otherwise)",
    "framework-build-exists": "the pinned build (+cuXYZ local label) exists for that release",
    "framework-covers-gpu": "the framework build's arch list has SASS sm_X.Z (Z <= the GPU's minor, same major; sm_90a-style only on X.Z exactly) or PTX <= the GPU's CC (JIT: warning)",
    "framework-cuda": "stack.cuda equals the CUDA the framework build targets",
    "framework-cudnn": "stack.cudnn matches the framework's bundled cuDNN at the precision given",
    "framework-python": "the framework release has wheels for stack.python",
    "framework-driver": "the driver meets the framework's own minimum (JAX extras)",
    "wheel-glibc": "the wheels' manylinux glibc floor is <= the OS image's glibc",
    "frameworks-agree": "all CUDA frameworks in one stack target the same CUDA major",
    "gpu-memory": "at least one accepted GPU has min_gpu_memory_gib",
    "stack-has-gpu": "at least one cloud GPU can run the stack",
}


@dataclass(frozen=True, slots=True)
class StackContext:
    """Everything the per-GPU rules need, derived once from the stack."""

    stack: Stack
    facts: Facts
    frameworks: tuple[Framework, ...]
    cuda: str | None  # the stack's effective CUDA (stack.cuda or the framework's)
    driver: Version


def _v(text: str) -> Version:
    return Version(text)


def _branch(driver: str) -> int:
    return int(driver.split(".")[0])


def stack_context(stack: Stack, facts: Facts | None = None) -> StackContext:
    facts = facts or load_facts()
    fws = tuple(frameworks(stack.packages, facts))
    return StackContext(stack, facts, fws, effective_cuda(stack.cuda, fws), _v(stack.driver))


def gpu_problems(gpu: GpuFact, ctx: StackContext) -> list[Message]:
    """Why this stack cannot run on ``gpu`` (empty list = it can). Paths point at the stack field to blame."""
    facts, out = ctx.facts, []
    src = facts.gpu_sources
    if gpu.vendor != "nvidia" or gpu.cc is None:
        return [Message("hardware.gpu", f"{gpu.name} is an {gpu.vendor.upper()} GPU; a CUDA stack (NVIDIA driver {ctx.stack.driver}) never runs on it", source=src["cc"])]
    rel = facts.cuda_releases.get(ctx.cuda) if ctx.cuda else None
    if rel is not None and (gpu.cc < rel.cc_min or (gpu.cc > rel.cc_max and not _arch_decides(ctx, gpu.cc, rel.cc_max))):
        lo, hi = (f"{c[0]}.{c[1]}" for c in (rel.cc_min, rel.cc_max))
        out.append(Message("stack.cuda", f"{gpu.name} has compute capability {gpu.cc_str}, outside CUDA {rel.version}'s supported range {lo}-{hi}", source=facts.cuda_sources["arch"]))
    if gpu.last_branch is not None and _branch(ctx.stack.driver) > gpu.last_branch:
        out.append(Message("stack.driver", f"driver {ctx.stack.driver} (R{_branch(ctx.stack.driver)}) no longer supports {gpu.name} ({gpu.arch}); the last branch for it is R{gpu.last_branch}", source=src["branches"]))
    if gpu.min_driver and ctx.driver < _v(gpu.min_driver):
        out.append(Message("stack.driver", f"{gpu.name} needs driver {gpu.min_driver} or newer; {ctx.stack.driver} is older", source=src["b200_driver"]))
    for fw in ctx.frameworks:
        path = f"stack.packages[{fw.index}]"
        if fw.arch is not None:
            if sass_or_ptx_covers(fw.arch, gpu.cc) is None:
                targets = ", ".join(map(str, fw.arch))
                out.append(Message(path, f"{_build_label(fw)} has no code for {gpu.name} (sm_{gpu.cc[0]}{gpu.cc[1]}): its build targets {targets}; SASS runs only on the same major with minor >= its own, PTX only on newer GPUs", source=_arch_source(fw, facts)))
        elif fw.min_cc is not None and gpu.cc < fw.min_cc:
            need = f"{fw.min_cc[0]}.{fw.min_cc[1]}"
            source = facts.tf_sources["min_cc"] if fw.name == "tensorflow" else facts.jax_sources["install"]
            what = f"{fw.label}" + (f"[{fw.jax_extra.name}]" if fw.jax_extra else "")
            out.append(Message(path, f"{what} needs compute capability {need} or newer; {gpu.name} has {gpu.cc_str}", source=source))
    return out


def _arch_decides(ctx: StackContext, cc: tuple[int, int], cc_max: tuple[int, int]) -> bool:
    """A GPU newer than the toolkit's nvcc range: the builds' own arch lists decide (framework-covers-gpu) when
    every framework records one and the GPU is of a major the toolkit knows (8.9 with CUDA 11.6: sm_86 SASS of the
    framework and of the CUDA 11.6 libraries it bundles runs by binary compatibility). A newer major (9.0 with
    CUDA 11.2) stays refused: the framework's PTX may JIT, but nothing records that the toolkit's libraries do."""
    return bool(ctx.frameworks) and all(fw.arch is not None for fw in ctx.frameworks) and cc[0] <= cc_max[0]


def _build_label(fw: Framework) -> str:
    if fw.torch_variant is not None:
        return f"{fw.label} ({fw.torch_variant.name})"
    return fw.label + (f"[{fw.jax_extra.name}]" if fw.jax_extra else "")


def _arch_source(fw: Framework, facts: Facts) -> str:
    rule = facts.cuda_sources["binary_compat"]
    return f"{fw.arch_source}; {rule}" if fw.arch_source else rule


def gpu_warnings(gpu: GpuFact, ctx: StackContext) -> list[Message]:
    """What is true but worth knowing about running this stack on ``gpu`` (it can run: see gpu_problems)."""
    if gpu.cc is None:
        return []
    out = []
    for fw in ctx.frameworks:
        how = sass_or_ptx_covers(fw.arch, gpu.cc) if fw.arch is not None else None
        if how is not None and how.endswith("(JIT)"):
            out.append(Message(f"stack.packages[{fw.index}]", f"{gpu.name}: {_build_label(fw)} has no SASS for sm_{gpu.cc[0]}{gpu.cc[1]}; the driver JIT-compiles its {how.removesuffix(' (JIT)')} at first use (a slower first start, cached after in ~/.nv/ComputeCache)", level="warning", source=_arch_source(fw, ctx.facts)))
    rel = ctx.facts.cuda_releases.get(ctx.cuda) if ctx.cuda else None
    if rel is not None and ctx.stack.cuda_toolkit and gpu.cc > rel.cc_max:
        hi = f"{rel.cc_max[0]}.{rel.cc_max[1]}"
        out.append(Message("stack.cuda", f"{gpu.name} ({gpu.cc_str}) is newer than CUDA {rel.version}'s nvcc can target (up to {hi}): the framework builds run, but code you compile with that toolkit runs only as older SASS of the same major or JIT-compiled PTX", level="warning", source=ctx.facts.cuda_sources["arch"]))
    return out


def compatible_gpus(stack: Stack, facts: Facts | None = None, ctx: StackContext | None = None) -> dict[str, list[Message]]:
    """For every cloud GPU: the reasons this stack cannot run there (empty = compatible). Used by the planner
    (through ``gpu_exclusions``, which the profile's record holds)."""
    if stack.container is not None:
        from provisioner.compat.container import container_gpu_exclusions  # lazy: startup

        return container_gpu_exclusions(stack, facts)
    ctx = ctx or stack_context(stack, facts)
    return {name: gpu_problems(g, ctx) for name, g in ctx.facts.gpus.items() if g.cloud}



def gpu_exclusions(stack: Stack, facts: Facts | None = None, ctx: StackContext | None = None) -> dict[str, str]:
    """Cloud GPU -> the first reason this stack cannot run there (compatible GPUs left out)."""
    return {name: problems[0].message for name, problems in compatible_gpus(stack, facts, ctx).items() if problems}


def _stack_rules(ctx: StackContext) -> list[Message]:
    stack, facts, out = ctx.stack, ctx.facts, []
    csrc = facts.cuda_sources
    if stack.cuda and stack.cuda not in facts.cuda_releases:
        known = ", ".join(facts.cuda_releases)
        out.append(Message("stack.cuda", f"CUDA {stack.cuda} does not exist (releases: {known})", source=csrc["table3"]))
    cuda = ctx.cuda if ctx.cuda in facts.cuda_releases else None
    if cuda:
        floor = facts.cuda_family_floor(cuda)
        if floor and ctx.driver < _v(floor):
            out.append(Message("stack.driver", f"{stack.driver} is older than {floor}, the minimum for CUDA {cuda.split('.')[0]}.x", source=csrc["table2"]))
        elif ctx.driver < _v(facts.cuda_releases[cuda].min_driver):
            need = facts.cuda_releases[cuda].min_driver
            out.append(Message("stack.driver", f"{stack.driver} is older than {need}, the driver of CUDA {cuda} GA; it runs through minor-version compatibility with a limited feature set (no PTX from newer toolkits)", level="warning", source=csrc["table3"]))
    newest = max(_branch(r.min_driver) for r in facts.cuda_releases.values())
    if _branch(stack.driver) > newest:
        out.append(Message("stack.driver", f"R{_branch(stack.driver)} is newer than every driver branch in trainvm's facts (newest: R{newest}); GPU-support checks assume it behaves like R{newest} (update provisioner/compat/data/cuda.yaml)", level="warning", source=csrc["table3"]))
    if not ctx.frameworks:
        out.append(Message("stack.packages", "no CUDA framework (torch, tensorflow, jax) is pinned; only driver and CUDA checks apply", level="warning"))
    majors: dict[str, Framework] = {}
    for fw in ctx.frameworks:
        out.extend(_framework_rules(fw, ctx))
        if fw.cuda:
            major = fw.cuda.split(".")[0]
            other = next((o for m, o in majors.items() if m != major), None)
            if other is not None:
                out.append(Message(f"stack.packages[{fw.index}]", f"{fw.label} targets CUDA {fw.cuda} but {other.label} targets CUDA {other.cuda}; one VM gets one CUDA major"))
            majors.setdefault(major, fw)
    return out


def _framework_rules(fw: Framework, ctx: StackContext) -> list[Message]:
    stack, facts, out = ctx.stack, ctx.facts, []
    path = f"stack.packages[{fw.index}]"
    py_minor = ".".join((stack.python or "").split(".")[:2])
    glibc = facts.os_images[stack.os].glibc
    if fw.name == "torch":
        tsrc = facts.torch_sources
        rel = fw.torch_release
        if rel is None:
            return [Message(path, f"torch {fw.version.major}.{fw.version.minor} is not in trainvm's compatibility facts; its CUDA/GPU support is not checked (update provisioner/compat/data/torch.yaml)", level="warning", source=tsrc["matrix"])]
        label = fw.local_label
        if label and fw.torch_variant is None:
            if not label.startswith("cu"):
                why = "a CPU-only build" if label == "cpu" else f"a {label} build (not CUDA)"
                return [Message(path, f"{fw.version} is {why}; a trainvm GPU VM needs a +cuXYZ build ({', '.join(rel.variants)})")]
            return [Message(path, f"torch {fw.version.public} has no +{label} build; builds: {', '.join('+' + v for v in rel.variants)}", source=tsrc["matrix"])]
        if not label:
            out.append(Message(path, f"torch=={fw.version} from PyPI is the {rel.pypi_default} build (CUDA {fw.cuda}); pin +{rel.pypi_default} to make that explicit", level="warning", source=tsrc["pypi"]))
        source = tsrc["matrix"]
    elif fw.name == "tensorflow":
        source = facts.tf_sources["tested"]
        if fw.tf_release is None:
            return [Message(path, f"tensorflow {fw.version.major}.{fw.version.minor} is not in trainvm's compatibility facts (update provisioner/compat/data/tensorflow.yaml)", level="warning", source=source)]
        if fw.cuda is None:
            return [Message(path, "tensorflow-cpu has no GPU support")]
        if fw.tf_and_cuda and not fw.tf_release.and_cuda:
            out.append(Message(path, f"tensorflow {fw.version} has no [and-cuda] extra (from 2.14 on); install CUDA {fw.cuda} and cuDNN {fw.cudnn} with cuda_toolkit: true"))
        if not fw.tf_and_cuda and not stack.cuda_toolkit:
            out.append(Message(path, f"plain tensorflow expects CUDA {fw.cuda} and cuDNN {fw.cudnn} on the system; pin tensorflow[and-cuda]=={fw.version} or set cuda_toolkit: true", level="warning", source=facts.tf_sources["and_cuda"]))
    else:  # jax
        source = facts.jax_sources["install"]
        extra = fw.jax_extra
        if extra is None:
            return [Message(path, f"jax without a [cuda12] or [cuda13] extra installs the CPU-only jaxlib; pin jax[cuda12]=={fw.version} or jax[cuda13]=={fw.version}", source=source)]
        if ctx.cuda and (ctx.cuda.split(".")[0] != extra.cuda_major or _v(ctx.cuda) < _v(extra.min_cuda)):
            out.append(Message("stack.cuda", f"jax[{extra.name}] needs CUDA >= {extra.min_cuda} of the {extra.cuda_major}.x family; the stack says {ctx.cuda}", source=source))
        if ctx.driver < _v(extra.min_driver):
            out.append(Message("stack.driver", f"jax[{extra.name}] needs driver {extra.min_driver} or newer; {stack.driver} is older", source=source))
        if stack.cudnn and not (_v(stack.cudnn) >= _v("9.8") and _v(stack.cudnn) < _v("10")):
            out.append(Message("stack.cudnn", f"jax[{extra.name}] needs cuDNN >=9.8,<10; the stack pins {stack.cudnn}", source=source))
    if fw.cuda and stack.cuda and fw.name != "jax" and stack.cuda != fw.cuda:
        out.append(Message("stack.cuda", f"{stack.cuda} does not match {fw.label}, which is built for CUDA {fw.cuda}", source=source))
    if stack.cudnn and fw.name != "jax":
        if fw.cudnn is None:
            out.append(Message("stack.cudnn", f"the cuDNN bundled with {fw.label} is not recorded in trainvm's facts; {stack.cudnn} is not checked", level="warning"))
        elif not versions.same_release_prefix(stack.cudnn, fw.cudnn):
            out.append(Message("stack.cudnn", f"{stack.cudnn} does not match cuDNN {fw.cudnn}, which {fw.label} bundles", source=source))
    if fw.python is not None and py_minor not in fw.python:
        out.append(Message("stack.python", f"{fw.label} has no wheels for Python {py_minor} (supported: {', '.join(fw.python)})", source=source))
    if fw.glibc and _v(fw.glibc) > _v(glibc):
        out.append(Message(path, f"{fw.label} wheels need glibc {fw.glibc} (manylinux_{fw.glibc.replace('.', '_')}); {stack.os} has {glibc}", source=facts.os_sources["glibc"]))
    return out


def check_profile(profile: Profile, facts: Facts | None = None, ctx: StackContext | None = None,
                  known: Any = None) -> list[Message]:
    """All compatibility messages for a profile that passed schema validation (``ctx``: its stack context, from the
    profile's record, when the caller has it): the rules read its stack and hardware (``check_stack``)."""
    return check_stack(profile.stack, profile.hardware, facts, ctx, known)


def check_stack(stack: Stack, hw: Hardware, facts: Facts | None = None, ctx: StackContext | None = None,
                known: Any = None) -> list[Message]:
    """``check_profile`` over the parts the rules read: the profile's ``stack`` and ``hardware`` (what
    ``load_profile`` hands them, not the profile)."""
    if stack.container is not None:
        from provisioner.compat.container import check_container_stack  # lazy: startup

        return check_container_stack(stack, hw, facts, known)
    ctx = ctx or stack_context(stack, facts)
    out = _stack_rules(ctx)
    listed = hw.gpu_names()
    if listed is not None:
        problems = {name: gpu_problems(ctx.facts.gpus[name], ctx) for name in listed}
        ok = [n for n, p in problems.items() if not p]
        for name in ok:
            out.extend(gpu_warnings(ctx.facts.gpus[name], ctx))
        for i, name in enumerate(listed):
            for m in problems[name]:
                level: Literal["error", "warning"] = "error" if not ok else "warning"
                suffix = "" if not ok else f" (plan skips {name})"
                out.append(Message(m.path if m.path != "hardware.gpu" else f"hardware.gpu[{i}]", f"{m.message}{suffix}" if m.path == "hardware.gpu" or m.message.startswith(name + " ") else f"{name}: {m.message}{suffix}", level=level, source=m.source))
        if hw.min_gpu_memory_gib and not any(ctx.facts.gpus[n].memory_gib >= hw.min_gpu_memory_gib for n in listed):
            out.append(Message("hardware.min_gpu_memory_gib", f"no accepted GPU ({', '.join(listed)}) has {hw.min_gpu_memory_gib:g} GiB", source=ctx.facts.gpu_sources["memory"]))
    else:
        table = {name: gpu_problems(g, ctx) for name, g in ctx.facts.gpus.items() if g.cloud}
        runnable = [n for n, p in table.items() if not p and (not hw.min_gpu_memory_gib or ctx.facts.gpus[n].memory_gib >= hw.min_gpu_memory_gib)]
        if not runnable:
            out.append(Message("hardware", "no cloud GPU can run this stack" + (f" with {hw.min_gpu_memory_gib:g} GiB" if hw.min_gpu_memory_gib else "")))
    seen, unique = set(), []
    for m in out:
        key = (m.path, m.message, m.level)
        if key not in seen:
            seen.add(key)
            unique.append(m)
    return unique
