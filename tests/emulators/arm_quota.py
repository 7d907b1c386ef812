"""Compute usages for the ARM emulator: ``GET /subscriptions/S/providers/Microsoft.Compute/locations/L/usages``
(Usage - List, https://learn.microsoft.com/rest/api/compute/usage/list), the answer in the documented shape:
``{"value": [{"unit": "Count", "currentValue", "limit", "name": {"value", "localizedValue"}}], "nextLink"}``.

A test sets a quota with ``set_quota(emu, location, name, limit, current=0)`` (``name`` as Azure spells it:
``standardNCASv3_T4Family``, ``cores``, ``lowPriorityCores``). A location answers what was set for it plus
``cores`` and ``lowPriorityCores`` at 100/0 (unset VM families are not listed). Not modelled: usage growing
with the VMs the emulator creates (the test sets ``current``), and the many other counters Azure lists
(availability sets, disks, ...); localizedValue is a plain rendering, not Azure's exact wording."""
from __future__ import annotations

DEFAULTS = {"cores": (100, 0), "lowPriorityCores": (100, 0)}
LOCALIZED = {"cores": "Total Regional vCPUs", "lowPriorityCores": "Total Regional Low-priority vCPUs"}


def set_quota(emu, location: str, name: str, limit: int, current: int = 0) -> None:
    table = emu.__dict__.setdefault("_usages", {})
    table.setdefault(location.lower(), dict(DEFAULTS))[name] = (int(limit), int(current))


def usages(emu, location: str) -> list[dict]:
    table = emu.__dict__.get("_usages", {}).get(location.lower(), DEFAULTS)
    return [{"unit": "Count", "currentValue": cur, "limit": lim,
             "name": {"value": name, "localizedValue": LOCALIZED.get(name, f"{name} vCPUs")}}
            for name, (lim, cur) in table.items()]
