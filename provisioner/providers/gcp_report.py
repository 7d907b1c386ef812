"""Reading a GCE VM's stack report: the ``trainvm/report`` guest attribute, else the last
``TRAINVM_REPORT=<base64>`` line on serial port 1 (every page of the console buffer). Used by
``GcpProvider.read_report``; the SDK calls go through the provider's ``_call`` (retries, classification)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from provisioner.providers.base import ProviderError
from provisioner.verify.report import StackReport, decode_report, last_console_report

if TYPE_CHECKING:
    from provisioner.providers.gcp import GcpProvider

HTTP_TIMEOUT = 60.0
MAX_SERIAL_PAGES = 64


def guest_report(provider: GcpProvider, zone: str, name: str) -> StackReport | None:
    api = provider.api()
    req = api.v1.GetGuestAttributesInstanceRequest(project=api.project, zone=zone, instance=name,
                                                   variable_key="trainvm/report")
    try:
        got = provider._call(lambda: api.instances.get_guest_attributes(request=req, retry=None, timeout=provider.http_timeout),
                         missing=None)
    except ProviderError:  # not enabled (400), no permission (403): the console still has the report
        return None
    return decode_report(got.variable_value) if got is not None else None


def serial_text(provider: GcpProvider, zone: str, name: str, start: int = 0) -> tuple[str, int]:
    """Serial port 1 from byte ``start`` (every page of the console buffer): (text, next start).
    GCE keeps the last 1 MiB; a ``start`` older than that returns from the oldest byte kept."""
    api, chunks, pos = provider.api(), [], start
    for _ in range(MAX_SERIAL_PAGES):
        req = api.v1.GetSerialPortOutputInstanceRequest(project=api.project, zone=zone, instance=name, port=1,
                                                        start=pos)
        out = provider._call(partial(api.instances.get_serial_port_output, request=req, retry=None, timeout=provider.http_timeout),
                         missing=None)
        if out is None or not out.contents:
            break
        chunks.append(out.contents)
        if int(out.next_ or 0) <= pos:
            break
        pos = int(out.next_)
    return "".join(chunks), pos


def serial_report(provider: GcpProvider, zone: str, name: str) -> StackReport | None:
    """The last decodable ``TRAINVM_REPORT=<base64>`` on serial port 1."""
    return last_console_report(serial_text(provider, zone, name)[0])
