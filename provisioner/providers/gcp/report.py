"""Reading a GCE VM's stack report: the ``trainvm/report`` guest attribute, else the last
``TRAINVM_REPORT=<base64>`` line on serial port 1 (every page of the console buffer). Used by
``GcpProvider.read_report``; the SDK calls go through ``GceApi.call`` (retries, classification)."""

from __future__ import annotations

import re
from functools import partial

from provisioner.providers.base import ProviderError
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.stack_report import StackReport, last_console_report, read_report

MAX_SERIAL_PAGES = 64


def guest_report(gce: GceApi, zone: str, name: str) -> StackReport | None:
    api = gce.clients()
    req = api.v1.GetGuestAttributesInstanceRequest(project=api.project, zone=zone, instance=name,
                                                   variable_key="trainvm/report")
    try:
        got = gce.call(lambda: api.instances.get_guest_attributes(request=req, retry=None, timeout=gce.http_timeout),
                         missing=None)
    except ProviderError:  # not enabled (400), no permission (403): the console still has the report
        return None
    if got is None:
        return None
    return read_report(got.variable_value, f"the stack report of {name} (guest attribute trainvm/report)")


STATUS_RE = re.compile(r"ready|rehearsed|running:[\w.-]+|failed:[\w.-]+:\d*")


def guest_status(gce: GceApi, zone: str, name: str) -> str | None:
    """The ``trainvm/status`` guest attribute the startup script writes through the metadata server
    (``running:PHASE`` when a phase starts installing, ``ready``, ``failed:PHASE:LINE``); None when it is
    not written yet, guest attributes are off or unreadable, or the value is not a status."""
    api = gce.clients()
    req = api.v1.GetGuestAttributesInstanceRequest(project=api.project, zone=zone, instance=name,
                                                   variable_key="trainvm/status")
    try:
        got = gce.call(partial(api.instances.get_guest_attributes, request=req, retry=None, timeout=gce.http_timeout),
                       missing=None)
    except ProviderError:  # not enabled (400), no permission (403): the console is the fallback
        return None
    value = (got.variable_value or "").strip() if got is not None else ""
    return value if STATUS_RE.fullmatch(value) else None


def serial_text(gce: GceApi, zone: str, name: str, start: int = 0) -> tuple[str, int]:
    """Serial port 1 from byte ``start`` (every page of the console buffer): (text, next start).
    GCE keeps the last 1 MiB; a ``start`` older than that returns from the oldest byte kept."""
    api, chunks, pos = gce.clients(), [], start
    for _ in range(MAX_SERIAL_PAGES):
        req = api.v1.GetSerialPortOutputInstanceRequest(project=api.project, zone=zone, instance=name, port=1,
                                                        start=pos)
        out = gce.call(partial(api.instances.get_serial_port_output, request=req, retry=None, timeout=gce.http_timeout),
                       missing=None)
        if out is None or not out.contents:
            break
        chunks.append(out.contents)
        if int(out.next_ or 0) <= pos:
            break
        pos = int(out.next_)
    return "".join(chunks), pos


def serial_report(gce: GceApi, zone: str, name: str) -> StackReport | None:
    """The last ``TRAINVM_REPORT=<base64>`` on serial port 1 (ReportUnreadableError when it cannot be read)."""
    return last_console_report(serial_text(gce, zone, name)[0], f"{name}'s serial port 1")
