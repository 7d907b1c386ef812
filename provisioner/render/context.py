"""What a startup script is rendered from: the machine (``RenderTarget``) and every value the
templates use, precomputed in Python (``ScriptContext``). Templates hold no logic about versions,
package names or URLs; they only quote these values (``| shq``) and branch on them."""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from provisioner.compat.facts import Facts, load_facts
from provisioner.errors import RenderError
from provisioner.profile.fields import BUCKET_RES, DANGEROUS_ENV_KEYS, RESERVED_DIRS
from provisioner.providers.lifecycle import api_actions, guest_shutdown_does, on_vm_max_run_seconds
from provisioner.providers.registry import CLOUD_NAMES, CLOUDS
from provisioner.render.cluster import cluster_context
from provisioner.render.data import DataPlan, DataTool, data_plans, data_tools, unreadable, vm_api_sdk
from provisioner.verify.expect import expectation

if TYPE_CHECKING:
    from provisioner.catalog.models import Offer
    from provisioner.profile import LoadedProfile
    from provisioner.profile.model import Lifecycle, Profile
    from provisioner.render.cluster import ClusterContext
    from provisioner.render.container import ContainerContext

# cuda-keyring_1.1-1_all.deb per NVIDIA repository (x86_64). Sources: NVIDIA repo Packages files;
# GoogleCloudPlatform/compute-gpu-installation linux/cuda_installer/config.py NVIDIA_KEYRING_SHA256_SUMS.
KEYRING_SHA256 = {
    "ubuntu2204": "d93190d50b98ad4699ff40f4f7af50f16a76dac3bb8da1eaaf366d47898ff8df",
    "ubuntu2404": "d2a6b11c096396d868758b86dab1823b25e14d70333f1dfa74da5ddaf6a06dba",
    "debian12": "e7f219eab6fe4819cdb5c15b98233dc3420302d9c00883219cd3d896857cf48d",
}

# uv, pinned by version and by the sha256 of its PyPI wheel (PyPI JSON API `digests.sha256`,
# checked against a download on 2026-11-22). The uv release bundles the list of Python builds it
# can install (python-build-standalone, each download verified by uv against its own sha256).
UV_VERSION = "0.13.9"
UV_WHEEL_URL = (
    "https://files.pythonhosted.org/packages/3d/aa/26d64642d808de4a652579ef950d7cd2d37f080a8babf9c67c6b75fc4c3f/"
    "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
)
UV_WHEEL_SHA256 = "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19"

PYPI_INDEX = "https://pypi.org/simple"
TORCH_INDEX = "https://download.pytorch.org/whl/{label}"
MAX_REBOOTS = 2
NVSWITCH_GPUS = frozenset({"A100", "A100-80GB", "H100", "H200", "B200"})
# Shallow folders that must not become the local-NVMe mount point (it would hide their content).
_NO_MOUNT = {"/", "/mnt", "/data", "/home", "/opt", "/srv", "/tmp", "/root", "/media", "/run"}
# Data must not land in system or trainvm folders, and /etc/trainvm/env must not set variables that make a
# shell or the loader run their value: the same lists `validate` enforces (profile/fields.py), checked again
# here so that no profile string ever executes on the VM even if validation were bypassed.
_NO_DATA_UNDER = RESERVED_DIRS
UNSAFE_ENV_KEYS = DANGEROUS_ENV_KEYS
_AZ_ACCOUNT = BUCKET_RES["az"]


def is_nvswitch_shape(cloud: str, instance_type: str, gpu_name: str, gpu_count: int) -> bool:
    """8-GPU (and 16-GPU) HGX shapes whose GPUs talk through NVSwitch: they need fabric manager."""
    spec = CLOUDS.get(cloud)
    return bool(spec and gpu_count >= 8 and gpu_name in NVSWITCH_GPUS and re.match(spec.nvswitch_shapes, instance_type))


