"""``trainvm stop`` / ``trainvm start`` on Azure: deallocate / start through Azure Resource Manager.

stop is *deallocate* (PowerState/deallocated): compute billing ends; the OS disk and the Standard static
public IP stay (both bill; the IP keeps its address); the temporary/NVMe disk is wiped. A power-off that
keeps the VM allocated ("Stopped") would keep billing compute: never used. start boots the VM; cloud-init
does not re-run customData, but the installed trainvm-provision.service runs the script on every boot,
which re-verifies the stack (phase markers: nothing is reinstalled) and re-stages local data.

Also what a VM's (or scale-set instance's) instance view says about power: ``vm_state`` and ``latest_start``.
The calls: ``power`` (a single VM, in ``azure_records``) and ``azure_group.power`` (a scale set).
"""

from __future__ import annotations

from provisioner.providers.azure.arm import Props, Status


def _statuses(props: Props) -> list[Status]:
    return list((props.get("instanceView") or {}).get("statuses") or [])


def vm_state(props: Props) -> str:
    """RUNNING / STOPPED / DEALLOCATED... from the power state; the provisioning state while not Succeeded."""
    prov = props.get("provisioningState") or "Unknown"
    if prov != "Succeeded":
        return {"Creating": "PROVISIONING", "Canceled": "FAILED"}.get(prov, prov.upper())
    for st in _statuses(props):
        code = st.get("code") or ""
        if code.startswith("PowerState/"):
            return code.split("/", 1)[1].upper()
    return "SUCCEEDED"


def latest_start(props: Props) -> str | None:
    """The latest time a running VM can have started; None unless it runs.

    Azure reports no start time: its ``PowerState/*`` statuses carry none. A start (like a deallocate, a
    restart or a model update) is a control-plane update whose completion sets the ``time`` of the instance
    view's ``ProvisioningState/succeeded`` status (learn.microsoft.com/azure/virtual-machines/states-billing),
    and any later update (tags, resize) moves it later still. So while the VM runs, it started at or before
    that time, and the cost counted from it is a lower bound ("at least")."""
    if vm_state(props) != "RUNNING":
        return None
    for st in _statuses(props):
        if (st.get("code") or "").lower() == "provisioningstate/succeeded" and st.get("time"):
            t = st["time"]
            return t.isoformat() if hasattr(t, "isoformat") else str(t)
    return None
