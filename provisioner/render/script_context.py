"""The records a startup script is rendered from: the machine (``RenderTarget``) and every value the
templates use, precomputed in Python (``ScriptContext``, built phase by phase in render/context.py). Templates hold
no logic about versions, package names or URLs; they only quote these values (``| shq``) and branch on them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provisioner.errors import RenderError
from provisioner.providers.registry import CLOUD_NAMES, CLOUDS
from provisioner.render.data import DataPlan, DataTool

if TYPE_CHECKING:
    from provisioner.catalog.models import Offer
    from provisioner.providers.offer import Shape
    from provisioner.render.cluster import ClusterContext
    from provisioner.render.container import ContainerContext

NVSWITCH_GPUS = frozenset({"A100", "A100-80GB", "H100", "H200", "B200"})


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
    #: the machine has no GPU (a rehearsal cloud): gpu_name/gpu_count are the profile's ask, the GPU gate reports
    #: ``rehearsal: no GPU`` instead of checking (planner/rehearsal.py)
    rehearsal: bool = False

    def __post_init__(self) -> None:
        if self.cloud not in CLOUDS:
            raise RenderError(f"unknown cloud {self.cloud!r}; expected one of {', '.join(CLOUD_NAMES)}")
        if not isinstance(self.gpu_count, int) or self.gpu_count < 1:
            raise RenderError(f"gpu_count must be a positive integer, got {self.gpu_count!r}")
        if self.nvswitch is None:
            object.__setattr__(self, "nvswitch", is_nvswitch_shape(self.cloud, self.instance_type, self.gpu_name, self.gpu_count))


def target_from_offer(offer: Offer | Shape, rehearse: tuple[str, int] | None = None) -> RenderTarget:
    """The RenderTarget of a catalog ``Offer`` (provisioner.catalog.models), or of a plan candidate's machine
    (``providers.offer.Shape``: the same fields but the prices); ``rehearse``: (GPU, count) the profile asks for, on an
    offer of a rehearsal cloud (no GPU: the script is rendered for the asked GPU and rehearsed)."""
    if getattr(offer, "arch", "x86_64") != "x86_64":
        raise RenderError(f"{offer.instance_type} is {offer.arch}; trainvm's startup script supports x86_64 only (cuda-keyring checksums)")
    return RenderTarget(
        cloud=offer.cloud,
        instance_type=offer.instance_type,
        gpu_name=rehearse[0] if rehearse else offer.gpu_name,
        gpu_count=rehearse[1] if rehearse else int(offer.gpu_count),
        region=offer.region,
        zone=offer.zone,
        local_nvme_gib=int(getattr(offer, "local_nvme_max_gib", 0) or 0),
        rehearsal=rehearse is not None,
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
    #: no GPU on this machine (``RenderTarget.rehearsal``): the GPU gate reports ``rehearsal: no GPU``, never a pass
    rehearsal: bool = False