@dataclass(frozen=True)
class RenderTarget:
    """The machine the script is rendered for (normally the planner's chosen offer)."""

    cloud: str  # gcp | azure | aws
    instance_type: str
    gpu_name: str  # canonical profile name (T4, A100-80GB, ...)
    gpu_count: int
    region: str
    zone: str | None = None
    local_nvme_gib: int = 0  # local NVMe the shape has (0 = none)
    nvswitch: bool | None = None  # None: derived from the shape (is_nvswitch_shape)

    def __post_init__(self) -> None:
        if self.cloud not in CLOUDS:
            raise RenderError(f"unknown cloud {self.cloud!r}; expected one of {', '.join(CLOUD_NAMES)}")
        if not isinstance(self.gpu_count, int) or self.gpu_count < 1:
            raise RenderError(f"gpu_count must be a positive integer, got {self.gpu_count!r}")
        if self.nvswitch is None:
            object.__setattr__(self, "nvswitch", is_nvswitch_shape(self.cloud, self.instance_type, self.gpu_name, self.gpu_count))


def target_from_offer(offer: Offer) -> RenderTarget:
    """The RenderTarget of a catalog ``Offer`` (provisioner.catalog.models)."""
    if getattr(offer, "arch", "x86_64") != "x86_64":
        raise RenderError(f"{offer.instance_type} is {offer.arch}; trainvm's startup script supports x86_64 only (cuda-keyring checksums)")
    return RenderTarget(
        cloud=offer.cloud,
        instance_type=offer.instance_type,
        gpu_name=offer.gpu_name,
        gpu_count=int(offer.gpu_count),
        region=offer.region,
        zone=offer.zone,
        local_nvme_gib=int(getattr(offer, "local_nvme_max_gib", 0) or 0),
    )


@dataclass(frozen=True)
class ScriptContext:
    """Every value a template may use. Strings reach the script only through ``| shq``."""

    profile_name: str
    profile_hash: str
    cloud: str
    instance_type: str
    region: str
    zone: str
    os_name: str
    os_family: str  # ubuntu | debian
    nvidia_repo: str  # ubuntu2204 | ubuntu2404 | debian12
    keyring_sha256: str
    driver: str
    driver_branch: int
    modules: str  # open | proprietary
    driver_pkg: str  # the first of driver_pkgs (nvidia-driver-cuda, nvidia-open, cuda-drivers): messages, the pin's root
    nvswitch: bool
    fabricmanager_pkg: str  # "" without NVSwitch
    kernel_headers_meta: tuple[str, ...]
    kernel_hold: tuple[str, ...]
    gpu_name: str
    gpu_count: int
    cuda: str  # major.minor the framework targets ("" when unknown)
    cuda_toolkit: bool
    toolkit_pkg: str  # cuda-toolkit-12-4 ("" unless cuda_toolkit)
    cudnn_pkg: str  # libcudnn9-cuda-12 ("" unless the toolkit and a cuDNN are requested)
    cudnn_dev_pkg: str
    cudnn_prefix: str  # version prefix to resolve with apt-cache madison ("9.1.0.")
    cudnn_contains: str  # cuDNN 8 only: "+cuda12." must appear in the version
    python: str
    uv_version: str
    uv_url: str
    uv_sha256: str
    packages: tuple[str, ...]
    pypi_index: str
    torch_index: str  # "" when every pin comes from PyPI
    stack_pyproject: str  # the pins as a uv project whose torch-build pins come only from torch_index ("" without)
    lock_text: str  # "" without stack.requirements
    lock_sha256: str
    packages_fingerprint: str
    data: tuple[DataPlan, ...]
    # the SDK venvs the VM installs (their locks for this OS): the data's copy tools, and the s3 one (boto3) when the
    # VM calls an AWS API (aws_sdk); none when the data is unreadable here
    datatools: tuple[DataTool, ...]
    data_unreadable: str  # why this cloud's VM cannot read the data ("": it can); the script stops at preflight
    nvme: str  # none | optional | required
    scratch: str  # local NVMe mount point ("" without NVMe)
    idle_minutes: int  # 0 = no watchdog
    on_idle: str  # lifecycle.on_idle: stop | delete
    gpu_idle_util: int  # lifecycle.idle_gpu_util_percent
    gpu_idle_minutes: int  # lifecycle.idle_gpu_minutes (0 = a GPU holder is always busy)
    on_max_run: str  # lifecycle.on_max_run: stop | delete
    max_run_seconds: int  # the on-VM max-run timer (0: none, or the cloud enforces it itself)
    shutdown_does: str  # what a shutdown from inside the guest does on this cloud: stop | delete | keep-billing
    max_reboots: int
    expected_json: str  # the expectation (provisioner.verify.expect) + the VM's own keys: expected.json (ASCII JSON)
    # profile `perf:` -- the perf probe (provisioner/perfprobe) as base64 of a tar.gz; budget 0 = off
    perf_budget: int = 0
    perf_data: str = ""
    perf_bundle: str = ""
    container: ContainerContext | None = None  # for stack.container, else None
    driver_pkgver: str = ""  # the exact apt version of driver_pkg NAME.lock recorded ("": resolved on the VM)
    #: what the driver phase installs, each at exactly the driver's version (see driver_set)
    driver_pkgs: tuple[str, ...] = ()
    driver_pkgvers: tuple[str, ...] = ()  # aligned with driver_pkgs: NAME.lock's exact versions ("": resolved on the VM)
    driver_set: str = ""  # "compute-only (headless)" | "desktop and compute": what render says it installs
    cluster: ClusterContext | None = None  # for hardware.nodes > 1, else None
    #: some data item is copied by templates/files/trainvm_copy.py (the copier is rendered)
    copier: bool = False
    #: the VM makes its own API calls through a copy tool's SDK (render/data.py vm_api_sdk; AWS: boto3 of the s3
    #: tool): the env phase first installs that venv
    aws_sdk: bool = False
    #: the startup script's image mode (docs/bake.md): "" (install, the default), "bake" (a builder: install phases,
    #: then clean the disk for capture), "baked" (boot of a baked image: install phases only verify)
    image_mode: str = ""


