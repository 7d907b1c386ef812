"""``trainvm stop`` / ``trainvm start`` on Compute Engine (instances.stop / instances.start).

stop: the instance goes TERMINATED: vCPU/GPU/RAM billing ends; the boot disk (and its data) stays and
bills; the ephemeral external IP is released (start gives a new one); Local SSD data is discarded
(``discardLocalSsd=true``: GCE refuses to stop a VM with Local SSD otherwise, except on the few machine
types that can preserve it; the startup script re-stages data on the next boot). start: the instance boots
again and GCE runs its ``startup-script`` on every boot, so the script re-verifies the stack (phase
markers: nothing is reinstalled) and re-stages local data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provisioner.providers import gcp_errors as errs
from provisioner.providers.base import ConflictError, InstanceRecord
from provisioner.providers.gcp_api import GceApi


def _managed(gce: GceApi, name: str) -> tuple[Any, str] | None:
    inst, _ = gce.find_any(name)
    if inst is None:
        return None
    zone = inst.zone.rsplit("/", 1)[-1]
    if dict(inst.labels).get("trainvm-managed") != "true":
        raise ConflictError(f"{name} in {zone} is not managed by trainvm (no trainvm-managed label); not touching it")
    return inst, zone


def power(gce: GceApi, name: str, action: str, record: Callable[[Any], InstanceRecord], *,
          wait: bool = True) -> InstanceRecord | None:
    """Stop or start ``name``; the record after it (None when there is no such VM)."""
    found = _managed(gce, name)
    if found is None:
        return None
    inst, zone = found
    api = gce.clients()
    if action == "stop":
        req = api.v1.StopInstanceRequest(project=api.project, zone=zone, instance=name, discard_local_ssd=True)
        op = gce.call(lambda: api.instances.stop_unary(request=req, retry=None, timeout=gce.http_timeout))
    else:
        op = gce.call(lambda: api.instances.start_unary(project=api.project, zone=zone, instance=name,
                                                              retry=None, timeout=gce.http_timeout))
    if wait:
        failure = errs.from_operation(gce.wait(zone, op, gce.deadline()))
        if failure:
            raise errs.classify(failure)
    return record(gce.get(zone, name) or inst)
