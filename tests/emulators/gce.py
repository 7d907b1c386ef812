"""Loopback Google Compute Engine REST emulator for tests (stdlib http.server, plain http on 127.0.0.1).

Point the real SDK at it:  compute_v1.InstancesClient(credentials=AnonymousCredentials(),
client_options={"api_endpoint": emu.url}).  Request bodies and parameters are checked against Compute's
discovery document (gce_validate.py); errors use Google's JSON error shape; operations advance on
zoneOperations.get / wait.  Fault injection: `emu.inject(kind, zone=None, times=1, method=None, **params)`
with a kind from HTTP_FAULTS, OP_FAULTS or "unreachable" (aggregatedList scope).
"""
from __future__ import annotations

import copy
import json
import random
import re
import socket
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from .gce_validate import (API, HTTP_FAULTS, OP_FAULTS, ApiError, Discovery, check_instance, compile_filter,
                           http_fault_error, image_known, image_resource, instance_resource, invalid, now, op_error,
                           operation_resource, paginate, relative, scoped_items)

DEFAULT_ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-east1-c", "us-east4-a", "us-west1-b",
                 "europe-west4-a", "asia-east1-a")
DEFAULT_IMAGES = {("ubuntu-os-cloud", "ubuntu-2204-lts"): "ubuntu-2204-jammy-v20261015",
                  ("ubuntu-os-cloud", "ubuntu-2404-lts-amd64"): "ubuntu-2404-noble-amd64-v20261015",
                  ("debian-cloud", "debian-12"): "debian-12-bookworm-v20261014"}
ROUTES = ("compute.instances.insert", "compute.instances.list", "compute.instances.get", "compute.instances.delete",
          "compute.instances.aggregatedList", "compute.instances.getSerialPortOutput",
          "compute.instances.getGuestAttributes", "compute.zoneOperations.get", "compute.zoneOperations.wait",
          "compute.images.getFromFamily", "compute.images.get")
FAULT_KINDS = set(HTTP_FAULTS) | set(OP_FAULTS) | {"unreachable"}
ZONE_NAME = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")


@dataclass
class Request:
    method: str
    path: str
    query: dict  # last value per name, as strings
    body: object  # parsed JSON, or None (no body or not JSON; see raw)
    headers: dict  # lower-cased names
    raw: bytes = b""
    method_id: str | None = None  # discovery method id, e.g. "compute.instances.insert"
    status: int | None = None  # the HTTP status the emulator answered


@dataclass
class Fault:
    kind: str
    zone: str | None
    times: int | None  # None: forever
    method: str
    params: dict = field(default_factory=dict)

    def matches(self, method_id: str, zone: str | None) -> bool:
        return ((self.method == "*" or method_id == f"compute.{self.method}" or method_id.endswith("." + self.method))
                and self.zone in (None, zone))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def _handle(self):
        self.server.emulator._dispatch(self)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _handle


