"""Loopback Google Compute Engine REST emulator for tests (stdlib http.server, plain http on 127.0.0.1).

Point the real SDK at it:  compute_v1.InstancesClient(credentials=AnonymousCredentials(),
client_options={"api_endpoint": emu.url}).  Request bodies and parameters are checked against Compute's
discovery document (gce_validate.py); errors use Google's JSON error shape; operations advance on
zoneOperations.get / wait (globalOperations for firewall rules).  Fault injection:
`emu.inject(kind, zone=None, times=1, method=None, **params)` with a kind from HTTP_FAULTS, OP_FAULTS or
"unreachable" (aggregatedList scope) or "silent" (the request is held `seconds=` before it is answered: an endpoint
that does not answer).  `projects`: the project ids that exist for the caller; any other answers 404 notFound
"The resource 'projects/P' was not found", as GCE does for a project that does not exist or that the caller
cannot see (None: every project exists).  `on_poll(emu, operation)`: a test hook run (under the lock) before a
zoneOperations.get/wait advances an operation, e.g. to delete the VM while its insert is pending, as a
concurrent `trainvm down` does; GCE then finishes the insert DONE without error and the VM is gone.  The Compute
methods it serves are in gce_methods.py (zone operations, instances, public images), gce_images.py (private images:
insert from a disk, get, list, getFromFamily, delete), gce_power.py (instances.stop/start),
gce_quota.py (regions.get and the project's quotas, `set_quota`) and gce_firewalls.py (global firewall rules and global operations, with the default
network's rules and `ingress_decision` to evaluate them).  compute.projects.get answers the project with a
`defaultServiceAccount` of GCE's form (`NUMBER-compute@developer.gserviceaccount.com`, the number derived from the id).
"""
from __future__ import annotations

import copy
import json
import random
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from .gce_faults import HTTP_FAULTS, OP_FAULTS, http_fault_error
from .gce_firewalls import FirewallsMixin
from .gce_images import ImagesMixin
from .gce_methods import ComputeMethodsMixin
from .gce_power import PowerMethodsMixin
from .gce_quota import QuotaMethodsMixin
from .gce_validate import ApiError, Discovery, invalid

DEFAULT_ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-east1-c", "us-east4-a", "us-west1-b",
                 "europe-west4-a", "asia-east1-a")
DEFAULT_IMAGES = {("ubuntu-os-cloud", "ubuntu-2204-lts"): "ubuntu-2204-jammy-v20261015",
                  ("ubuntu-os-cloud", "ubuntu-2404-lts-amd64"): "ubuntu-2404-noble-amd64-v20261015",
                  ("debian-cloud", "debian-12"): "debian-12-bookworm-v20261014"}
ROUTES = ("compute.instances.insert", "compute.instances.list", "compute.instances.get", "compute.instances.delete",
          "compute.instances.aggregatedList", "compute.instances.getSerialPortOutput",
          "compute.instances.getGuestAttributes", "compute.zoneOperations.get", "compute.zoneOperations.wait",
          "compute.images.getFromFamily", "compute.images.get", "compute.firewalls.insert", "compute.firewalls.get",
          "compute.firewalls.list", "compute.firewalls.update", "compute.firewalls.delete",
          "compute.globalOperations.get", "compute.globalOperations.wait", "compute.instances.stop",
          "compute.instances.start", "compute.zones.list", "compute.projects.get", "compute.regions.get",
          "compute.images.insert", "compute.images.list", "compute.images.delete")
OP_FAULT_METHODS = (None, "insert", "instances.insert", "firewalls.insert")
FAULT_KINDS = set(HTTP_FAULTS) | set(OP_FAULTS) | {"unreachable", "silent"}
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

    def matches(self, method_id: str, zone: str | None, accelerator: str | None = None) -> bool:
        """``params['accelerator']`` (e.g. 'nvidia-tesla-t4') narrows a fault to inserts of that GPU: real stock-outs
        are per resource in a zone, so a T4 stock-out leaves an L4 in the same zone creatable."""
        want = self.params.get("accelerator")
        return ((self.method == "*" or method_id == f"compute.{self.method}" or method_id.endswith("." + self.method))
                and self.zone in (None, zone) and (want is None or want == accelerator))


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


