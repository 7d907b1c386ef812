"""Every ``TRAINVM_*`` setting trainvm reads from the environment, in one table (``SETTINGS``), and the
only module that reads them: the other modules ask ``text``/``flag``/``seconds`` here (a test keeps it that
way, and keeps docs/settings.md listing exactly these names). Plain ``os.environ`` reads, no pydantic-settings:
settings are read when a command needs them, and importing this module costs nothing on ``trainvm --help``.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from provisioner.errors import InputError


class Setting(NamedTuple):
    name: str
    default: str  # as documented ("" = unset)
    doc: str


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    # profiles, catalog and facts
    Setting("TRAINVM_PROFILE_PATH", "", "`:`-separated folders searched for `extends:` names"),
    Setting("TRAINVM_CATALOG", "", "folder with catalog files to use instead of the embedded snapshot"),
    Setting("TRAINVM_AZURE_PRICES_URL", "", "Azure Retail Prices API URL for `catalog refresh` (default `https://prices.azure.com/api/retail/prices`; a fake in tests)"),
    Setting("TRAINVM_AWS_PRICES_URL", "", "AWS Price List bulk API base for `catalog refresh` (default `https://pricing.us-east-1.amazonaws.com`; a fake in tests)"),
    Setting("TRAINVM_GCP_BILLING_URL", "", "Cloud Billing Catalog API base for `catalog refresh` (default `https://cloudbilling.googleapis.com`; a fake in tests)"),
    Setting("TRAINVM_GCP_PRICES_API_KEY", "", "API key for the Cloud Billing Catalog API (`catalog refresh --cloud gcp`; else application-default credentials); sent as a header, never logged"),
    Setting("TRAINVM_FACTS_DIR", "", "folder with compatibility facts (gpus/cuda/torch/tensorflow/jax/os.yaml) to use instead of the bundled ones; validated like input (FILE:LINE: field: message, exit 2)"),
    Setting("TRAINVM_TODAY", "", "the date plans are computed for (catalog age, YYYY-MM-DD), for reproducible output"),
    Setting("TRAINVM_NO_CACHE", "", "set: do not use the parsed-data cache in `~/.cache/trainvm` (nor the text of `--help` kept there)"),
    # cloud endpoints and credentials
    Setting("TRAINVM_GCE_ENDPOINT", "", "Compute Engine base URL (an emulator in tests; anonymous credentials allowed)"),
    Setting("TRAINVM_GCS_ENDPOINT", "", "Cloud Storage base URL of the GCE payload store (an emulator in tests; anonymous credentials); default `https://storage.googleapis.com`"),
    Setting("TRAINVM_AZURE_ENDPOINT", "", "ARM base URL (an emulator in tests; https, CA from `REQUESTS_CA_BUNDLE`)"),
    Setting("TRAINVM_AZURE_ACCESS_TOKEN", "", "bearer token instead of `DefaultAzureCredential`"),
    Setting("TRAINVM_AZURE_BLOB_ENDPOINT", "", "Blob Storage base URL for the payload store: `<this>/<account>` instead of `https://<account>.blob.core.windows.net` (Azurite's path style in tests; CA from `REQUESTS_CA_BUNDLE`)"),
    Setting("TRAINVM_AWS_ENDPOINT", "", "one endpoint for every AWS client (EC2, SSM, IAM): moto's server in tests"),
    Setting("TRAINVM_AWS_REGIONS", "", "comma-separated regions that `list`, `status` and the commands that look a VM up by name (`down`, `stop`, `start`, `logs`, `ssh`, `verify`) ask on AWS (default: the catalog's AWS regions that the account has enabled)"),
    Setting("TRAINVM_METADATA_PROBE", "auto", "whether the clouds' credential chains may ask an instance metadata server (169.254.169.254): `auto` only the cloud whose VM this is by its DMI strings (`/sys/class/dmi/id`), `always` (a cloud VM whose DMI is hidden, e.g. a container without `/sys`), `never`"),
    Setting("TRAINVM_SSH_PUBLIC_KEY", "", "public key for the Azure admin user / the AWS key pair (default `~/.ssh/id_ed25519.pub`, then `id_rsa.pub`)"),
    # timeouts and polling (seconds)
    Setting("TRAINVM_GCE_OP_TIMEOUT", "600", "seconds to wait for one GCE create/delete operation"),
    Setting("TRAINVM_AZURE_OP_TIMEOUT", "900", "seconds to wait for one Azure create/delete operation"),
    Setting("TRAINVM_AWS_OP_TIMEOUT", "600", "seconds to wait for one AWS instance to run or terminate"),
    Setting("TRAINVM_API_TIMEOUT", "30", "seconds one API call may take, retries included (each HTTP request gets half)"),
    Setting("TRAINVM_AZURE_POLL_SECONDS", "5", "Azure operation polling interval (0 in tests)"),
    Setting("TRAINVM_RETRY_BASE_DELAY", "1 (GCE, AWS) / 0.8 (Azure)", "first retry backoff (0 in tests)"),
    Setting("TRAINVM_READY_POLL_SECONDS", "15", "`up --wait-ready` polling interval (0 in tests)"),
    Setting("TRAINVM_BAKE_TIMEOUT", "5400", "seconds `bake` waits for the builder's install phases (then the builder is deleted and the bake fails, naming the phase)"),
    Setting("TRAINVM_LOGS_POLL_SECONDS", "5", "`logs --follow` polling interval (0 in tests)"),
    Setting("TRAINVM_SSH_PROBE_SECONDS", "5", "how long `ssh` waits for tcp:22 before saying how to open the firewall (0 skips the probe)"),
    # the local cloud (a QEMU VM on this machine: docs/local.md)
    Setting("TRAINVM_LOCAL_IMAGE_DEBIAN_12", "", "the Debian 12 base qcow2 `--cloud local` boots (an overlay on it): the official `genericcloud` image from https://cloud.debian.org/images/cloud/bookworm/, checked against its SHA512SUMS, or the VM lane's image"),
    Setting("TRAINVM_LOCAL_IMAGE_UBUNTU_22_04", "", "the Ubuntu 22.04 base qcow2 `--cloud local` boots: the official image from https://cloud-images.ubuntu.com/jammy/, checked against its SHA256SUMS"),
    Setting("TRAINVM_LOCAL_IMAGE_UBUNTU_24_04", "", "the Ubuntu 24.04 base qcow2 `--cloud local` boots: the official image from https://cloud-images.ubuntu.com/noble/, checked against its SHA256SUMS"),
    Setting("TRAINVM_LOCAL_ACCEL", "tcg", "QEMU accelerator of `--cloud local`: `tcg` (emulation: works everywhere, slow) or `kvm` (where `/dev/kvm` works; a nested KVM guest can hang before the kernel's first message)"),
    Setting("TRAINVM_LOCAL_DIR", "", "folder of the local cloud's VMs and payload store (default `$XDG_STATE_HOME/trainvm/local`, `~/.local/state/trainvm/local`)"),
    Setting("TRAINVM_LOCAL_STOP_SECONDS", "120", "seconds `stop` waits for a local VM's ACPI power-off before it powers the VM off hard"),
    # lock files, team sources and container images
    Setting("TRAINVM_FROZEN", "", "`1`: as `--frozen` on `lock`, `plan` and `up`: never fetch team sources; fail when the lock and the cache disagree; `plan`/`up` refuse a missing or stale lock"),
    Setting("TRAINVM_DRIVER_INDEX_URL", "https://developer.download.nvidia.com/compute/cuda/repos/{repo}/x86_64/Packages.gz",
            "the NVIDIA `Packages` index `lock` reads the driver's exact apt versions from (URL, `file://` or path; `{repo}` becomes `ubuntu2204`/`debian12`...; `none` skips it)"),
    Setting("TRAINVM_LOCK_IMAGES", "1", "`0`: `lock` does not ask the clouds for the exact OS images it pins (the test suite's default)"),
    Setting("TRAINVM_AZURE_IMAGE_LOCATION", "eastus", "the Azure location `lock` reads the newest Marketplace image version in"),
    Setting("TRAINVM_AWS_IMAGE_REGION", "us-east-1", "the AWS region `lock` pins the AMI in (AMI ids are per region; elsewhere `up` resolves the SSM parameter)"),
    Setting("TRAINVM_INDEX_URL", "https://pypi.org/simple", "index `lock` and `capture -o` resolve from"),
    Setting("TRAINVM_CAPTURE_LOCK", "1", "`0`: `capture -o` writes no lock"),
    Setting("TRAINVM_REGISTRY_USER", "", "registry user for `--resolve-image` / `lock` (never stored)"),
    Setting("TRAINVM_REGISTRY_PASSWORD", "", "registry password or token for `--resolve-image` / `lock` (never stored)"),
    Setting("TRAINVM_REGISTRY_TIMEOUT", "60", "seconds one image lookup (`--resolve-image`, `lock`) may take in all, every request and byte of it"),
    Setting("TRAINVM_INSECURE_REGISTRIES", "", "`host:port,...` registries spoken to over plain http (test registries)"),
    Setting("TRAINVM_RESOLVE_IMAGES", "", "`1`: ask the registry for `stack.container`'s digest and facts (what `--resolve-image` sets)"),
    # the command line
    Setting("TRAINVM_DEBUG", "", "set: show tracebacks on errors (what `--debug` sets)"),
)}


def _read(name: str) -> str | None:
    if name not in SETTINGS:
        raise KeyError(f"{name} is not a trainvm setting (add it to provisioner/settings.py SETTINGS and docs/settings.md)")
    return os.environ.get(name)


def text(name: str, default: str = "") -> str:
    """``$name`` with surrounding blanks stripped, ``default`` when unset or blank."""
    raw = (_read(name) or "").strip()
    return raw or default


def is_set(name: str) -> bool:
    """Whether ``$name`` is set to anything non-empty (``0`` included)."""
    return bool(_read(name))


def flag(name: str) -> bool:
    """Whether ``$name`` is set to anything but empty or ``0``."""
    return (_read(name) or "").strip() not in ("", "0")


def seconds(name: str, default: float) -> float:
    """``$name`` as non-negative seconds, ``default`` when unset or empty; anything else is an input error (exit 2)."""
    raw = _read(name)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{name}={raw!r} is not a number of seconds") from None
    if value < 0 or value != value:
        raise InputError(f"{name}={raw!r} must be a non-negative number of seconds")
    return value


env_seconds = seconds  # the name the providers and commands call