class GceEmulator:
    """Compute Engine REST emulator. Use as a context manager or start()/stop(); state is per emulator.

    polls_to_done: zoneOperations get/wait calls until an operation is DONE (0: insert/delete answer DONE).
    initial_op_status: status of the operation insert/delete return (RUNNING or PENDING).
    reject_output_only: 400 for output-only fields (status, id, kind, ...) in request bodies.
    require_auth: 401 unless a Bearer token is sent.  zones: scopes aggregatedList reports (inserted zones are
    added).  images: {(image project, family): image name}.  networks: names accepted in networkInterfaces.
    serial_buffer_bytes: console bytes kept (older output is discarded, as GCE keeps 1 MiB).
    """

    def __init__(self, *, polls_to_done: int = 1, initial_op_status: str = "RUNNING", reject_output_only: bool = True,
                 require_auth: bool = False, zones=DEFAULT_ZONES, images: dict | None = None,
                 networks=("default",), serial_buffer_bytes: int = 1 << 20, seed: int | None = None):
        self.polls_to_done, self.initial_op_status, self.require_auth = polls_to_done, initial_op_status, require_auth
        self.discovery = Discovery(reject_output_only=reject_output_only)
        self.known_zones, self.networks, self.serial_buffer_bytes = list(zones), tuple(networks), serial_buffer_bytes
        self.images = dict(DEFAULT_IMAGES if images is None else images)
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._routes = []
        for mid in ROUTES:
            m = self.discovery.method(mid)
            rx = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(m["flatPath"]))
            self._routes.append((mid, m["httpMethod"], re.compile(rx)))
        self._server = self._thread = None
        self.reset()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "GceEmulator":
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
            self._server.daemon_threads = True
            self._server.emulator = self
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="gce-emulator", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = self._thread = None

    def __enter__(self) -> "GceEmulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("GceEmulator is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reset(self) -> None:
        """Forget instances, operations, faults, console/guest data and recorded requests (server keeps running)."""
        with self._lock:
            self.instances: dict[tuple, dict] = {}
            self.operations: dict[tuple, dict] = {}
            self._op_state: dict[tuple, dict] = {}
            self._request_ids: dict[tuple, tuple] = {}
            self._serial: dict[tuple, dict] = {}
            self._guest: dict[tuple, list] = {}
            self.faults: list[Fault] = []
            self.requests: list[Request] = []

    # ------------------------------------------------------------------ test helpers
    def inject(self, kind: str, zone: str | None = None, times: int | None = 1, method: str | None = None,
               **params) -> Fault:
        """Queue a fault. HTTP kinds and op kinds default to method 'insert'; 'unreachable' to 'aggregatedList'.
        `method` is a discovery method name ('insert', 'instances.get', 'zoneOperations.wait', '*').
        Params: quota_*: metric=, region=; invalid_400: message=; op kinds: message=."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {sorted(FAULT_KINDS)}")
        if kind in OP_FAULTS and method not in (None, "insert"):
            raise ValueError("operation faults apply to instances.insert only")
        fault = Fault(kind, zone, times, method or ("aggregatedList" if kind == "unreachable" else "insert"), params)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def find(self, name: str, zone: str | None = None, project: str | None = None) -> tuple:
        with self._lock:
            keys = [k for k in self.instances if k[2] == name and zone in (None, k[1]) and project in (None, k[0])]
        if len(keys) != 1:
            raise KeyError(f"instance {name!r}: {len(keys)} matches")
        return keys[0]

    def instance(self, name: str, zone: str | None = None, project: str | None = None) -> dict | None:
        """A copy of the stored Instance (as instances.get returns it), or None."""
        with self._lock:
            try:
                return copy.deepcopy(self.instances[self.find(name, zone, project)])
            except KeyError:
                return None

    def set_status(self, name: str, status: str, zone: str | None = None, project: str | None = None) -> None:
        with self._lock:
            self.instances[self.find(name, zone, project)]["status"] = status

    def append_serial(self, name: str, text: str, port: int = 1, zone: str | None = None,
                      project: str | None = None) -> None:
        with self._lock:
            buf = self._serial.setdefault((*self.find(name, zone, project), port), {"data": b"", "offset": 0})
            buf["data"] += text.encode()
            drop = max(0, len(buf["data"]) - self.serial_buffer_bytes)
            buf["data"], buf["offset"] = buf["data"][drop:], buf["offset"] + drop

    def set_serial(self, name: str, text: str, port: int = 1, zone: str | None = None,
                   project: str | None = None) -> None:
        with self._lock:
            self._serial.pop((*self.find(name, zone, project), port), None)
            self.append_serial(name, text, port, zone, project)

    def set_guest_attributes(self, name: str, values: dict[str, str], namespace: str = "trainvm",
                             zone: str | None = None, project: str | None = None) -> None:
        with self._lock:
            entries = self._guest.setdefault(self.find(name, zone, project), [])
            entries[:] = [e for e in entries if not (e["namespace"] == namespace and e["key"] in values)]
            entries += [{"namespace": namespace, "key": k, "value": v} for k, v in values.items()]

    def calls(self, method_id: str) -> list[Request]:
        """Recorded requests for a discovery method id or its short form ('insert', 'zoneOperations.wait')."""
        return [r for r in self.requests if r.method_id and (r.method_id == method_id or r.method_id.endswith("." + method_id))]

    def sdk_clients(self, credentials=None):
        """compute_v1 clients bound to this emulator: .instances, .zone_operations, .images (anonymous by default)."""
        from types import SimpleNamespace
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import compute_v1
        kw = {"credentials": credentials or AnonymousCredentials(), "client_options": {"api_endpoint": self.url}}
        return SimpleNamespace(instances=compute_v1.InstancesClient(**kw),
                               zone_operations=compute_v1.ZoneOperationsClient(**kw),
                               images=compute_v1.ImagesClient(**kw))

    # ------------------------------------------------------------------ HTTP plumbing
    def _dispatch(self, h: BaseHTTPRequestHandler) -> None:
        url = urlsplit(h.path)
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError:
            body = None
        req = Request(h.command, url.path, query, body, {k.lower(): v for k, v in h.headers.items()}, raw)
        with self._lock:
            self.requests.append(req)
        try:
            status, payload = 200, self._route(req)
        except ApiError as e:
            status, payload = e.code, e.payload()
        req.status = status
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=UTF-8")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _route(self, req: Request) -> dict:
        rel = req.path[len("/compute/v1/"):] if req.path.startswith("/compute/v1/") else None
        for mid, verb, rx in self._routes:
            m = rx.fullmatch(rel or "") if rel is not None and verb == req.method else None
            if m:
                break
        else:
            raise ApiError(404, "notFound", f"The requested URL {req.method} {req.path} was not found on this server.")
        req.method_id, params = mid, {k: unquote(v) for k, v in m.groupdict().items()}
        if self.require_auth and not req.headers.get("authorization", "").startswith("Bearer "):
            raise ApiError(*HTTP_FAULTS["auth_401"][:3], HTTP_FAULTS["auth_401"][4])
        self._http_fault(mid, params)
        if "zone" in params and not ZONE_NAME.fullmatch(params["zone"]):
            raise invalid(f"Invalid value for field 'zone': '{params['zone']}'. Unknown zone.")
        errs = self.discovery.check_params(mid, params, req.query, extra={"returnPartialSuccess"})
        if req.body is None and req.raw.strip():
            errs.append("Invalid JSON payload received. Unexpected token.")
        if errs:
            raise invalid(errs)
        with self._lock:
            return getattr(self, "_" + mid.split(".", 1)[1].replace(".", "_"))(req, **params)

    def _take_fault(self, kinds, method_id: str, zone: str | None) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.kind in kinds and f.matches(method_id, zone):
                    if f.times is not None:
                        f.times -= 1
                        if f.times <= 0:
                            self.faults.remove(f)
                    return f
        return None

    def _http_fault(self, mid: str, params: dict) -> None:
        f = self._take_fault(HTTP_FAULTS, mid, params.get("zone"))
        if f:
            raise http_fault_error(f.kind, f.params, params.get("project"), params.get("zone"))

    # ------------------------------------------------------------------ operations
    def _new_op(self, project: str, zone: str, op_type: str, name: str, target_id: str, fault=None) -> dict:
        op = operation_resource(project, zone, op_type, name, target_id, self.initial_op_status, self._rng)
        key = (project, zone, op["name"])
        self.operations[key] = op
        self._op_state[key] = {"polls": 0, "fault": fault, "target": (project, zone, name)}
        if self.polls_to_done <= 0:
            self._finish(key)
        return op

    def _advance(self, key: tuple) -> dict:
        st, op = self._op_state[key], self.operations[key]
        if op["status"] != "DONE" and not (st["fault"] and st["fault"].kind == "op_never_done"):
            st["polls"] += 1
            if st["polls"] >= self.polls_to_done:
                self._finish(key)
            else:
                op.update(status="RUNNING", progress=min(90, op["progress"] + 30))
        return copy.deepcopy(op)

    def _finish(self, key: tuple) -> None:
        st, op = self._op_state[key], self.operations[key]
        op.update(status="DONE", progress=100, endTime=now())
        target, fault = st["target"], st["fault"]
        if fault:
            op.update(op_error(fault.kind, fault.params, target[0], target[1]))
        elif op["operationType"] == "insert" and target in self.instances:
            inst = self.instances[target]
            inst.update(status="RUNNING", lastStartTimestamp=now(), cpuPlatform="Intel Cascade Lake")
            for nic in inst["networkInterfaces"]:
                for ac in nic.get("accessConfigs", []):
                    ac["natIP"] = f"198.51.100.{self._rng.randrange(2, 254)}"
        elif op["operationType"] == "delete":
            self.instances.pop(target, None)
            self._guest.pop(target, None)
            for k in [k for k in self._serial if k[:3] == target]:
                del self._serial[k]

    def _zoneOperations_get(self, req, project, zone, operation):
        if (project, zone, operation) not in self.operations:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/operations/{operation}' was not found")
        return self._advance((project, zone, operation))

    _zoneOperations_wait = _zoneOperations_get

    # ------------------------------------------------------------------ instances
    def _lookup(self, project, zone, instance) -> tuple:
        key = (project, zone, instance)
        if key not in self.instances:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/instances/{instance}' was not found")
        return key

    def _request_id(self, req, project) -> dict | None:
        rid = req.query.get("requestId")
        if rid is None:
            return None
        try:
            if uuid.UUID(rid).int == 0:
                raise ValueError
        except ValueError:
            raise invalid(f"Invalid value for field 'requestId': '{rid}'. The request ID must be a valid non-zero UUID.")
        key = self._request_ids.get((project, rid))
        return copy.deepcopy(self.operations[key]) if key else None

    def _remember(self, req, project, op) -> dict:
        if "requestId" in req.query:
            self._request_ids[(project, req.query["requestId"])] = (project, op["zone"].rsplit("/", 1)[1], op["name"])
        return copy.deepcopy(op)

    def _instances_insert(self, req, project, zone):
        if (dup := self._request_id(req, project)) is not None:
            return dup
        body = req.body
        if not isinstance(body, dict):
            raise invalid("Invalid value for field 'resource': ''. The request body must be an Instance object.")
        errs = self.discovery.check_body("Instance", body, "compute.instances.insert")
        if errs:
            raise invalid(errs)
        check_instance(body, project, zone, self.networks)
        self._check_image(body)
        key = (project, zone, body["name"])
        if key in self.instances:
            raise ApiError(409, "alreadyExists", f"The resource 'projects/{project}/zones/{zone}/instances/{body['name']}' already exists")
        if zone not in self.known_zones:
            self.known_zones.append(zone)
        fault = self._take_fault(OP_FAULTS, "compute.instances.insert", zone)
        inst_id = str(self._rng.getrandbits(63))
        if fault is None or fault.kind == "op_never_done":
            self.instances[key] = instance_resource(body, project, zone, inst_id, self._rng)
        return self._remember(req, project, self._new_op(project, zone, "insert", body["name"], inst_id, fault))

    def _check_image(self, body: dict) -> None:
        for d in body.get("disks") or []:
            src = (d.get("initializeParams") or {}).get("sourceImage")
            if src and not image_known(relative(src), self.images):
                raise ApiError(404, "notFound", f"The resource '{relative(src)}' was not found")

    def _instances_get(self, req, project, zone, instance):
        return copy.deepcopy(self.instances[self._lookup(project, zone, instance)])

    def _instances_delete(self, req, project, zone, instance):
        if (dup := self._request_id(req, project)) is not None:
            return dup
        key = self._lookup(project, zone, instance)
        self.instances[key]["status"] = "STOPPING"
        return self._remember(req, project, self._new_op(project, zone, "delete", instance, self.instances[key]["id"]))

    def _page(self, req, items: list) -> tuple[list, str | None]:
        try:
            return paginate(items, req.query.get("pageToken"), int(req.query.get("maxResults", 500)))
        except ValueError:
            raise invalid(f"Invalid value for field 'pageToken': '{req.query['pageToken']}'. Invalid page token.")

    def _filtered(self, req, project, zone=None) -> list[dict]:
        try:
            pred = compile_filter(req.query.get("filter"))
        except (ValueError, re.error) as e:
            raise invalid(f"Invalid value for field 'filter': '{req.query.get('filter')}'. Invalid list filter expression ({e}).")
        return [copy.deepcopy(v) for k, v in sorted(self.instances.items())
                if k[0] == project and zone in (None, k[1]) and pred(v)]

    def _instances_list(self, req, project, zone):
        page, nxt = self._page(req, self._filtered(req, project, zone))
        out = {"kind": "compute#instanceList", "id": f"projects/{project}/zones/{zone}/instances",
               "selfLink": f"{API}projects/{project}/zones/{zone}/instances"}
        return {**out, **({"items": page} if page else {}), **({"nextPageToken": nxt} if nxt else {})}

    def _instances_aggregatedList(self, req, project):
        page, nxt = self._page(req, self._filtered(req, project))
        partial = req.query.get("returnPartialSuccess") == "true"
        unreachable = [z for z in self.known_zones if self._take_fault({"unreachable"}, "compute.instances.aggregatedList", z)]
        if unreachable and not partial:
            raise ApiError(503, "backendError", f"Zone 'zones/{unreachable[0]}' is unreachable; retry with returnPartialSuccess=true.")
        items = scoped_items(self.known_zones, page, unreachable)
        out = {"kind": "compute#instanceAggregatedList", "id": f"projects/{project}/aggregated/instances",
               "items": items, "selfLink": f"{API}projects/{project}/aggregated/instances"}
        if unreachable:
            out["unreachables"] = [f"zones/{z}" for z in unreachable]
        return {**out, **({"nextPageToken": nxt} if nxt else {})}

    def _instances_getSerialPortOutput(self, req, project, zone, instance):
        key = self._lookup(project, zone, instance)
        port, start = int(req.query.get("port", 1)), int(req.query.get("start", 0))
        buf = self._serial.get((*key, port), {"data": b"", "offset": 0})
        end = buf["offset"] + len(buf["data"])
        start = max(buf["offset"], end + start if start < 0 else min(start, end))
        return {"kind": "compute#serialPortOutput", "contents": buf["data"][start - buf["offset"]:].decode(errors="replace"),
                "start": str(start), "next": str(end),
                "selfLink": f"{API}projects/{project}/zones/{zone}/instances/{instance}/serialPort?port={port}"}

    def _instances_getGuestAttributes(self, req, project, zone, instance):
        key = self._lookup(project, zone, instance)
        items = (self.instances[key].get("metadata") or {}).get("items") or []
        if not any(i.get("key") == "enable-guest-attributes" and str(i.get("value")).upper() == "TRUE" for i in items):
            raise invalid("Guest attributes are not enabled for this instance: set metadata enable-guest-attributes=TRUE.")
        out = {"kind": "compute#guestAttributes",
               "selfLink": f"{API}projects/{project}/zones/{zone}/instances/{instance}/guestAttributes/"}
        entries, var, qp = self._guest.get(key, []), req.query.get("variableKey"), req.query.get("queryPath")
        found = [e for e in entries if var == f"{e['namespace']}/{e['key']}"] if var else [
            e for e in entries if f"{e['namespace']}/{e['key']}".startswith(qp or "")]
        if not found:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/instances/{instance}"
                                            f"/guestAttributes/{var or qp or ''}' was not found")
        if var:
            return {**out, "variableKey": var, "variableValue": found[0]["value"]}
        return {**out, "queryPath": qp or "", "queryValue": {"items": found}}

    # ------------------------------------------------------------------ images
    def _images_getFromFamily(self, req, project, family):
        if (project, family) not in self.images:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/global/images/family/{family}' was not found")
        return image_resource(project, self.images[(project, family)], family)

    def _images_get(self, req, project, image):
        for (p, fam), name in self.images.items():
            if p == project and name == image:
                return image_resource(project, name, fam)
        raise ApiError(404, "notFound", f"The resource 'projects/{project}/global/images/{image}' was not found")
