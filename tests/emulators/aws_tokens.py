"""RunInstances idempotency for the fault proxy (tests/emulators/aws_faults.py): moto 5.2.5 ignores
``ClientToken`` and launches again on every retry. EC2 ("Ensuring idempotency in Amazon EC2 API requests"):

- a RunInstances whose token succeeded before, with the same parameters, launches nothing and is answered with
  that request's reservation as it is now (terminated instances included: a token stays bound to them);
- the same token with other parameters is refused with ``IdempotentParameterMismatch``;
- a request that failed does not bind its token.

Tokens are per region. Two requests with one token at once (two `up` of one profile) are answered one after the
other (``claim``): the second sees the first's instances, as EC2 answers an idempotent request with the one
reservation; before, both looked the token up before either had launched, and moto launched twice. Not modelled: the expiry of a token (at least 24 hours after its instances are
terminated in EC2), and that EC2 compares parameters semantically (here: the form parameters byte for byte,
which is what a botocore retry resends).
"""

from __future__ import annotations

import contextlib
import re
import threading
import xml.etree.ElementTree as ET
from typing import Any

from tests.emulators.aws_placement import Answer, error


class ClientTokens:
    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], tuple[dict[str, str], list[str]]] = {}
        self.lock = threading.Lock()

        self.claims: dict[tuple[str, str], threading.Lock] = {}

    def clear(self) -> None:
        with self.lock:
            self.seen.clear()

    def claim(self, region: str, params: dict[str, str]) -> Any:
        """A lock held from ``lookup`` to ``launched`` for the request's token (a no-op lock without one)."""
        token = params.get("ClientToken")
        if not token:
            return contextlib.nullcontext()
        with self.lock:
            return self.claims.setdefault((region, token), threading.Lock())

    def lookup(self, region: str, params: dict[str, str]) -> Answer | list[str] | None:
        """None: a new token (launch); the instance ids to answer with; or the mismatch error."""
        token = params.get("ClientToken")
        if not token:
            return None
        with self.lock:
            known = self.seen.get((region, token))
        if known is None:
            return None
        if known[0] != params:
            return error("IdempotentParameterMismatch", "Arguments on this idempotent request are inconsistent with "
                         "arguments used in previous request(s).")
        return list(known[1])

    def launched(self, region: str, params: dict[str, str], body: bytes) -> None:
        token = params.get("ClientToken")
        if token:
            with self.lock:
                self.seen[(region, token)] = (dict(params), re.findall(r"<instanceId>(i-[0-9a-f]+)</instanceId>",
                                                                       body.decode()))


def describe_body(ids: list[str]) -> bytes:
    from urllib.parse import urlencode

    return urlencode({"Action": "DescribeInstances", "Version": "2016-11-15",
                      **{f"InstanceId.{i + 1}": iid for i, iid in enumerate(ids)}}).encode()


def as_run_instances(describe: bytes) -> bytes:
    """A DescribeInstances answer (one reservation) as the RunInstances answer of that reservation."""
    root = ET.fromstring(describe)
    ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
    q = (lambda t: f"{{{ns}}}{t}") if ns else (lambda t: t)
    reservation = root.find(f"{q('reservationSet')}/{q('item')}")
    out = ET.Element(q("RunInstancesResponse"))
    for child in [root.find(q("requestId")), *(list(reservation) if reservation is not None else [])]:
        if child is not None:
            out.append(child)
    if ns:
        ET.register_namespace("", ns)
    return ET.tostring(out, encoding="utf-8", xml_declaration=True)
