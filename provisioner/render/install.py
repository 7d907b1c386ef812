"""The install phases' values (preflight, driver, CUDA, Python and packages): one builder per phase over its part of
the typed record (the profile's stack, the fresh NAME.lock or the requirements' lock, the record's effective CUDA),
the machine (``RenderTarget``) and the compat facts, each returning its ScriptContext fields. ``build_context`` (render/context.py) composes them; so does ``stack_fields``, which a bake's
identity reads without rendering anything."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from provisioner.errors import RenderError
from provisioner.providers.registry import CLOUDS

if TYPE_CHECKING:
    from provisioner.compat.facts import Facts
    from provisioner.lock.model import LockFile
    from provisioner.profile.model import Stack
    from provisioner.render.script_context import RenderTarget

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


def _kernel_packages(os_family: str, cloud: str) -> tuple[str, ...]:
    """The cloud kernel's metapackages, the image's first: held before the driver phase installs the running
    kernel's headers, and installed (then a reboot) only when the archive has dropped those headers."""
    if os_family == "debian":
        return ("linux-image-cloud-amd64", "linux-headers-cloud-amd64")
    flavour = CLOUDS[cloud].kernel_flavour
    return (f"linux-{flavour}", f"linux-image-{flavour}", f"linux-headers-{flavour}")


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


def _locked_driver_version(fresh: LockFile | None, driver: str, package: str) -> str:
    """The exact apt version of ``package`` a fresh NAME.lock (``fresh``; None: none, or stale) recorded for the
    profile's ``driver``, or ""."""
    if fresh is None or fresh.driver.version != driver:
        return ""
    return str(fresh.driver.packages.get(package, ""))


class DriverFields(TypedDict):
    """Preflight and the driver phase: the OS, NVIDIA's repository, the driver set, fabric manager, the kernel."""

    os_name: str
    os_family: str
    nvidia_repo: str
    keyring_sha256: str
    driver: str
    driver_branch: int
    modules: str
    driver_pkg: str
    driver_pkgs: tuple[str, ...]
    driver_pkgvers: tuple[str, ...]
    driver_set: str
    driver_pkgver: str
    nvswitch: bool
    fabricmanager_pkg: str
    kernel_hold: tuple[str, ...]
    gpu_name: str
    gpu_count: int


def driver_fields(stack: Stack, fresh_lock: LockFile | None, target: RenderTarget, facts: Facts) -> DriverFields:
    """The driver phase over its parts: the profile's ``stack``, its NAME.lock when fresh (the driver packages'
    exact versions), the machine and the compat facts."""
    gpu = facts.gpus.get(facts.canonical_gpu(target.gpu_name) or "")
    if gpu is None or gpu.vendor != "nvidia" or not gpu.modules:
        raise RenderError(f"cannot render a CUDA startup script for GPU {target.gpu_name!r} (not an NVIDIA data-center GPU)")
    repo = facts.os_images[stack.os].nvidia_repo
    if repo not in KEYRING_SHA256:
        raise RenderError(f"no cuda-keyring checksum for NVIDIA repository {repo!r}")
    os_family = stack.os.split("-")[0]
    branch = int(stack.driver.split(".")[0])
    kernel_hold = _kernel_packages(os_family, target.cloud)
    which, pkgs = driver_set(os_family, gpu.modules)
    return DriverFields(
        os_name=stack.os,
        os_family=os_family,
        nvidia_repo=repo,
        keyring_sha256=KEYRING_SHA256[repo],
        driver=stack.driver,
        driver_branch=branch,
        modules=gpu.modules,
        driver_pkg=pkgs[0],
        driver_pkgs=pkgs,
        driver_pkgvers=tuple(_locked_driver_version(fresh_lock, stack.driver, p) for p in pkgs),
        driver_set=which,
        driver_pkgver=_locked_driver_version(fresh_lock, stack.driver, pkgs[0]),
        nvswitch=bool(target.nvswitch),
        fabricmanager_pkg=("nvidia-fabricmanager" if branch >= 580 else f"nvidia-fabricmanager-{branch}") if target.nvswitch else "",
        kernel_hold=kernel_hold,
        gpu_name=gpu.name,
        gpu_count=target.gpu_count,
    )


class CudaFields(TypedDict):
    """The CUDA phase: the toolkit and cuDNN packages (empty unless stack.cuda_toolkit)."""

    cuda: str
    cuda_toolkit: bool
    toolkit_pkg: str
    cudnn_pkg: str
    cudnn_dev_pkg: str
    cudnn_prefix: str
    cudnn_contains: str


def cuda_fields(stack: Stack, effective_cuda: str | None) -> CudaFields:
    """The CUDA phase: the ``stack`` and the record's effective CUDA (``Resolved.cuda``,
    compat.stack.effective_cuda: derived once)."""
    cuda = effective_cuda or ""
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
    return CudaFields(cuda=cuda, cuda_toolkit=bool(stack.cuda_toolkit), toolkit_pkg=toolkit_pkg, cudnn_pkg=cudnn_pkg,
                      cudnn_dev_pkg=cudnn_dev, cudnn_prefix=cudnn_prefix, cudnn_contains=cudnn_contains)


class PythonFields(TypedDict):
    """The Python and packages phases: uv, the interpreter, the pins or the lock, the indexes."""

    python: str
    uv_version: str
    uv_url: str
    uv_sha256: str
    packages: tuple[str, ...]
    pypi_index: str
    torch_index: str
    stack_pyproject: str
    lock_text: str
    lock_sha256: str
    packages_fingerprint: str


def requirements_lock(requirements_path: Path | str | None, lock: LockFile | None, *, stale: str | None) -> tuple[str, str]:
    """(the lock's text, its sha256): stack.requirements' file (``requirements_path``), else a fresh NAME.lock's
    packages (``lock``; ``stale``: why it may not be used, or None when it is fresh), else ("", "")."""
    if requirements_path is not None:
        raw = Path(requirements_path).read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise RenderError(f"{requirements_path}: the lock file is not UTF-8 text") from None
        if "\x00" in text:
            raise RenderError(f"{requirements_path}: the lock file contains NUL bytes")
        return text, hashlib.sha256(raw).hexdigest()
    if lock is not None:
        if stale is not None:
            raise RenderError(stale)
        if lock.packages:  # a container stack's lock pins the image, not Python packages
            text = lock.requirements_text()
            return text, hashlib.sha256(text.encode()).hexdigest()
    return "", ""


def python_fields(stack: Stack, locked: tuple[str, str]) -> PythonFields:
    """The Python and packages phases: the ``stack``'s pins and the lock (``requirements_lock``: text, sha256)."""
    pins = tuple(stack.packages)
    lock_text, lock_sha = locked
    torch_index = _torch_index(pins)
    fingerprint = hashlib.sha256(json.dumps([pins, lock_sha, torch_index, stack.python]).encode()).hexdigest()
    return PythonFields(
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
    )
