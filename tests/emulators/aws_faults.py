"""A fault-injection proxy in front of moto's server (loopback, plain HTTP).

Every request is forwarded to moto unchanged, except the ones a rule matches, which get the error EC2
itself would send (EC2 query protocol: ``<Response><Errors><Error><Code>..``), so that boto3/botocore parse,
retry and classify it as they would a real answer. moto cannot produce capacity, quota or throttling errors,
and its instances are ``running`` at once; the proxy adds:

- ``fail(action, code, message, status, times, when)``: answer ``times`` matching requests with that error
  (``when``: form parameters that must match, e.g. ``{"Placement.AvailabilityZone": "us-east-1b"}``);
- ``hold_pending(instance_id | "*")`` / ``hold_next_created()``: DescribeInstances reports those instances (the
  next one RunInstances creates) as ``pending`` (an instance that never reaches running);
- ``set_capacity(zone_name, room)``: from now on that AZ has room for ``room`` more instances: a RunInstances
  whose ``MinCount`` exceeds it is answered ``InsufficientInstanceCapacity`` and launches nothing (EC2's
  all-or-nothing for MinCount); one that fits takes ``MinCount`` of the room (moto launches ``MinCount``);
- ``hang(action, times)``: accept ``times`` matching requests and never answer them (an endpoint that accepts
  connections and then says nothing) until ``release()`` or ``clear()``; the connection is then closed unanswered;
- ``set_console(instance_id, text)``: the VM's console output (what the VM's startup script prints),
  answered for GetConsoleOutput; moto's own answer is a fixed placeholder.

moto keeps an instance's ``launchTime`` from its first launch; EC2 resets it at each start ("the time that the
instance was last launched"), so the proxy reports the time of the instance's last StartInstances instead
(``started``). moto's ``StateTransitionReason`` says "User initiated (... UTC)" where EC2 says "... GMT"; both
are read the same way.

Tags that break EC2's tag restrictions (more than 50 per resource, keys over 128 or values over 256 characters,
keys IMDS does not allow on an instance with tags in instance metadata) are refused as EC2 refuses them, before
moto (which launches the instance and then refuses more than 50 tags) sees them: tests/emulators/aws_tags.py.
Every request is recorded (``requests``: the action and its form parameters) for the tests to assert on.
Placement groups, which moto lacks, are answered by ``placements`` (tests/emulators/aws_placement.py), and
RunInstances' ``ClientToken`` is honoured as EC2 does by ``tokens`` (tests/emulators/aws_tokens.py).
``fail(..., after=True)`` forwards the request first and then answers the error: a call that took effect but
whose answer was lost (botocore retries it with the same ``ClientToken``).
"""

from __future__ import annotations

import base64
import http.client
import re
import socket
import threading
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from tests.emulators.aws_placement import PlacementGroups, region_of
from tests.emulators.aws_tags import tag_error
from tests.emulators.aws_tokens import ClientTokens, as_run_instances, describe_body

HANG = "(hang)"  # a rule's code: the request is never answered
#: HTTP status EC2 uses for each injected code (capacity and throttling are server-side errors there).
STATUS = {"InsufficientInstanceCapacity": 500, "RequestLimitExceeded": 503, "VcpuLimitExceeded": 400,
          "MaxSpotInstanceCountExceeded": 400, "Unsupported": 400, "UnauthorizedOperation": 403,
          "InternalError": 500}
MESSAGES = {
    "InsufficientInstanceCapacity": "We currently do not have sufficient {type} capacity in the Availability Zone you "
                                    "requested ({zone}). Our system will be working on provisioning additional capacity. "
                                    "You can currently get {type} capacity by not specifying an Availability Zone in "
                                    "your request or choosing a different Availability Zone.",
    "VcpuLimitExceeded": "You have requested more vCPU capacity than your current vCPU limit of 0 allows for the "
                         "instance bucket that the specified instance type belongs to. Please visit "
                         "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.",
    "RequestLimitExceeded": "Request limit exceeded.",
    "Unsupported": "Your requested instance type ({type}) is not supported in your requested Availability Zone "
                   "({zone}). Please retry your request by not specifying an Availability Zone or choosing another.",
}


@dataclass
class Rule:
    action: str
    code: str
    status: int
    message: str | None
    times: int
    when: dict[str, str] = field(default_factory=dict)
    after: bool = False  # forward first, then answer the error (the call took effect; its answer was lost)

    def matches(self, action: str, params: dict[str, str]) -> bool:
        return self.times != 0 and action == self.action and all(params.get(k) == v for k, v in self.when.items())


