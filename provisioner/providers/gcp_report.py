"""Reading a GCE VM's stack report: the ``trainvm/report`` guest attribute, else the last
``TRAINVM_REPORT=<base64>`` line on serial port 1 (every page of the console buffer). Used by
``GcpProvider.read_report``; the SDK calls go through the provider's ``_call`` (retries, classification)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import TYPE_CHECKING, Any

from provisioner.providers.base import ProviderError

if TYPE_CHECKING:
    from provisioner.providers.gcp import GcpProvider

HTTP_TIMEOUT = 60.0
REPORT_RE = re.compile(r"TRAINVM_REPORT=([A-Za-z0-9+/=_-]+)")
MAX_SERIAL_PAGES = 64


def _decode_report(text: str | None) -> dict[str, Any] | None:
    """A report value: JSON, or base64 (standard or url-safe) of JSON; None when neither."""
    if not text:
        return None
    text = text.strip()
    candidates = [text] if text.startswith("{") else []
    for decoder in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            candidates.append(decoder(text + "=" * (-len(text) % 4)).decode())
        except (binascii.Error, ValueError, UnicodeDecodeError):
            pass
    for c in candidates:
        try:
            value = json.loads(c)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def guest_report(provider: GcpProvider, zone: str, name: str) -> dict[str, Any] | None:
    api = provider.api()
    req = api.v1.GetGuestAttributesInstanceRequest(project=api.project, zone=zone, instance=name,
                                                   variable_key="trainvm/report")
    try:
        got = provider._call(lambda: api.instances.get_guest_attributes(request=req, retry=None, timeout=provider.http_timeout),
                         missing=None)
    except ProviderError:  # not enabled (400), no permission (403): the console still has the report
        return None
    return _decode_report(got.variable_value) if got is not None else None


def serial_report(provider: GcpProvider, zone: str, name: str) -> dict[str, Any] | None:
    """The last decodable ``TRAINVM_REPORT=<base64>`` on serial port 1 (all pages of the buffer)."""
    api, start, tail, last = provider.api(), 0, "", None

    def scan(text: str) -> None:
        nonlocal last
        for m in REPORT_RE.finditer(text):
            last = _decode_report(m.group(1)) or last

    for _ in range(MAX_SERIAL_PAGES):
        req = api.v1.GetSerialPortOutputInstanceRequest(project=api.project, zone=zone, instance=name, port=1,
                                                        start=start)
        out = provider._call(lambda: api.instances.get_serial_port_output(request=req, retry=None, timeout=provider.http_timeout),
                         missing=None)
        if out is None or not out.contents:
            break
        text = tail + out.contents
        cut = text.rfind("\n") + 1
        scan(text[:cut])
        tail = text[cut:]
        if int(out.next_ or 0) <= start:
            break
        start = int(out.next_)
    scan(tail)
    return last