def driver_set(os_family: str, modules: str) -> tuple[str, tuple[str, ...]]:
    """(which set, its packages) the driver phase installs. Debian 12: NVIDIA's compute-only ("headless") set --
    the CUDA user space (``nvidia-driver-cuda``) and the kernel modules (``nvidia-kernel-open-dkms``, proprietary:
    ``nvidia-kernel-dkms``), without the X/GL desktop stack that ``nvidia-open``/``cuda-drivers`` also pull
    (NVIDIA driver installation guide, "Compute-only and Desktop Installation";
    https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/compute-only-and-desktop-installation.html).
    Ubuntu keeps ``nvidia-open``/``cuda-drivers`` (desktop and compute): its compute-only names are not modelled by
    any test repository here yet."""
    if os_family == "debian":
        kernel = "nvidia-kernel-open-dkms" if modules == "open" else "nvidia-kernel-dkms"
        return "compute-only (headless)", ("nvidia-driver-cuda", kernel)
    return "desktop and compute", ("nvidia-open" if modules == "open" else "cuda-drivers",)


def _kernel_packages(os_family: str, cloud: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(headers metapackages to install, kernel metapackages to hold) for the cloud's kernel."""
    if os_family == "debian":
        return ("linux-headers-cloud-amd64",), ("linux-image-cloud-amd64", "linux-headers-cloud-amd64")
    flavour = CLOUDS[cloud].kernel_flavour
    return (f"linux-headers-{flavour}",), (f"linux-{flavour}", f"linux-image-{flavour}", f"linux-headers-{flavour}")


def _torch_build(pin: str) -> str | None:
    """The PyTorch build label of a pin (``cu124`` in ``torch==2.4.1+cu124``), else None."""
    local = Version(next(iter(Requirement(pin).specifier)).version).local
    return local if local and re.fullmatch(r"cu\d{3}|cpu|rocm\d+(\.\d+)*|xpu", local) else None


def _stack_pyproject(pins: tuple[str, ...], torch_index: str) -> str:
    """uv reads ``-r pyproject.toml`` with its [tool.uv.sources]: the PyTorch index is *explicit*,
    so only the pins with a build label come from it; everything else (numpy, filelock, ...) from
    PyPI. A plain --extra-index-url would make it authoritative for every name it carries (uv's
    first-index strategy), e.g. an old numpy. torch's nvidia-* dependencies are on PyPI too."""
    if not torch_index:
        return ""
    names = sorted({str(canonicalize_name(Requirement(p).name)) for p in pins if _torch_build(p)})
    deps = "".join(f"  {json.dumps(p)},\n" for p in pins)
    sources = "".join(f'{n} = {{ index = "pytorch" }}\n' for n in names)
    return (f'[project]\nname = "trainvm-stack"\nversion = "0"\ndependencies = [\n{deps}]\n\n'
            f'[tool.uv.sources]\n{sources}\n[[tool.uv.index]]\nname = "pytorch"\nurl = {json.dumps(torch_index)}\nexplicit = true\n')


def _torch_index(pins: tuple[str, ...]) -> str:
    labels = set()
    for pin in pins:
        local = _torch_build(pin)
        if local:
            labels.add(local)
    if len(labels) > 1:
        raise RenderError(f"the pins mix PyTorch builds ({', '.join(sorted(labels))}); one index URL cannot serve them")
    return TORCH_INDEX.format(label=labels.pop()) if labels else ""


def _scratch_mount(dests: list[str]) -> str:
    parents = [posixpath.dirname(d) for d in dests]
    if parents:
        common = posixpath.commonpath(parents)
        if common not in _NO_MOUNT and common.count("/") >= 2:
            return common
    return "/mnt/trainvm"


def check_renderable(profile: Profile) -> None:
    """Values that quote safely but must still not reach a VM (see UNSAFE_ENV_KEYS, _NO_DATA_UNDER,
    the az:// account). ``validate`` should refuse them too (fields.py); here they stop the render."""
    for key in profile.stack.env:
        if key in UNSAFE_ENV_KEYS or key.startswith("BASH_FUNC_"):
            raise RenderError(f"stack.env.{key}: shells or the dynamic loader execute this variable's value; it cannot be set by a profile")
    for i, item in enumerate(profile.data):
        if any(item.dest == d or item.dest.startswith(d + "/") for d in _NO_DATA_UNDER):
            raise RenderError(f"data[{i}].dest: {item.dest} is inside a system or trainvm folder; stage data under e.g. /mnt/data")
        if item.source.startswith("az://") and not _AZ_ACCOUNT.match(item.source[len("az://"):].split("/", 1)[0]):
            raise RenderError(f"data[{i}].source: {item.source!r}: the storage account must be 3-24 lowercase letters and digits")


IMAGE_MODES = ("", "bake", "baked")


def build_context(loaded: LoadedProfile, target: RenderTarget, facts: Facts | None = None, image_mode: str = "",
                  lifecycle: Lifecycle | None = None) -> ScriptContext:
    """All values of the script for ``loaded`` (a LoadedProfile) on ``target`` (``image_mode``: see ScriptContext).
    ``lifecycle``: what the VM's watchdog and max-run timer follow instead of the profile's (a bake's builder: its own
    limit, provisioner/bake/run.py); the data tools (and so the stack) stay the profile's."""
    if image_mode not in IMAGE_MODES:
        raise RenderError(f"unknown image mode {image_mode!r}; expected bake or baked")
    if image_mode and loaded.profile.stack.container is not None:
        raise RenderError("stack.container: a container stack cannot be baked yet (docs/bake.md); only stack.python + stack.packages")

    facts = facts or load_facts()
    profile = loaded.profile
    stack = profile.stack
    check_renderable(profile)
    gpu = facts.gpus.get(facts.canonical_gpu(target.gpu_name) or "")
    if gpu is None or gpu.vendor != "nvidia" or not gpu.modules:
        raise RenderError(f"cannot render a CUDA startup script for GPU {target.gpu_name!r} (not an NVIDIA data-center GPU)")
    os_image = facts.os_images[stack.os]
    repo = os_image.nvidia_repo
    if repo not in KEYRING_SHA256:
        raise RenderError(f"no cuda-keyring checksum for NVIDIA repository {repo!r}")
    os_family = stack.os.split("-")[0]
    branch = int(stack.driver.split(".")[0])
    headers_meta, kernel_hold = _kernel_packages(os_family, target.cloud)
    cuda = loaded.resolved.cuda or ""  # the record's effective CUDA (compat.stack.effective_cuda), derived once
    toolkit_pkg = cudnn_pkg = cudnn_dev = cudnn_prefix = cudnn_contains = ""
    if stack.cuda_toolkit:
        if not cuda:
            raise RenderError("stack.cuda_toolkit is true but no CUDA version is known; set stack.cuda")
        toolkit_pkg = "cuda-toolkit-" + cuda.replace(".", "-")
        if stack.cudnn:
            major = stack.cudnn.split(".")[0]
            cuda_major = cuda.split(".")[0]
            cudnn_prefix = stack.cudnn + "."
            if int(major) >= 9:
                cudnn_pkg, cudnn_dev = f"libcudnn{major}-cuda-{cuda_major}", f"libcudnn{major}-dev-cuda-{cuda_major}"
            else:
                cudnn_pkg, cudnn_dev, cudnn_contains = f"libcudnn{major}", f"libcudnn{major}-dev", f"+cuda{cuda_major}."
    pins = tuple(stack.packages)
    lock_text = lock_sha = ""
    if loaded.requirements_path is not None:
        raw = Path(loaded.requirements_path).read_bytes()
        try:
            lock_text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise RenderError(f"{loaded.requirements_path}: the lock file is not UTF-8 text") from None
        if "\x00" in lock_text:
            raise RenderError(f"{loaded.requirements_path}: the lock file contains NUL bytes")
        lock_sha = hashlib.sha256(raw).hexdigest()
    elif loaded.lock is not None:
        if loaded.lock_state != "fresh":
            raise RenderError(f"{loaded.lock_path} is stale (the profile changed since it was written); run `trainvm lock {loaded.path}`")
        if loaded.lock.packages:  # a container stack's lock pins the image, not Python packages
            lock_text = loaded.lock.requirements_text()
            lock_sha = hashlib.sha256(lock_text.encode()).hexdigest()
    torch_index = _torch_index(pins)
    nvme_required = profile.hardware.local_nvme_gib > 0
    nvme = "required" if nvme_required else ("optional" if target.local_nvme_gib > 0 else "none")
    dests = [d.dest for d in profile.data]
    scratch = _scratch_mount(dests) if nvme != "none" else ""
    data = data_plans(profile, scratch)
    data_unreadable = unreadable(profile, target.cloud)
    shutdown_does = guest_shutdown_does(target.cloud, profile.lifecycle)
    watch = lifecycle if lifecycle is not None else profile.lifecycle  # the watchdog's and max-run timer's
    used: list[str] = list(loaded.resolved.lifecycle.actions_used)  # the record's lifecycle decisions
    api_sdk = None if data_unreadable else vm_api_sdk(profile, target.cloud, data, api_actions(used, shutdown_does),
                                                       loaded.resolved.image)
    fingerprint = hashlib.sha256(json.dumps([pins, lock_sha, torch_index, stack.python]).encode()).hexdigest()
    if nvme != "none":
        disk_path = scratch
    else:
        disk_path = posixpath.dirname(dests[0]) if dests else "/"
    # the expectation the VM's ready gate judges the machine against: the one `verify` uses
    # (provisioner.verify.expect), plus what the VM's other commands read (env, data, driver-pin)

    doc = profile.model_dump(mode="json")
    if loaded.lock is not None and loaded.lock.packages:
        doc["lock"] = {"packages": loaded.lock.versions()}
    expected = {
        **expectation(doc, loaded.resolved),
        "profile": profile.name,
        "hash": loaded.hash,
        "cloud": target.cloud,
        "driver": stack.driver,
        "env": dict(stack.env),
        "data": [{"dest": d.dest, "stage": d.stage} for d in data],
        "disk_path": disk_path,
        "nvme": nvme,
    }
    container = None
    if stack.container is not None:
        from provisioner.render.container import container_context  # lazy: startup

        container = container_context(stack, target.cloud, loaded.resolved.image)
    return ScriptContext(
        profile_name=profile.name,
        profile_hash=loaded.hash,
        cloud=target.cloud,
        instance_type=target.instance_type,
        region=target.region,
        zone=target.zone or "",
        os_name=stack.os,
        os_family=os_family,
        nvidia_repo=repo,
        keyring_sha256=KEYRING_SHA256[repo],
        driver=stack.driver,
        driver_branch=branch,
        modules=gpu.modules,
        driver_pkg=driver_set(os_family, gpu.modules)[1][0],
        driver_pkgs=driver_set(os_family, gpu.modules)[1],
        driver_pkgvers=tuple(_locked_driver_version(loaded, p) for p in driver_set(os_family, gpu.modules)[1]),
        driver_set=driver_set(os_family, gpu.modules)[0],
        nvswitch=bool(target.nvswitch),
        fabricmanager_pkg=("nvidia-fabricmanager" if branch >= 580 else f"nvidia-fabricmanager-{branch}") if target.nvswitch else "",
        kernel_headers_meta=headers_meta,
        kernel_hold=kernel_hold,
        gpu_name=gpu.name,
        gpu_count=target.gpu_count,
        cuda=cuda,
        cuda_toolkit=bool(stack.cuda_toolkit),
        toolkit_pkg=toolkit_pkg,
        cudnn_pkg=cudnn_pkg,
        cudnn_dev_pkg=cudnn_dev,
        cudnn_prefix=cudnn_prefix,
        cudnn_contains=cudnn_contains,
        python=stack.python or "",
        uv_version=UV_VERSION,
        uv_url=UV_WHEEL_URL,
        uv_sha256=UV_WHEEL_SHA256,
        packages=pins,
        pypi_index=PYPI_INDEX,
        torch_index=torch_index,
        stack_pyproject=_stack_pyproject(pins, torch_index),
        lock_text=lock_text,
        lock_sha256=lock_sha,
        packages_fingerprint=fingerprint,
        data=data,
        datatools=() if data_unreadable else data_tools(data, stack.os, api_sdk=api_sdk),
        data_unreadable=data_unreadable,
        nvme=nvme,
        scratch=scratch,
        idle_minutes=int(watch.idle_shutdown_minutes or 0),
        on_idle=watch.on_idle,
        gpu_idle_util=int(watch.idle_gpu_util_percent),
        gpu_idle_minutes=int(watch.idle_gpu_minutes or 0),
        on_max_run=watch.on_max_run,
        max_run_seconds=on_vm_max_run_seconds(target.cloud, watch.max_run_hours),
        shutdown_does=guest_shutdown_does(target.cloud, watch),
        max_reboots=MAX_REBOOTS,
        expected_json=json.dumps(expected, sort_keys=True, ensure_ascii=True, separators=(",", ":")),
        **_perf_fields(profile),
        container=container,
        driver_pkgver=_locked_driver_version(loaded, driver_set(os_family, gpu.modules)[1][0]),
        cluster=cluster_context(profile, target.cloud, target.instance_type, target.gpu_count),
        copier=not data_unreadable and any(p.tool for p in data),
        aws_sdk=api_sdk is not None,
        image_mode=image_mode,
    )


def _locked_driver_version(loaded: LoadedProfile, package: str) -> str:
    """The exact apt version of ``package`` a fresh NAME.lock recorded for the profile's driver, or ""."""
    lock = getattr(loaded, "lock", None)
    if lock is None or loaded.lock_state != "fresh" or lock.driver.version != loaded.profile.stack.driver:
        return ""
    return str(lock.driver.packages.get(package, ""))


class PerfFields(TypedDict, total=False):
    perf_budget: int
    perf_data: str
    perf_bundle: str


def _perf_fields(profile: Profile) -> PerfFields:
    """The perf probe travels as its source (stdlib-only, see provisioner/perfprobe), packed."""
    if profile.perf is None:
        return {}

    from provisioner.perfprobe import bundle  # lazy: startup

    data = profile.perf.data or (profile.data[0].dest if profile.data else "")
    packed = "\n".join(textwrap.wrap(base64.b64encode(bundle()).decode("ascii"), 76))
    return {"perf_budget": profile.perf.budget_s, "perf_data": data, "perf_bundle": packed}
