"""What ``lifecycle.on_idle`` / ``lifecycle.on_max_run`` (``stop`` | ``delete``), ``trainvm stop`` and
``trainvm down`` do on each cloud, in words: what `plan`, `up`, `stop` and the README say about compute
billing, disks and data. Pure (no SDK); the per-cloud facts are the registry's ``CloudSpec.lifecycle``.

Sources (local NVMe/scratch is lost on stop on every cloud, the clouds' own documentation: GCE local SSD "lost on stop", Azure NVMe temp disks "must be initialized after every
stop/deallocate", AWS instance store keys "destroyed when the instance is stopped"); the clouds' billing
rules: a GCE TERMINATED VM and a *deallocated* Azure VM bill no compute (an Azure VM shut down from the
guest is "Stopped" and still bills compute); persistent disks bill while they exist.
"""

from __future__ import annotations

from typing import Any

from provisioner.providers.registry import CLOUDS

ACTIONS = ("stop", "delete")

#: cloud -> action -> what the cloud does (the mechanism, as the user sees it in the console); from the registry.
MECHANISM: dict[str, dict[str, str]] = {n: {"stop": c.lifecycle.stop, "delete": c.lifecycle.delete} for n, c in CLOUDS.items()}

#: cloud -> what keeps billing after a stop (besides nothing for compute).
KEPT_BILLING: dict[str, str] = {n: c.lifecycle.kept_billing for n, c in CLOUDS.items()}


def allocated_while_stopped(cloud: str, state: str) -> bool:
    """A VM in ``state`` is not running yet still bills compute (``LifecycleFacts.allocated_states``: Azure's
    PowerState/stopped, a poweroff from inside the guest)."""
    spec = CLOUDS.get(cloud)
    return spec is not None and state.upper() in spec.lifecycle.allocated_states


def on_vm_max_run_seconds(cloud: str, hours: float | None) -> int:
    """Seconds for the VM's own max-run timer: 0 without a limit or where the cloud enforces it."""
    if not hours or CLOUDS[cloud].lifecycle.enforces_max_run:
        return 0
    return max(60, round(hours * 3600))


def guest_shutdown_action(on_idle: str, on_max_run: str, idle_minutes: int | None, max_run_hours: float | None) -> str:
    """Where the cloud lets the create request choose what a shutdown from inside the guest does (AWS
    ``InstanceInitiatedShutdownBehavior``): ``delete`` only when every lifecycle action in use is delete, else
    ``stop``. The watchdog and the max-run timer shut down that way for the action it does (api_actions), and fall
    back to it when the VM's own call of the cloud's API for the other fails (AWS: the helper's signed
    TerminateInstances, refused or unreachable), so a mixed setting always ends compute billing and never deletes
    what was meant to stop: its ``delete`` then stops (disks kept) instead."""
    used = ([on_idle] if idle_minutes else []) + ([on_max_run] if max_run_hours else [])
    return "delete" if used and all(a == "delete" for a in used) else "stop"


def api_actions(used: list[str], shutdown_does: str) -> set[str]:
    """The lifecycle actions in ``used`` that a shutdown from inside the guest (``shutdown_does``) does not do: the
    VM does those through the cloud's API (AWS: the helper's EC2 TerminateInstances of a mixed stop/delete, which
    the instance profile allows; a guest shutdown set to the one action in use is that action exactly)."""
    return {a for a in used if a != shutdown_does}


def guest_shutdown_does(cloud: str, lifecycle: Any) -> str:
    """What a shutdown from inside the guest does on ``cloud`` for ``lifecycle``: stop | delete | keep-billing."""
    does = CLOUDS[cloud].lifecycle.guest_shutdown
    if does != "settable":
        return does
    return guest_shutdown_action(lifecycle.on_idle, lifecycle.on_max_run, lifecycle.idle_shutdown_minutes,
                                 lifecycle.max_run_hours)


def mixed_fallback_line(lifecycle: Any, cloud: str | None) -> str | None:
    """On a cloud whose guest shutdown is chosen at create, a mixed lifecycle (one action stop, the other
    delete): the shutdown is set to stop, the delete is the VM's own API call; say what happens when that fails."""
    if cloud is None or cloud not in CLOUDS or CLOUDS[cloud].lifecycle.guest_shutdown != "settable":
        return None
    used = {a for a, on in ((lifecycle.on_idle, lifecycle.idle_shutdown_minutes), (lifecycle.on_max_run, lifecycle.max_run_hours)) if on}
    if used != {"stop", "delete"}:
        return None
    return (f"mixed stop/delete on {cloud}: the `stop` is a guest shutdown set to stop, the `delete` the VM's own API call; "
            "should that call fail, the `delete` also ends in that shutdown: it stops the VM and keeps its disk (it bills "
            "until `trainvm down`)")


