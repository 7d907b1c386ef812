"""What ``lifecycle.on_idle`` / ``lifecycle.on_max_run`` (``stop`` | ``delete``), ``trainvm stop`` and
``trainvm down`` do on each cloud, in words: what `plan`, `up`, `stop` and the README say about compute
billing, disks and data. Pure (no SDK); per-cloud facts live in this table, not in branches elsewhere.

Sources: /work/shared/knowledge/startup-scripts.md section 7 (local NVMe/scratch is lost on stop on every
cloud: GCE local SSD "lost on stop", Azure NVMe temp disks "must be initialized after every
stop/deallocate", AWS instance store keys "destroyed when the instance is stopped"); the clouds' billing
rules: a GCE TERMINATED VM and a *deallocated* Azure VM bill no compute (an Azure VM shut down from the
guest is "Stopped" and still bills compute); persistent disks bill while they exist.
"""

from __future__ import annotations

from typing import Any

ACTIONS = ("stop", "delete")

#: cloud -> action -> what the cloud does (the mechanism, as the user sees it in the console).
MECHANISM: dict[str, dict[str, str]] = {
    "gcp": {
        "stop": "the instance is stopped (TERMINATED)",
        "delete": "the instance and its boot disk are deleted",
    },
    "azure": {
        "stop": "the VM is deallocated through Azure Resource Manager (a guest poweroff alone would keep billing)",
        "delete": "the VM, its OS disk, NIC and public IP are deleted through Azure Resource Manager",
    },
    "aws": {
        "stop": "the instance is stopped (InstanceInitiatedShutdownBehavior=stop)",
        "delete": "the instance is terminated and its EBS root volume deleted (InstanceInitiatedShutdownBehavior=terminate)",
    },
}

#: cloud -> what keeps billing after a stop (besides nothing for compute).
KEPT_BILLING: dict[str, str] = {
    "gcp": "the boot disk keeps billing",
    "azure": "the OS disk and the Standard static public IP keep billing",
    "aws": "the EBS root volume keeps billing",
}

#: clouds that enforce lifecycle.max_run_hours themselves (GCE scheduling.maxRunDuration); elsewhere a
#: systemd timer on the VM (OnBootSec: the limit counts from each boot, as GCE counts from each start).
CLOUD_ENFORCES_MAX_RUN = frozenset({"gcp"})

#: what a shutdown from inside the guest does: GCE stops the instance; AWS does what
#: InstanceInitiatedShutdownBehavior (from on_idle) says; Azure keeps the VM allocated and billed.
GUEST_SHUTDOWN = {"gcp": lambda on_idle: "stop", "aws": lambda on_idle: on_idle, "azure": lambda on_idle: "keep-billing"}


def on_vm_max_run_seconds(cloud: str, hours: float | None) -> int:
    """Seconds for the VM's own max-run timer: 0 without a limit or where the cloud enforces it."""
    if not hours or cloud in CLOUD_ENFORCES_MAX_RUN:
        return 0
    return max(60, round(hours * 3600))


def guest_shutdown_does(cloud: str, on_idle: str) -> str:
    return GUEST_SHUTDOWN[cloud](on_idle)


SCRATCH_LOST = "local NVMe/scratch data is lost (re-staged on start)"

def effect(cloud: str, action: str) -> dict[str, str]:
    """compute / disks / data for ``action`` on ``cloud``."""
    if action == "stop":
        return {"compute": "ends", "disks": f"kept: {KEPT_BILLING[cloud]}", "data": "boot disk data kept; " + SCRATCH_LOST}
    return {"compute": "ends", "disks": "deleted (billing ends)", "data": "all lost"}


def describe(cloud: str | None, action: str) -> str:
    """One sentence: what ``action`` does (on ``cloud`` when known)."""
    if cloud not in MECHANISM:
        if action == "stop":
            return "stop: compute billing ends; disks and their data stay (and keep billing); " + SCRATCH_LOST
        return "delete: the VM and its disks are deleted; billing ends and nothing stays"
    e = effect(cloud, action)
    if action == "stop":
        return f"{MECHANISM[cloud][action]}: compute billing ends, {KEPT_BILLING[cloud]}; {SCRATCH_LOST}"
    return f"{MECHANISM[cloud][action]}: billing ends, {e['data']}"


def summary(lifecycle: Any, cloud: str | None) -> dict[str, Any]:
    """The lifecycle block of `plan --json` (and the `up` prompt): settings plus what they do on ``cloud``."""
    idle = lifecycle.idle_shutdown_minutes
    hours = lifecycle.max_run_hours
    return {
        "idle_shutdown_minutes": idle,
        "on_idle": lifecycle.on_idle,
        "on_idle_effect": describe(cloud, lifecycle.on_idle) if idle else None,
        "max_run_hours": hours,
        "on_max_run": lifecycle.on_max_run,
        "on_max_run_effect": describe(cloud, lifecycle.on_max_run) if hours else None,
    }


#: what reclaiming a spot VM does, per cloud (GCE: the one instanceTerminationAction that on_max_run sets)
SPOT_RECLAIM = {
    "gcp": lambda lc: f"a preempted spot VM is {'deleted' if lc.on_max_run == 'delete' else 'stopped (disk kept)'}, as on_max_run says",
    "azure": lambda lc: "an evicted spot VM is deleted with its disk (evictionPolicy Delete)",
    "aws": lambda lc: "a reclaimed spot instance is terminated",
}


def spot_line(lifecycle: Any, cloud: str | None) -> str | None:
    return SPOT_RECLAIM[cloud](lifecycle) if cloud in SPOT_RECLAIM else None


def summary_lines(lifecycle: Any, cloud: str | None, *, spot: bool = False) -> list[str]:
    """Human lines for `plan` / `up`: the settings, then what each action used does on ``cloud``."""
    s = summary(lifecycle, cloud)
    idle = (f"idle {s['idle_shutdown_minutes']} min -> {s['on_idle']}" if s["idle_shutdown_minutes"]
            else "no idle shutdown (the VM bills until stopped or deleted)")
    run = f"max run {s['max_run_hours']:g} h -> {s['on_max_run']}" if s["max_run_hours"] else "no max run"
    used = []
    for key, on in (("idle_shutdown_minutes", "on_idle"), ("max_run_hours", "on_max_run")):
        if s[key] and s[on] not in used:
            used.append(s[on])
    lines = [f"{idle}; {run}"] + [f"{a}{' on ' + cloud if cloud else ''}: {describe(cloud, a)}" for a in used]
    reclaim = spot_line(lifecycle, cloud) if spot else None
    return lines + ([f"spot: {reclaim}"] if reclaim else [])
