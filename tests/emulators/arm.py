"""Loopback Azure Resource Manager emulator over https, for tests that drive the real azure-mgmt-* SDKs.

    with ArmEmulator() as emu:                       # https://127.0.0.1:PORT, cert from a trustme CA
        rc, nc, cc = emu.clients()                   # Resource/Network/ComputeManagementClient, wired to it
        emu.inject("allocation_failed_lro", location="eastus", size="Standard_NC4as_T4_v3")
        ...
        assert emu.resources_in("trainvm-x") == []

Client settings it needs (emu.client_kwargs() returns them): base_url=emu.url, connection_verify=emu.ca_path
(or REQUESTS_CA_BUNDLE=emu.ca_path), a bearer-token credential, polling_interval=0 (ARM polls every 30 s
otherwise: Retry-After: 0 counts as absent), credential_scopes=["https://management.azure.com/.default"].

Modelled: resource groups (PUT/GET/HEAD/PATCH/DELETE with a 202 + Location LRO that deletes everything in the
group, list with $filter on tags), generic resource lists, Microsoft.Network virtualNetworks (+subnets GET),
networkSecurityGroups, publicIPAddresses, networkInterfaces, Microsoft.Compute virtualMachines (PUT, GET with
$expand=instanceView, DELETE, lists by group/subscription/location, instanceView, runCommand, start/powerOff/
deallocate/restart, retrieveBootDiagnosticsData + the SAS blob it points at), disks (created with a VM),
platform image versions (list/get), provider register. LROs: Azure-AsyncOperation (default) or provisioningState
in the body (lro_style="body"); deletes answer 202 + Location (+ Azure-AsyncOperation for resources).
Validation: arm_validate.py. State, references, faults, error texts: arm_model.py.
"""
from __future__ import annotations

import json
import re
import shutil
import socket
import ssl
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit

from .arm_model import DISK_T, KINDS, TYPES, VM_T, Fault, State, http_fault_error, not_found
from .arm_validate import RESOURCE_GROUP, ArmError, check_tags, validate

DEFAULT_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
DEFAULT_TOKEN = "fake-arm-token"
_KEPT_HEADERS = ("authorization", "content-type", "accept", "user-agent", "x-ms-client-request-id")
_WWW_AUTH = ('Bearer authorization_uri="https://login.microsoftonline.com/common", error="invalid_token", '
             'error_description="The authentication failed because of missing \'Authorization\' header."')


@dataclass
class Recorded:
    """One request as the emulator saw it (and the status it answered)."""
    method: str
    path: str
    query: dict
    body: object
    headers: dict
    status: int = 0
    namespace: str = ""
    ignored: list = field(default_factory=list)   # read-only body members the emulator dropped

    @property
    def api_version(self):
        return self.query.get("api-version")


class StaticTokenCredential:
    """A TokenCredential that never touches the network (azure-core calls get_token_info when present)."""

    def __init__(self, token=DEFAULT_TOKEN):
        self.token, self.calls, self.scopes = token, 0, []

    def get_token(self, *scopes, claims=None, tenant_id=None, enable_cae=False, **kw):
        from azure.core.credentials import AccessToken
        self.calls += 1
        self.scopes.append(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)

    def get_token_info(self, *scopes, options=None):
        from azure.core.credentials import AccessTokenInfo
        self.calls += 1
        self.scopes.append(scopes)
        return AccessTokenInfo(self.token, int(time.time()) + 3600, token_type="Bearer")

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # see cloud-sdks.md T1

    def log_message(self, *args):
        pass

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, headers, body = self.server.emu._dispatch(self.command, self.path, self.headers, raw)
        payload = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        if body is not None and "Content-Type" not in headers:
            headers["Content-Type"] = "application/json; charset=utf-8"
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _handle


