"""Script values for container stacks (``stack.container``): Docker Engine and the NVIDIA Container
Toolkit from their apt repositories at pinned versions, keys checked by fingerprint, and the
``docker run`` arguments of the check run and of ``trainvm-run``.

Sources: Docker Engine install docs (docs.docker.com/engine/install/ubuntu|debian: the repository
line, /etc/apt/keyrings/docker.asc, key fingerprint 9DC8 5822 9FC7 DD38 854A E2D8 8D81 803C 0EBF CD88,
version strings ``5:<ver>-1~<distro>.<release>~<codename>``); NVIDIA Container Toolkit install guide
(docs.nvidia.com/datacenter/cloud-native/container-toolkit: stable/deb repository, gpgkey with
fingerprint C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0, the four packages pinned together,
``nvidia-ctk runtime configure --runtime=docker``); NGC user guide (``--ipc=host`` or a larger
``--shm-size``, ``--ulimit memlock=-1 --ulimit stack=67108864`` for PyTorch/NCCL)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from provisioner.container.reference import ImageRef, parse_image_ref
from provisioner.errors import RenderError
from provisioner.providers.registry_auth import pull_auth

if TYPE_CHECKING:
    from provisioner.profile.model import Stack

DOCKER_VERSION = "27.3.1"
CONTAINERD_VERSION = "1.7.22-1"
CTK_VERSION = "1.17.3-1"
DOCKER_KEY_FPR = "9DC858229FC7DD38854AE2D88D81803C0EBFCD88"
CTK_KEY_FPR = "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
CTK_REPO = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"
CTK_KEY_URL = "https://nvidia.github.io/libnvidia-container/gpgkey"
# OS image -> (docker distro folder, release, codename)
DOCKER_DISTROS = {
    "ubuntu-22.04": ("ubuntu", "22.04", "jammy"),
    "ubuntu-24.04": ("ubuntu", "24.04", "noble"),
    "debian-12": ("debian", "12", "bookworm"),
}
# Always passed to `docker run` (check run and trainvm-run): GPUs, shared memory for data loaders and
# NCCL, pinned memory without a limit.
BASE_RUN_ARGS = ("--gpus", "all", "--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864")


@dataclass(frozen=True, slots=True)
class ContainerContext:
    image: str  # as the profile writes it
    pull_ref: str  # REGISTRY/REPO@sha256:... (or the tag when unpinned; `up` refuses those)
    digest: str  # "" when unpinned
    run_args: tuple[str, ...]  # BASE_RUN_ARGS + the profile's run_args
    docker_repo: str  # the apt line's URL
    docker_key_url: str
    docker_suite: str  # codename
    docker_pkg_version: str  # 5:27.3.1-1~ubuntu.22.04~jammy
    containerd_version: str
    ctk_repo: str
    ctk_key_url: str
    ctk_version: str
    docker_key_fpr: str
    ctk_key_fpr: str
    #: how the VM logs in to the registry before the pull (providers/registry_auth.py): "" anonymous, gcp-token,
    #: ecr, acr or secret; the helper's ``registry-login`` writes the private docker config
    login: str = ""
    registry: str = ""  # the image's registry host[:port]
    login_arg: str = ""  # secret: the secret:// reference; ecr: the registry's region
    pull_auth: str = ""  # what `plan` says ("image pull: ...")


def container_context(stack: Stack, cloud: str, ref: ImageRef | None = None) -> ContainerContext:
    """``ref``: the image reference as the profile's record parsed it (parsed here only when not given)."""

    container = stack.container
    if container is None:
        raise RenderError("stack.container is not set: a container context needs one")
    ref = ref or parse_image_ref(container.image)
    distro, release, codename = DOCKER_DISTROS[stack.os]
    registry = "" if ref.registry == "registry-1.docker.io" else ref.registry + "/"
    name = f"{registry}{ref.repository}"
    pull = f"{name}@{ref.digest}" if ref.digest else f"{name}:{ref.tag}"
    auth = pull_auth(cloud, ref, container.registry_auth)
    return ContainerContext(
        image=container.image,
        pull_ref=pull,
        digest=ref.digest or "",
        run_args=BASE_RUN_ARGS + tuple(container.run_args),
        docker_repo=f"https://download.docker.com/linux/{distro}",
        docker_key_url=f"https://download.docker.com/linux/{distro}/gpg",
        docker_suite=codename,
        docker_pkg_version=f"5:{DOCKER_VERSION}-1~{distro}.{release}~{codename}",
        containerd_version=CONTAINERD_VERSION,
        ctk_repo=CTK_REPO,
        ctk_key_url=CTK_KEY_URL,
        ctk_version=CTK_VERSION,
        docker_key_fpr=DOCKER_KEY_FPR,
        ctk_key_fpr=CTK_KEY_FPR,
        login=auth.login,
        registry=auth.registry,
        login_arg=auth.secret or auth.region,
        pull_auth=auth.text,
    )