@dataclass
class Recorded:
    action: str
    params: dict[str, str]
    status: int = 0


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        m = re.match(r"http://([^:/]+):(\d+)", upstream)
        assert m, upstream
        self.upstream = (m.group(1), int(m.group(2)))
        self.rules: list[Rule] = []
        self.pending: set[str] = set()
        self.hold_next: dict[str, str] | None = None
        self.consoles: dict[str, str] = {}
        self.started: dict[str, str] = {}  # instance id -> launchTime of its last StartInstances (moto keeps the first)
        self.capacity: dict[str, int] = {}
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self.placements = PlacementGroups()
        self.tokens = ClientTokens()
        self.released = threading.Event()  # what the hung requests wait for
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # TCP_NODELAY: no 40 ms delayed-ACK stall per answer

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                proxy.handle(self) if self.path.split("?")[0] == "/" else proxy.passthrough(self)

            def do_GET(self) -> None:  # noqa: N802
                proxy.handle(self) if self.path.split("?")[0] == "/" else proxy.passthrough(self)

            # S3 (the payload store: path-style /BUCKET/KEY) goes to moto as it is, headers and all
            def do_PUT(self) -> None:  # noqa: N802
                proxy.passthrough(self)

            def do_HEAD(self) -> None:  # noqa: N802
                proxy.passthrough(self)

            def do_DELETE(self) -> None:  # noqa: N802
                proxy.passthrough(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()

    def clear(self) -> None:
        with self.lock:
            self.rules, self.pending, self.consoles, self.requests = [], set(), {}, []
            self.started = {}
            self.capacity = {}
            self.hold_next = None
        self.release()
        self.placements.clear()
        self.tokens.clear()

    # ------------------------------------------------------------------ what the tests call
    def fail(self, action: str, code: str, *, times: int = -1, status: int | None = None, message: str | None = None,
             when: dict[str, str] | None = None, after: bool = False) -> None:
        with self.lock:
            self.rules.append(Rule(action, code, status or STATUS.get(code, 400), message, times, dict(when or {}),
                                   after))

    def hang(self, action: str, *, times: int = -1, when: dict[str, str] | None = None) -> None:
        """``times`` matching requests are read and never answered (until ``release``)."""
        with self.lock:
            self.released = threading.Event()
            self.rules.append(Rule(action, HANG, 0, None, times, dict(when or {})))

    def release(self) -> None:
        """The hung requests end: their connections are closed unanswered."""
        self.released.set()

    def hold_pending(self, instance_id: str = "*") -> None:
        with self.lock:
            self.pending.add(instance_id)

    def hold_next_created(self, when: dict[str, str] | None = None) -> None:
        """The next instance RunInstances creates (with form parameters matching ``when``) is reported
        ``pending`` for good (it never runs)."""
        with self.lock:
            self.hold_next = dict(when or {})

    def set_capacity(self, zone_name: str, room: int) -> None:
        with self.lock:
            self.capacity[zone_name] = room

    def _no_room(self, params: dict[str, str]) -> bool:
        """A RunInstances the AZ has no room for (else the room it takes is booked)."""
        zone, want = params.get("Placement.AvailabilityZone", ""), int(params.get("MinCount") or 1)
        with self.lock:
            if zone not in self.capacity:
                return False
            if want > self.capacity[zone]:
                return True
            self.capacity[zone] -= want
            return False

    def set_console(self, instance_id: str, text: str) -> None:
        with self.lock:
            self.consoles[instance_id] = text

    def calls(self, action: str) -> list[Recorded]:
        return [r for r in self.requests if r.action == action]

    # ------------------------------------------------------------------ the proxy
    def handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        params = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if params.get("Action") == "RunInstances":  # a token's lookup and launch are one step (aws_tokens)
            with self.tokens.claim(region_of(h.headers.get("Authorization")), params):
                return self._handle(h, body, params)
        return self._handle(h, body, params)

    def _handle(self, h: BaseHTTPRequestHandler, body: bytes, params: dict[str, str]) -> None:
        action = params.get("Action", "")
        rec = Recorded(action, params)
        with self.lock:
            self.requests.append(rec)
            rule = next((r for r in self.rules if r.matches(action, params)), None)
            if rule is not None and rule.times > 0:
                rule.times -= 1
        bad_tags = tag_error(action, params) if rule is None else None
        if bad_tags is not None:  # EC2's tag restrictions (aws_tags): refused before anything is launched
            rule = Rule(action, bad_tags[0], 400, bad_tags[1], 1)
        if rule is None and action == "RunInstances" and self.tokens.lookup(region_of(h.headers.get("Authorization")),
                                                                            params) is None and self._no_room(params):
            rule = Rule(action, "InsufficientInstanceCapacity", STATUS["InsufficientInstanceCapacity"], None, 1)
        if rule is not None and rule.code == HANG:
            self.released.wait(300)
            h.close_connection = True
            return None
        if rule is not None and not rule.after:
            rec.status = rule.status
            return self._send(h, rule.status, self._error(rule, params))
        if action == "GetConsoleOutput" and params.get("InstanceId") in self.consoles:
            rec.status = 200
            return self._send(h, 200, self._console(params["InstanceId"]))
        region = region_of(h.headers.get("Authorization"))
        own = (self.placements.answer(action, region, params) if action in PlacementGroups.ACTIONS
               else self.placements.check_launch(region, params) if action == "RunInstances" else None)
        replay = self.tokens.lookup(region, params) if action == "RunInstances" and own is None else None
        if own is None and replay is not None and not isinstance(replay, list):
            own = replay
        if own is not None:
            rec.status = own.status
            return self._send(h, own.status, own.body)
        if isinstance(replay, list):  # a known token: nothing is launched, that request's instances are answered
            status, headers, data = self._forward(h, describe_body(replay))
            rec.status = status
            return self._send(h, status, as_run_instances(self._rewrite(data, region)) if status == 200 else data)
        status, headers, data = self._forward(h, body)
        rec.status = status
        if action == "RunInstances" and status == 200:
            self.placements.launched(region, params, data)
            self.tokens.launched(region, params, data)
        hold = self.hold_next
        if action == "RunInstances" and status == 200 and hold is not None and all(params.get(k) == v for k, v in hold.items()):
            with self.lock:
                self.hold_next = None
                self.pending.update(re.findall(r"<instanceId>(i-[0-9a-f]+)</instanceId>", data.decode()))
        if action == "StartInstances" and status == 200:
            at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            with self.lock:
                self.started.update({v: at for k, v in params.items() if k.startswith("InstanceId.")})
        if action == "DescribeInstances":
            data = self._rewrite(data, region)
        if rule is not None:  # an ``after`` rule: the call took effect, its answer is lost
            rec.status = rule.status
            return self._send(h, rule.status, self._error(rule, params))
        self._send(h, status, data, headers.get("Content-Type", "text/xml"))

    def passthrough(self, h: BaseHTTPRequestHandler) -> None:
        """A request that is not a query API call (S3's REST paths): forwarded and answered unchanged (no fault rule
        applies to it; the S3 store's faults are tested against moto directly)."""
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        with self.lock:
            self.requests.append(Recorded(f"s3:{h.command}", {"path": h.path}))
        status, headers, data = self._forward(h, body)
        h.send_response(status)
        for k, v in headers.items():
            if k.lower() not in ("connection", "transfer-encoding", "server", "date"):
                h.send_header(k, v)
        if "content-length" not in {k.lower() for k in headers}:
            h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)

    def _forward(self, h: BaseHTTPRequestHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # the client's Host kept: it is part of what a SigV4 signature covers (moto checks it when its IAM is on)
            headers = {k: v for k, v in h.headers.items() if k.lower() not in ("connection", "content-length")}
            headers["Content-Length"] = str(len(body))
            conn.request(h.command, h.path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def _rewrite(self, data: bytes, region: str) -> bytes:
        """DescribeInstances with the held instances reported as ``pending`` (code 0), placement group
        members' ``placement.groupName`` and restarted instances' ``launchTime``."""
        if not self.pending and not self.placements.groups and not self.started:
            return data
        try:
            root = ET.fromstring(data)
        except ET.ParseError:
            return data
        ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
        q = (lambda t: f"{{{ns}}}{t}") if ns else (lambda t: t)
        self.placements.annotate(region, root)
        for item in root.iter(q("item")):
            iid, state = item.find(q("instanceId")), item.find(q("instanceState"))
            launched = item.find(q("launchTime"))
            if iid is not None and launched is not None and iid.text in self.started:
                launched.text = self.started[iid.text]
            if iid is None or state is None or not ("*" in self.pending or iid.text in self.pending):
                continue
            if state.findtext(q("name")) == "running":
                state.find(q("code")).text, state.find(q("name")).text = "0", "pending"  # type: ignore[union-attr]
        if ns:
            ET.register_namespace("", ns)
        return ET.tostring(root, encoding="utf-8", xml_declaration=True)

    @staticmethod
    def _error(rule: Rule, params: dict[str, str]) -> bytes:
        text = rule.message or MESSAGES.get(rule.code, rule.code).format(
            type=params.get("InstanceType", "?"), zone=params.get("Placement.AvailabilityZone", "?"))
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{rule.code}</Code>'
                f"<Message>{escape(text)}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
                ).encode()

    def _console(self, instance_id: str) -> bytes:
        out = base64.b64encode(self.consoles[instance_id].encode()).decode()
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<GetConsoleOutputResponse xmlns="http://ec2.amazonaws.com/'
                f'doc/2016-11-15/"><requestId>{uuid.uuid4()}</requestId><instanceId>{instance_id}</instanceId>'
                f"<timestamp>2026-11-22T00:00:00.000Z</timestamp><output>{out}</output></GetConsoleOutputResponse>"
                ).encode()

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, data: bytes, ctype: str = "text/xml") -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