class ArmEmulator:
    """ARM on https://127.0.0.1:PORT. polls = InProgress answers before an LRO finishes; lro_style = "async"
    (Azure-AsyncOperation header) or "body" (provisioningState polling on the resource URL); page_size =
    items per list page (nextLink beyond); token = the only bearer token accepted (None: any)."""

    def __init__(self, subscription_id=DEFAULT_SUBSCRIPTION, *, polls=1, lro_style="async", page_size=100,
                 token=None, ca=None):
        assert lro_style in ("async", "body")
        self.subscription_id, self.polls, self.lro_style = subscription_id, polls, lro_style
        self.page_size, self.token, self._ca = page_size, token, ca
        self.requests: list[Recorded] = []
        self.state = State(subscription_id)
        self._lock = threading.RLock()
        self._httpd = self._thread = self._tmp = None
        self.url = self.ca_path = None

    # ------------------------------------------------------------------ lifecycle
    def start(self):
        import trustme
        ca = self._ca or trustme.CA()
        self._tmp = tempfile.mkdtemp(prefix="arm-emulator-")
        self.ca_path = f"{self._tmp}/ca.pem"
        ca.cert_pem.write_to_path(self.ca_path)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.emu = self
        self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="arm-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(5)
            self._httpd = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def reset(self):
        """Forget every resource, operation, fault, planted output and recorded request."""
        with self._lock:
            self.state = State(self.subscription_id)
            self.requests.clear()

    # ------------------------------------------------------------------ test controls
    def inject(self, kind, location=None, times=1, size=None, *, zone=None, code=None, message=None,
               method=None, path=None):
        """Queue a fault. VM kinds (sku_not_available_409, quota, allocation_failed_lro,
        zonal_allocation_failed_lro, overconstrained_allocation_lro, lro_never_done) fire on a matching VM PUT;
        HTTP kinds (throttle_429, unavailable_503, auth_401, invalid_400) on the next request matching `method`
        / `path` (a regex), or on a matching VM PUT when location/size/zone is given. lro_never_done with
        method/path applies to any LRO-starting request. times=None: forever. code/message override the text
        (e.g. allocation_failed_lro with code="ZonalAllocationFailed")."""
        with self._lock:
            f = Fault(kind, location, times, size, zone, code, message, method, path)
            self.state.faults.append(f)
            return f

    def set_run_command_output(self, rg, vm, stdout="", stderr=""):
        """What RunShellScript prints on this VM: strings, or stdout=callable(script_lines) -> str | (out, err)."""
        with self._lock:
            self.state.run_output[(rg.lower(), vm.lower())] = stdout if callable(stdout) else (stdout, stderr)

    def set_serial_log(self, rg, vm, text):
        with self._lock:
            self.state.serial_logs[(rg.lower(), vm.lower())] = text

    def set_power_state(self, rg, vm, power):
        """'running' | 'stopped' | 'deallocated' (e.g. the in-VM idle watchdog powered it off)."""
        with self._lock:
            self.state.vm(rg, vm)["extra"]["power"] = power

    def evict(self, rg, vm):
        """Spot eviction: evictionPolicy Delete removes the VM (and what has deleteOption Delete); else deallocates."""
        with self._lock:
            rec = self.state.vm(rg, vm)
            if (rec["body"]["properties"].get("evictionPolicy") or "").lower() == "delete":
                self.state.remove(rec)
            else:
                rec["extra"]["power"] = "deallocated"

    def add_image(self, publisher, offer, sku, versions, generation="V2", os_version=""):
        with self._lock:
            self.state.images[(publisher, offer, sku)] = (generation, list(versions), os_version)

    def finish_operations(self, stuck=False):
        """Run every in-flight LRO to its end now; stuck=True also releases lro_never_done ones (do that before
        a test ends: a poller left on a never-ending LRO keeps polling in its thread)."""
        with self._lock:
            for op in list(self.state.ops.values()):
                op.polls, op.never = 0, op.never and not stuck
                op.advance()

    # ------------------------------------------------------------------ inspection
    def resources_in(self, rg):
        with self._lock:
            return self.state.resources_in(rg)

    def resource_groups(self):
        with self._lock:
            return self.state.resource_groups()

    def resource(self, rid):
        """The resource as GET would return it (None when absent)."""
        with self._lock:
            rec = self.state.by_id(rid)
            return None if rec is None else self.state.render(rec, "instanceView" if rec["type"] == VM_T else "")

    def pending_operations(self):
        with self._lock:
            return [op for op in self.state.ops.values() if op.status == "InProgress"]

    @property
    def run_commands(self):
        return self.state.run_commands

    @property
    def faults(self):
        return self.state.faults

    def calls(self, method=None, path=None):
        """Recorded requests, filtered by method and a path regex."""
        return [r for r in self.requests if (method is None or r.method == method.upper())
                and (path is None or re.search(path, r.path, re.I))]

    def api_versions(self):
        """{namespace: {api-version, ...}} as sent by the clients."""
        out = {}
        for r in self.requests:
            if r.api_version and r.namespace:
                out.setdefault(r.namespace, set()).add(r.api_version)
        return out

    # ------------------------------------------------------------------ SDK wiring
    def client_kwargs(self, **overrides):
        kw = dict(credential=StaticTokenCredential(self.token or DEFAULT_TOKEN), subscription_id=self.subscription_id,
                  base_url=self.url, connection_verify=self.ca_path, polling_interval=0,
                  credential_scopes=["https://management.azure.com/.default"],
                  retry_total=2, retry_backoff_factor=0.01, retry_backoff_max=0.05)
        kw.update(overrides)
        return kw

    def clients(self, **overrides):
        """(ResourceManagementClient, NetworkManagementClient, ComputeManagementClient) pointed at the emulator."""
        from azure.mgmt.compute import ComputeManagementClient
        from azure.mgmt.network import NetworkManagementClient
        from azure.mgmt.resource.resources import ResourceManagementClient   # trap A6: not azure.mgmt.resource
        kw = self.client_kwargs(**overrides)
        return ResourceManagementClient(**kw), NetworkManagementClient(**kw), ComputeManagementClient(**kw)

    def env(self):
        """Environment for the trainvm CLI (see SPEC.md Environment)."""
        return {"TRAINVM_AZURE_ENDPOINT": self.url, "REQUESTS_CA_BUNDLE": self.ca_path,
                "AZURE_SUBSCRIPTION_ID": self.subscription_id, "TRAINVM_AZURE_ACCESS_TOKEN": self.token or DEFAULT_TOKEN}

    # ------------------------------------------------------------------ HTTP
    def _dispatch(self, method, raw_path, headers, raw):
        parts = urlsplit(raw_path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        try:
            body, bad = (json.loads(raw) if raw else None), None
        except ValueError as e:
            body, bad = raw.decode(errors="replace"), str(e)
        rec = Recorded(method, parts.path, query, body, {k.lower(): v for k, v in headers.items()
                                                         if k.lower() in _KEPT_HEADERS})
        with self._lock:
            self.requests.append(rec)
            try:
                if bad:
                    raise ArmError(400, "InvalidRequestContent", "The request content was invalid and could not be "
                                   f"deserialized: '{bad}'.")
                status, hdrs, out = self._route(method, parts.path, query, headers, body, rec)
            except ArmError as e:
                status, hdrs, out = e.status, dict(e.headers), e.body()
        rec.status = status
        hdrs.setdefault("x-ms-request-id", str(uuid.uuid4()))
        hdrs.setdefault("x-ms-correlation-request-id", headers.get("x-ms-client-request-id") or str(uuid.uuid4()))
        return status, hdrs, (None if method == "HEAD" else out)

    def _route(self, method, path, q, headers, body, rec):
        seg = [s for s in path.split("/") if s]
        low = [s.lower() for s in seg]
        if low[:1] == ["bootdiagnostics"] and len(seg) == 3:   # the SAS blob URL: no bearer token
            text = self.state.serial_log(seg[1]) if "sig" in q else None
            if text is None or not seg[2].endswith("serialconsole.log"):
                return 404, {"Content-Type": "application/xml"}, b"<Error><Code>BlobNotFound</Code></Error>"
            return 200, {"Content-Type": "text/plain"}, text.encode()
        auth = headers.get("Authorization") or ""
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            raise ArmError(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is "
                           "missing.", headers={"WWW-Authenticate": _WWW_AUTH})
        if self.token and auth[7:].strip() != self.token:
            raise ArmError(401, "InvalidAuthenticationToken", "The access token is invalid.",
                           headers={"WWW-Authenticate": _WWW_AUTH.replace("missing 'Authorization' header", "an "
                                                                          "invalid access token")})
        fault = self.state.take_fault("http", method, path)
        if fault:
            raise http_fault_error(fault)
        api = q.get("api-version")
        if not api:
            raise ArmError(400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is "
                           "required for all requests.")
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}(-preview)?", api):
            raise ArmError(400, "InvalidApiVersionParameter", f"The api-version '{api}' is invalid. The supported "
                           "versions are in the format 'yyyy-mm-dd' or 'yyyy-mm-dd-preview'.")
        if low[:1] != ["subscriptions"] or len(seg) < 3:
            raise ArmError(404, "NotFound", f"No HTTP resource was found that matches the request URI '{path}'.")
        if low[1] != self.subscription_id.lower():
            raise ArmError(404, "SubscriptionNotFound", f"The subscription '{seg[1]}' could not be found.")
        s, ls = seg[2:], low[2:]
        rec.namespace = next((seg[2 + i + 1] for i, x in enumerate(ls) if x == "providers" and i + 1 < len(s)),
                             "Microsoft.Resources")
        mp = (method, path)
        if ls[0] == "resourcegroups" and len(s) <= 2:
            return self._groups(method, s[1] if len(s) == 2 else None, q, body, rec, path)
        if ls[0] == "resources" and len(s) == 1 and method == "GET":
            return self._page(self._generic(self.state.list_resources(flt=q.get("$filter"))), q, path)
        if ls[0] == "operationresults" and len(s) == 2 and method == "GET":
            return self._poll(s[1], location=True, api=api)
        if ls[0] == "resourcegroups" and len(s) == 3 and ls[2] == "resources" and method == "GET":
            self.state.group(s[1])
            return self._page(self._generic(self.state.list_resources(rg=s[1], flt=q.get("$filter"))), q, path)
        if ls[0] == "resourcegroups" and len(s) >= 5 and ls[2] == "providers":
            return self._resource(method, s[1], s[3], s[4:], q, body, rec, api, mp)
        if ls[0] == "providers" and len(s) >= 2:
            return self._provider(method, s[1:], ls[1:], q, api, path)
        raise ArmError(404, "NotFound", f"No HTTP resource was found that matches the request URI '{path}'.")

    def _groups(self, method, rg, q, body, rec, path):
        st = self.state
        if rg is None:
            if method != "GET":
                raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")
            items = st.list_groups(q.get("$filter"))
            return self._page(items[:int(q["$top"])] if q.get("$top") else items, q, path)
        if method == "PUT":
            created, out = st.put_group(rg, body if isinstance(body, dict) else {})
            return (201 if created else 200), {}, out
        if method == "HEAD":
            return (204 if st.group(rg, required=False) else 404), {}, None
        g = st.group(rg)
        if method == "GET":
            return 200, {}, st.render_group(g)
        if method == "PATCH":
            upd = validate(RESOURCE_GROUP, body or {}, "", rec.ignored)
            check_tags(upd.get("tags"))
            g["tags"] = upd.get("tags", g["tags"]) or {}
            return 200, {}, st.render_group(g)
        if method == "DELETE":
            op = st.delete_group(rg, self.polls, (method, path))
            return 202, {"Location": self._op_url(op, q["api-version"], location=True), "Retry-After": "0"}, None
        raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")

    def _resource(self, method, rg, ns, rest, q, body, rec, api, mp):
        st = self.state
        type_ = TYPES.get(rest[0].lower())
        if type_ is None or type_.split("/")[0].lower() != ns.lower():
            raise ArmError(404, "InvalidResourceType", f"The resource type '{rest[0]}' could not be found in the "
                           f"namespace '{ns}' for api version '{api}'.")
        if len(rest) == 1 and method == "GET":
            st.group(rg)
            return self._page([st.render(r) for r in st.of_type(type_, rg)], q, mp[1])
        name = rest[1]
        if len(rest) == 2:
            if method == "PUT" and type_ != DISK_T:
                if not isinstance(body, dict):
                    raise ArmError(400, "InvalidRequestContent", "The request content was invalid and could not be "
                                   "deserialized: 'the body must be a JSON object'.")
                status, res, op, rec.ignored = st.put(type_, rg, name, body, self.polls, mp)
                hdrs = {"Retry-After": "0"}
                if self.lro_style == "async":
                    hdrs["Azure-AsyncOperation"] = self._op_url(op, api)
                return status, hdrs, st.render(res)
            if method == "GET":
                st.group(rg)
                res = st.get(rg, type_, name)
                if res is None:
                    raise not_found(type_, name, rg)
                if self.lro_style == "body" and res.get("op") in st.ops:
                    st.ops[res["op"]].advance()
                return 200, {}, st.render(res, q.get("$expand", ""))
            if method == "DELETE":
                op = st.delete(type_, rg, name, self.polls, mp)
                if op is None:
                    return 204, {}, None
                return 202, {"Location": self._op_url(op, api, location=True), "Retry-After": "0",
                             "Azure-AsyncOperation": self._op_url(op, api)}, None
        if type_ == TYPES["virtualnetworks"] and len(rest) == 4 and rest[2].lower() == "subnets" and method == "GET":
            vnet = st.get(rg, type_, name)
            sub = next((s for s in (st.render(vnet)["properties"].get("subnets") or []) if vnet
                        and s["name"].lower() == rest[3].lower()), None)
            if sub is None:
                raise not_found(f"{type_}/{name}/subnets", rest[3], rg)
            return 200, {}, sub
        if type_ == VM_T and len(rest) == 3:
            action = rest[2].lower()
            if action == "instanceview" and method == "GET":
                return 200, {}, st.instance_view(st.vm(rg, name))
            if action == "retrievebootdiagnosticsdata" and method == "POST":
                return 200, {}, st.boot_diagnostics(rg, name, self.url)
            if action == "runcommand" and method == "POST":
                op = st.run_command(rg, name, body or {}, self.polls, mp)
                return 202, self._lro_headers(op, api), None
            if action in ("start", "poweroff", "deallocate", "restart") and method == "POST":
                return 202, self._lro_headers(st.power(rg, name, action, self.polls, mp), api), None
        raise ArmError(404 if method == "GET" else 405, "NotFound" if method == "GET" else "MethodNotAllowed",
                       f"No route for {method} {mp[1]} in the emulator.")

    def _provider(self, method, s, ls, q, api, path):
        st = self.state
        if ls == ["microsoft.compute", "virtualmachines"] and method == "GET":
            return self._page([st.render(r) for r in st.of_type(VM_T)], q, path)
        if len(ls) == 4 and ls[0] == "microsoft.compute" and ls[1] == "locations" and ls[3] == "virtualmachines":
            return self._page([st.render(r) for r in st.of_type(VM_T)
                               if r["location"] == ls[2]], q, path)
        if len(ls) == 5 and ls[1] == "locations" and ls[3] in ("operations", "operationresults") and method == "GET":
            return self._poll(s[4], location=(ls[3] == "operationresults" or q.get("monitor") == "true"), api=api)
        if len(ls) in (12, 13) and ls[1] == "locations" and ls[3:10:2] == ["publishers", "artifacttypes", "offers",
                                                                            "skus"] and ls[11] == "versions":
            ver = s[12] if len(s) == 13 else None
            out = st.image_versions(s[2], s[4], s[8], s[10], ver)
            if ver is None:
                out = sorted(out, key=lambda v: [int(x) for x in v["name"].split(".")],
                             reverse="desc" in (q.get("$orderby") or "").lower())
                out = out[:int(q["$top"])] if q.get("$top") else out
            return 200, {}, out
        if len(ls) == 1 and method == "GET":
            return 200, {}, {"id": f"/subscriptions/{self.subscription_id}/providers/{s[0]}", "namespace": s[0],
                             "registrationState": "Registered", "resourceTypes": []}
        if len(ls) == 2 and ls[1] == "register" and method == "POST":
            return 200, {}, {"namespace": s[0], "registrationState": "Registered"}
        raise ArmError(404, "NotFound", f"No HTTP resource was found that matches the request URI '{path}'.")

    # ------------------------------------------------------------------ LRO plumbing
    def _op_url(self, op, api, location=False):
        base = f"{self.url}/subscriptions/{self.subscription_id}"
        if op.ns == "Microsoft.Resources":
            return f"{base}/operationresults/{op.id}?api-version={api}"
        if op.ns == "Microsoft.Network":
            kind = "operationResults" if location else "operations"
            return f"{base}/providers/{op.ns}/locations/{op.location}/{kind}/{op.id}?api-version={api}"
        return (f"{base}/providers/{op.ns}/locations/{op.location}/operations/{op.id}?"
                + urlencode({"p": op.id[:8], **({"monitor": "true"} if location else {}), "api-version": api}))

    def _lro_headers(self, op, api):
        return {"Azure-AsyncOperation": self._op_url(op, api), "Location": self._op_url(op, api, location=True),
                "Retry-After": "0"}

    def _poll(self, op_id, location, api):
        op = self.state.ops.get(op_id)
        if op is None:
            raise ArmError(404, "NotFound", f"The operation '{op_id}' was not found.")
        op.advance()
        if not location:                     # Azure-AsyncOperation: always 200, even when Failed (trap A4)
            hdrs = {"Retry-After": "0"} if op.status == "InProgress" else {}
            return 200, hdrs, op.status_body()
        if op.status == "InProgress":
            return 202, {"Location": self._op_url(op, api, location=True), "Retry-After": "0"}, None
        if op.status != "Succeeded":
            return 409, {}, {"error": op.error}
        return (200, {}, op.result) if op.result is not None else (200, {}, None)

    def _page(self, items, q, path):
        skip = int(q.get("$skiptoken") or 0)
        out = {"value": items[skip:skip + self.page_size]}
        if skip + self.page_size < len(items):
            out["nextLink"] = f"{self.url}{path}?" + urlencode({**q, "$skiptoken": skip + self.page_size})
        return 200, {}, out

    def _generic(self, recs):
        keys = ("id", "name", "type", "location", "tags", "sku", "zones", "managedBy")
        return [{k: v for k, v in self.state.render(r).items() if k in keys} for r in recs]


try:  # a ready-made fixture: `from tests.emulators.arm import arm_emulator  # noqa: F401` in a test module
    import pytest

    @pytest.fixture
    def arm_emulator():
        with ArmEmulator() as emu:
            yield emu
except ImportError:  # pragma: no cover
    pass

__all__ = ["ArmEmulator", "ArmError", "Recorded", "StaticTokenCredential", "KINDS", "DEFAULT_SUBSCRIPTION",
           "DEFAULT_TOKEN"]