class GceEmulator(ImagesMixin, FirewallsMixin, ComputeMethodsMixin, PowerMethodsMixin, QuotaMethodsMixin):
    """Compute Engine REST emulator. Use as a context manager or start()/stop(); state is per emulator.

    polls_to_done: zoneOperations get/wait calls until an operation is DONE (0: insert/delete answer DONE).
    initial_op_status: status of the operation insert/delete return (RUNNING or PENDING).
    reject_output_only: 400 for output-only fields (status, id, kind, ...) in request bodies.
    require_auth: 401 unless a Bearer token is sent.  zones: scopes aggregatedList reports (inserted zones are
    added).  images: {(image project, family): image name}.  networks: names accepted in networkInterfaces.
    serial_buffer_bytes: console bytes kept (older output is discarded, as GCE keeps 1 MiB).
    default_firewalls: every project's default network starts with GCE's default rules (default-allow-ssh, ...).
    power_ends_after_reads: a stop/start operation nobody polls still ends (GCE runs them with time) after that
    many instances.get of its instance (0: only zoneOperations polls end it).
    """

    def __init__(self, *, polls_to_done: int = 1, initial_op_status: str = "RUNNING", reject_output_only: bool = True,
                 require_auth: bool = False, zones=DEFAULT_ZONES, images: dict | None = None,
                 networks=("default",), serial_buffer_bytes: int = 1 << 20, seed: int | None = None,
                 default_firewalls: bool = True, projects=None, power_ends_after_reads: int = 0):
        self.polls_to_done, self.initial_op_status, self.require_auth = polls_to_done, initial_op_status, require_auth
        self.discovery = Discovery(reject_output_only=reject_output_only)
        self.known_zones, self.networks, self.serial_buffer_bytes = list(zones), tuple(networks), serial_buffer_bytes
        self.images = dict(DEFAULT_IMAGES if images is None else images)
        self.default_firewalls = default_firewalls
        self.projects = None if projects is None else set(projects)
        self.on_poll = None
        self.power_ends_after_reads = power_ends_after_reads
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._routes = []
        for mid in ROUTES:
            m = self.discovery.method(mid)
            rx = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(m["flatPath"]))
            self._routes.append((mid, m["httpMethod"], re.compile(rx)))
        #: whether instances.aggregatedList takes returnPartialSuccess (only if the discovery document says so)
        self.partial_success = "returnPartialSuccess" in self.discovery.method("compute.instances.aggregatedList").get(
            "parameters", {})
        self._server = self._thread = None
        self.reset()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> GceEmulator:
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

    def __enter__(self) -> GceEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("GceEmulator is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reset(self) -> None:
        """Forget instances, firewall rules, operations, faults, console/guest data and recorded requests (server
        keeps running)."""
        with self._lock:
            self.instances: dict[tuple, dict] = {}
            self.firewalls: dict[tuple, dict] = {}  # (project, name) -> Firewall
            self.baked: dict[tuple, dict] = {}  # (project, name) -> Image made by images.insert (gce_images.py)
            self._fw_projects: set[str] = set()  # projects whose default rules exist
            self.operations: dict[tuple, dict] = {}
            self._op_state: dict[tuple, dict] = {}
            self._request_ids: dict[tuple, tuple] = {}
            self._serial: dict[tuple, dict] = {}
            self._serial_play: dict[str, list[str]] = {}  # instance name -> chunks a running VM writes
            self._guest: dict[tuple, list] = {}
            self._guest_play: dict[str, list[dict[str, str]]] = {}  # instance name -> attribute writes, in order
            self.faults: list[Fault] = []
            self.on_poll = None
            self.requests: list[Request] = []
            #: projects.get answers these projects without a defaultServiceAccount (deleted by an admin)
            self.no_default_sa: set[str] = set()
            #: region (None: project-wide) -> metric -> (limit, usage); gce_quota.py serves them
            self.quotas: dict[str | None, dict[str, tuple[float, float]]] = {}

    # ------------------------------------------------------------------ test helpers
    def inject(self, kind: str, zone: str | None = None, times: int | None = 1, method: str | None = None,
               **params) -> Fault:
        """Queue a fault. HTTP kinds and op kinds default to method 'instances.insert'; 'unreachable' to
        'aggregatedList'. `method` is a discovery method name, qualified ('firewalls.insert', 'instances.get',
        'zoneOperations.wait') or short ('insert': every resource's insert), or '*'. Operation faults apply to
        instances.insert and firewalls.insert. A fault with a zone never matches a global method (firewalls).
        Params: quota_*: metric=, region=; invalid_400: message=; op kinds: message=, accelerator= (only inserts
        of that GPU type, e.g. 'nvidia-tesla-t4')."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {sorted(FAULT_KINDS)}")
        if kind in OP_FAULTS and method not in OP_FAULT_METHODS:
            raise ValueError("operation faults apply to instances.insert and firewalls.insert only")
        fault = Fault(kind, zone, times, method or ("aggregatedList" if kind == "unreachable" else "instances.insert"),
                      params)
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

    def play_serial(self, name: str, chunks: list[str]) -> None:
        """A VM that keeps writing its console (port 1): each getSerialPortOutput of ``name`` (which may
        not exist yet) first appends the next chunk -- a deterministic stand-in for a startup script
        progressing between polls. Not modelled: real consoles grow with time, not with reads."""
        with self._lock:
            self._serial_play[name] = list(chunks)

    def set_serial(self, name: str, text: str, port: int = 1, zone: str | None = None,
                   project: str | None = None) -> None:
        with self._lock:
            self._serial.pop((*self.find(name, zone, project), port), None)
            self.append_serial(name, text, port, zone, project)

    def play_guest_attributes(self, name: str, writes: list[dict[str, str]], namespace: str = "trainvm") -> None:
        """A VM whose startup script writes guest attributes as it goes (``PUT .../guest-attributes/NS/KEY``
        on the metadata server): each getGuestAttributes of ``name`` (which may not exist yet) first applies
        the next write. Deterministic, like :meth:`play_serial`; real writes follow time, not reads."""
        with self._lock:
            self._guest_play[name] = [dict(w) for w in writes]
            self._guest_play_ns = namespace

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
        """compute_v1 clients bound to this emulator: .instances, .zone_operations, .images, .firewalls,
        .global_operations, .zones (anonymous by default)."""
        from types import SimpleNamespace

        from google.auth.credentials import AnonymousCredentials
        from google.cloud import compute_v1
        kw = {"credentials": credentials or AnonymousCredentials(), "client_options": {"api_endpoint": self.url}}
        return SimpleNamespace(instances=compute_v1.InstancesClient(**kw),
                               zone_operations=compute_v1.ZoneOperationsClient(**kw),
                               images=compute_v1.ImagesClient(**kw), firewalls=compute_v1.FirewallsClient(**kw),
                               global_operations=compute_v1.GlobalOperationsClient(**kw),
                               zones=compute_v1.ZonesClient(**kw))

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
        try:
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (a "silent" fault)
            h.close_connection = True

    def _route(self, req: Request) -> dict:
        rel = req.path[len("/compute/v1/"):] if req.path.startswith("/compute/v1/") else None
        for mid, verb, rx in self._routes:  # noqa: B007 (mid is read after the break)
            m = rx.fullmatch(rel or "") if rel is not None and verb == req.method else None
            if m:
                break
        else:
            raise ApiError(404, "notFound", f"The requested URL {req.method} {req.path} was not found on this server.")
        req.method_id, params = mid, {k: unquote(v) for k, v in m.groupdict().items()}
        if self.require_auth and not req.headers.get("authorization", "").startswith("Bearer "):
            raise ApiError(*HTTP_FAULTS["auth_401"][:3], HTTP_FAULTS["auth_401"][4])
        self._silent(mid, params)
        public = {p for p, _ in self.images}  # image projects (ubuntu-os-cloud, ...) are readable by everyone
        if self.projects is not None and params.get("project") not in self.projects | public:
            raise ApiError(404, "notFound", f"The resource 'projects/{params.get('project')}' was not found")
        self._http_fault(mid, params)
        if "zone" in params and not ZONE_NAME.fullmatch(params["zone"]):
            raise invalid(f"Invalid value for field 'zone': '{params['zone']}'. Unknown zone.")
        errs = self.discovery.check_params(mid, params, req.query)
        if req.body is None and req.raw.strip():
            errs.append("Invalid JSON payload received. Unexpected token.")
        if errs:
            raise invalid(errs)
        with self._lock:
            return getattr(self, "_" + mid.split(".", 1)[1].replace(".", "_"))(req, **params)

    def _take_fault(self, kinds, method_id: str, zone: str | None, accelerator: str | None = None) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.kind in kinds and f.matches(method_id, zone, accelerator):
                    if f.times is not None:
                        f.times -= 1
                        if f.times <= 0:
                            self.faults.remove(f)
                    return f
        return None

    def _silent(self, mid: str, params: dict) -> None:
        f = self._take_fault({"silent"}, mid, params.get("zone"))
        if f:  # outside the lock: other requests are still answered
            import time
            time.sleep(float(f.params.get("seconds", 30)))

    def _http_fault(self, mid: str, params: dict) -> None:
        f = self._take_fault(HTTP_FAULTS, mid, params.get("zone"))
        if f:
            raise http_fault_error(f.kind, f.params, params.get("project"), params.get("zone"), mid)
