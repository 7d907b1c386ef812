"""``trainvm stop`` / ``trainvm start`` on Azure: deallocate / start through Azure Resource Manager.

stop is *deallocate* (PowerState/deallocated): compute billing ends; the OS disk and the Standard static
public IP stay (both bill; the IP keeps its address); the temporary/NVMe disk is wiped. A power-off that
keeps the VM allocated ("Stopped") would keep billing compute: never used. start boots the VM; cloud-init
does not re-run customData, but the installed trainvm-provision.service runs the script on every boot,
which re-verifies the stack (phase markers: nothing is reinstalled) and re-stages local data.
"""

from __future__ import annotations

from typing import Any

from provisioner.providers import azure_request as R
from provisioner.providers.base import ConflictError, InstanceRecord


def power(provider: Any, name: str, action: str, *, wait: bool = True) -> InstanceRecord | None:
    """Deallocate or start ``name``; the record after it (None when there is no such VM)."""
    n = R.names(name)
    vm = provider._get_vm(n.rg, name)
    if vm is None:
        return None
    if (vm.get("tags") or {}).get("trainvm-managed") != "true":
        raise ConflictError(f"{name} in resource group {n.rg} is not managed by trainvm; not touching it")
    ops = provider.api().compute.virtual_machines
    begin = ops.begin_deallocate if action == "stop" else ops.begin_start
    poller = provider._call(lambda: begin(n.rg, name))
    if wait:
        provider._wait(poller, provider._clock() + provider.op_timeout, f"{'deallocating' if action == 'stop' else 'starting'} {name}")
    return provider._record(provider._get_vm(n.rg, name) or vm)
