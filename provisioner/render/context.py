"""The startup script's values (``ScriptContext``, render/script_context.py), built phase by phase over the typed
record: the install phases (driver, CUDA, Python: render/install.py), the data, the lifecycle (watchdog, max-run
timer), the expectation the VM's ready gate judges by, the container, the perf probe and the cluster.
``build_context`` composes them; ``stack_fields`` composes only the install phases' part (a bake's identity)."""

from __future__ import annotations

import base64
import json
import posixpath
import textwrap
from typing import TYPE_CHECKING, TypedDict

from provisioner.compat.facts import Facts, load_facts
from provisioner.errors import RenderError
from provisioner.profile.fields import BUCKET_RES, DANGEROUS_ENV_KEYS, RESERVED_DIRS
from provisioner.providers.lifecycle import guest_shutdown_does, on_vm_max_run_seconds
from provisioner.render.cluster import cluster_context
from provisioner.render.data import DataFields, data_fields
from provisioner.render.install import (
    CudaFields,
    DriverFields,
    PythonFields,
    cuda_fields,
    driver_fields,
    python_fields,
    requirements_lock,
)
from provisioner.render.script_context import RenderTarget, ScriptContext
from provisioner.render.script_context import is_nvswitch_shape as is_nvswitch_shape  # re-exported
from provisioner.render.script_context import target_from_offer as target_from_offer  # re-exported
from provisioner.verify.expect import expectation

if TYPE_CHECKING:
    from provisioner.profile import LoadedProfile
    from provisioner.profile.model import Lifecycle, Profile
    from provisioner.render.container import ContainerContext

MAX_REBOOTS = 2
# Data must not land in system or trainvm folders, and /etc/trainvm/env must not set variables that make a
# shell or the loader run their value: the same lists `validate` enforces (profile/fields.py), checked again
# here so that no profile string ever executes on the VM even if validation were bypassed.
_NO_DATA_UNDER = RESERVED_DIRS
UNSAFE_ENV_KEYS = DANGEROUS_ENV_KEYS
_AZ_ACCOUNT = BUCKET_RES["az"]


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



class LifecycleFields(TypedDict):
    """The VM's watchdog, its max-run timer and what a shutdown from inside the guest does."""

    idle_minutes: int
    on_idle: str
    gpu_idle_util: int
    gpu_idle_minutes: int
    on_max_run: str
    max_run_seconds: int
    shutdown_does: str
    max_reboots: int


def lifecycle_fields(watch: Lifecycle, cloud: str) -> LifecycleFields:
    return LifecycleFields(
        idle_minutes=int(watch.idle_shutdown_minutes or 0),
        on_idle=watch.on_idle,
        gpu_idle_util=int(watch.idle_gpu_util_percent),
        gpu_idle_minutes=int(watch.idle_gpu_minutes or 0),
        on_max_run=watch.on_max_run,
        max_run_seconds=on_vm_max_run_seconds(cloud, watch.max_run_hours),
        shutdown_does=guest_shutdown_does(cloud, watch),
        max_reboots=MAX_REBOOTS,
    )


def expected_json(loaded: LoadedProfile, target: RenderTarget, data: DataFields) -> str:
    """The expectation the VM's ready gate judges the machine against: the one ``verify`` uses
    (provisioner.verify.expect), plus what the VM's other commands read (env, data, driver-pin)."""
    profile = loaded.profile
    dests = [d.dest for d in profile.data]
    if data["nvme"] != "none":
        disk_path = data["scratch"]
    else:
        disk_path = posixpath.dirname(dests[0]) if dests else "/"
    doc = profile.model_dump(mode="json")
    if loaded.lock is not None and loaded.lock.packages:
        doc["lock"] = {"packages": loaded.lock.versions()}
    expected = {
        **expectation(doc, loaded.resolved),
        "profile": profile.name,
        "hash": loaded.hash,
        "cloud": target.cloud,
        "driver": profile.stack.driver,
        "env": dict(profile.stack.env),
        "data": [{"dest": d.dest, "stage": d.stage} for d in data["data"]],
        "disk_path": disk_path,
        "nvme": data["nvme"],
    }
    if target.rehearsal:  # the VM's gates judge no GPU fact (provisioner/agent/compare.py ``rehearsal``)
        expected["rehearsal"] = True
    return json.dumps(expected, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def _container(loaded: LoadedProfile, target: RenderTarget) -> ContainerContext | None:
    if loaded.profile.stack.container is None:
        return None
    from provisioner.render.container import container_context  # lazy: startup

    return container_context(loaded.profile.stack, target.cloud, loaded.resolved.image)


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
    check_renderable(profile)
    driver, cuda, python, data = _phases(loaded, target, facts)
    container, perf = _container(loaded, target), _perf_fields(profile)
    # last: the expectation the ready gate judges by (verify/expect.py), over the record and the data phase
    expected = expected_json(loaded, target, data)
    return ScriptContext(
        profile_name=profile.name,
        profile_hash=loaded.hash,
        cloud=target.cloud,
        instance_type=target.instance_type,
        region=target.region,
        zone=target.zone or "",
        **driver,
        **cuda,
        **python,
        **data,
        **lifecycle_fields(lifecycle if lifecycle is not None else profile.lifecycle, target.cloud),
        expected_json=expected,
        container=container,
        **perf,
        cluster=cluster_context(profile.hardware.nodes, target.cloud, target.instance_type, target.gpu_count),
        image_mode=image_mode,
        rehearsal=target.rehearsal,
    )


def _phases(loaded: LoadedProfile, target: RenderTarget, facts: Facts) -> tuple[DriverFields, CudaFields, PythonFields, DataFields]:
    """The install and data phases, each handed its part of the record (render/install.py, render/data.py)."""
    p, rec = loaded.profile, loaded.resolved
    fresh = loaded.lock if loaded.lock is not None and loaded.lock_state == "fresh" else None
    stale = (None if loaded.lock_state == "fresh" else
             f"{loaded.lock_path} is stale (the profile changed since it was written); run `trainvm lock {loaded.path}`")
    driver, cuda = driver_fields(p.stack, fresh, target, facts), cuda_fields(p.stack, rec.cuda)  # in the phases' order
    python = python_fields(p.stack, requirements_lock(loaded.requirements_path, loaded.lock, stale=stale))
    return (driver, cuda, python, data_fields(p.data, p.stack, p.lifecycle, target, local_nvme_gib=p.hardware.local_nvme_gib,
                                              actions_used=rec.lifecycle.actions_used, image=rec.image))


def stack_fields(loaded: LoadedProfile, target: RenderTarget, facts: Facts | None = None) -> dict[str, object]:
    """The install phases' values a bake's identity hashes (providers/image_identity.py ``stack_doc``), from the
    record alone: what ``stack_fields(build_context(...))`` gives, without the expectation, the container, the perf
    probe, the cluster or any template (``bake/use.py offer_stack``, once per offer ``up`` tries)."""
    from provisioner.providers.image_identity import stack_doc  # lazy: startup (`plan --json` renders, never bakes)

    check_renderable(loaded.profile)
    driver, cuda, python, data = _phases(loaded, target, facts or load_facts())
    return stack_doc({**driver, **cuda, **python, **data})