SCRATCH_LOST = "local NVMe/scratch data is lost (re-staged on start)"

def effect(cloud: str, action: str) -> dict[str, str]:
    """compute / disks / data for ``action`` on ``cloud``."""
    if action == "stop":
        return {"compute": "ends", "disks": f"kept: {KEPT_BILLING[cloud]}", "data": "boot disk data kept; " + SCRATCH_LOST}
    return {"compute": "ends", "disks": "deleted (billing ends)", "data": "all lost"}


def mechanism(cloud: str, action: str, lifecycle: Any = None) -> str:
    """What ``action`` is on ``cloud``, as the console shows it. With ``lifecycle``: where the guest shutdown is set
    at create and a mixed setting sets it to the other action (api_actions), the VM's own API call
    (``LifecycleFacts.self_delete``: AWS TerminateInstances, the shutdown behaviour staying stop)."""
    facts = CLOUDS[cloud].lifecycle
    if lifecycle is not None and action == "delete" and facts.self_delete and facts.guest_shutdown == "settable":
        used = [a for a, on in ((lifecycle.on_idle, lifecycle.idle_shutdown_minutes),
                                (lifecycle.on_max_run, lifecycle.max_run_hours)) if on]
        if action in api_actions(used, guest_shutdown_does(cloud, lifecycle)):
            return facts.self_delete
    return MECHANISM[cloud][action]


def describe(cloud: str | None, action: str, lifecycle: Any = None) -> str:
    """One sentence: what ``action`` does (on ``cloud`` when known; for ``lifecycle``'s settings when given)."""
    if cloud not in MECHANISM:
        if action == "stop":
            return "stop: compute billing ends; disks and their data stay (and keep billing); " + SCRATCH_LOST
        return "delete: the VM and its disks are deleted; billing ends and nothing stays"
    e = effect(cloud, action)
    how = mechanism(cloud, action, lifecycle)
    if action == "stop":
        return f"{how}: compute billing ends, {KEPT_BILLING[cloud]}; {SCRATCH_LOST}"
    return f"{how}: billing ends, {e['data']}"


def idle_gpu(lifecycle: Any) -> dict[str, int] | None:
    """The stalled-GPU idle rule (templates/files/trainvm-idle-watchdog.sh), None when off."""
    minutes = getattr(lifecycle, "idle_gpu_minutes", None)
    return {"util_percent": lifecycle.idle_gpu_util_percent, "minutes": minutes} if minutes else None


def idle_gpu_line(lifecycle: Any) -> str | None:
    """What `plan` and `up` say about the stalled-GPU rule (None without idle shutdown: it only feeds it)."""
    if not lifecycle.idle_shutdown_minutes:
        return None
    rule = idle_gpu(lifecycle)
    if rule is None:
        return "stalled GPU: a process holding the GPU is always busy (idle_gpu_minutes: null)"
    return (f"stalled GPU: a process holding the GPU below {rule['util_percent']} % for {rule['minutes']} min counts as idle "
            f"(then idle shutdown after {lifecycle.idle_shutdown_minutes} min)")


def summary(lifecycle: Any, cloud: str | None) -> dict[str, Any]:
    """The lifecycle block of `plan --json` (and the `up` prompt): settings plus what they do on ``cloud``."""
    idle = lifecycle.idle_shutdown_minutes
    hours = lifecycle.max_run_hours
    return {
        "idle_shutdown_minutes": idle,
        "on_idle": lifecycle.on_idle,
        "on_idle_effect": describe(cloud, lifecycle.on_idle, lifecycle) if idle else None,
        "idle_gpu": idle_gpu(lifecycle) if idle else None,
        "max_run_hours": hours,
        "on_max_run": lifecycle.on_max_run,
        "on_max_run_effect": describe(cloud, lifecycle.on_max_run, lifecycle) if hours else None,
    }


def spot_line(lifecycle: Any, cloud: str | None) -> str | None:
    spec = CLOUDS.get(cloud) if cloud else None
    return spec.lifecycle.spot_reclaim(lifecycle.on_max_run) if spec else None


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
    lines = [f"{idle}; {run}"] + [f"{a}{' on ' + cloud if cloud else ''}: {describe(cloud, a, lifecycle)}" for a in used]
    gpu_rule = idle_gpu_line(lifecycle)
    lines += [gpu_rule] if gpu_rule else []
    mixed = mixed_fallback_line(lifecycle, cloud)
    lines += [mixed] if mixed else []
    reclaim = spot_line(lifecycle, cloud) if spot else None
    return lines + ([f"spot: {reclaim}"] if reclaim else [])
