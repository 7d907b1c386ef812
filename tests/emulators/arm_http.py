"""HTTP side of the ARM emulator: request dispatch, routing, LRO status endpoints, paging.

Mixed into ArmEmulator (tests/emulators/arm.py); it uses the emulator's state, settings and lock.
"""
from __future__ import annotations

import json
import re
import socket
import ssl
import time
import uuid
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, urlencode, urlsplit

from .arm_catalog import DISK_T, TYPES, VM_T
from .arm_checks import check_tags
from .arm_faults import http_fault_error, not_found
from .arm_gallery import GalleryRoutes
from .arm_permissions import AuthzRoutes
from .arm_quota import usages
from .arm_schemas import RESOURCE_GROUP
from .arm_storage import StorageRoutes
from .arm_validate import ArmError, validate
from .arm_vmss_routes import VmssRoutes

KEPT_HEADERS = ("authorization", "content-type", "accept", "user-agent", "x-ms-client-request-id")
_WWW_AUTH = ('Bearer authorization_uri="https://login.microsoftonline.com/common", error="invalid_token", '
             'error_description="The authentication failed because of missing \'Authorization\' header."')


class Handler(BaseHTTPRequestHandler):
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
            try:
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):  # the client gave up (a "silent" endpoint)
                self.close_connection = True

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _handle



class ArmRouter(VmssRoutes, StorageRoutes, AuthzRoutes, GalleryRoutes):
    """Request handling for ArmEmulator (needs .state, ._lock, .requests, .polls, .lro_style, .page_size,
    .token, .url, .subscription_id and a Recorded class)."""

    def _dispatch(self, method, raw_path, headers, raw):
        parts = urlsplit(raw_path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        try:
            body, bad = (json.loads(raw) if raw else None), None
        except ValueError as e:
            body, bad = raw.decode(errors="replace"), str(e)
        rec = self.Recorded(method, parts.path, query, body, {k.lower(): v for k, v in headers.items()
                                                         if k.lower() in KEPT_HEADERS})
        silent = getattr(self, "silent", None)  # (path regex, seconds): hold matching requests, as a silent endpoint
        if silent and re.search(silent[0], parts.path, re.I):
            time.sleep(silent[1])
        before = getattr(self, "before_request", None)  # a test hook, outside the lock: e.g. hold two racing PUTs
        if before is not None:
            before(method, parts.path, body)
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
        after = getattr(self, "after_request", None)  # a test hook, outside the lock, once the answer is decided
        if after is not None:
            after(method, parts.path, body, status)
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
        authz = self._authz_route(method, s, ls, q, body)  # arm_permissions.py
        if authz is not None:
            return authz
        if ls[0] == "resourcegroups" and len(s) <= 2:
            return self._groups(method, s[1] if len(s) == 2 else None, q, body, rec, path)
        if ls[0] == "resources" and len(s) == 1 and method == "GET":
            return self._page(self._generic(self.state.list_resources(flt=q.get("$filter"))), q, path)
        if ls[0] == "operationresults" and len(s) == 2 and method == "GET":
            return self._poll(s[1], location=True, api=api)
        if ls[0] == "resourcegroups" and len(s) == 3 and ls[2] == "resources" and method == "GET":
            self.state.group(s[1])
            return self._page(self._generic(self.state.list_resources(rg=s[1], flt=q.get("$filter"))), q, path)
        if ls[0] == "resourcegroups" and len(s) in (5, 6) and ls[2:5] == ["providers", "microsoft.authorization",
                                                                           "roleassignments"]:
            status, out = self.state.role_assignment(method, s[1], s[5] if len(s) == 6 else None, body, api)
            return status, {}, out
        if ls[0] == "resourcegroups" and len(s) >= 5 and ls[2:4] == ["providers", "microsoft.storage"]:
            return self._storage(method, s[1], s[4:], ls[4:], q, body, rec, api, mp)
        if ls[0] == "resourcegroups" and len(s) >= 5 and ls[2] == "providers":
            return self._resource(method, s[1], s[3], s[4:], q, body, rec, api, mp)
        if ls[0] == "providers" and len(s) >= 2:
            return self._provider(method, s[1:], ls[1:], q, api, path, body)
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
        gallery = self._gallery_route(method, rg, ns, rest, q, body, api, mp)  # arm_gallery.py
        if gallery is not None:
            return gallery
        type_ = TYPES.get(rest[0].lower())
        if type_ is None or type_.split("/")[0].lower() != ns.lower():
            raise ArmError(404, "InvalidResourceType", f"The resource type '{rest[0]}' could not be found in the "
                           f"namespace '{ns}' for api version '{api}'.")
        if len(rest) == 1 and method == "GET":
            st.group(rg)
            return self._page([st.render(r) for r in st.of_type(type_, rg)], q, mp[1])
        routed = self._vmss_route(method, rg, type_, rest, q, body, rec, api, mp)
        if routed is not None:
            return routed
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
            st.group(rg)
            vnet = st.get(rg, type_, name)
            subnets = st.render(vnet)["properties"].get("subnets") or [] if vnet else []
            sub = next((s for s in subnets if s["name"].lower() == rest[3].lower()), None)
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

    def _provider(self, method, s, ls, q, api, path, body=None):
        st = self.state
        galleries = self._gallery_list_all(ls, q, path) if method == "GET" else None  # arm_gallery.py
        if galleries is not None:
            return galleries
        if ls == ["microsoft.compute", "virtualmachines"] and method == "GET":
            expand = "instanceView" if (q.get("statusOnly") or "").lower() == "true" else ""
            return self._page([st.render(r, expand) for r in st.of_type(VM_T)], q, path)
        if len(ls) == 2 and method == "GET" and TYPES.get(ls[1], "").lower() == f"{ls[0]}/{ls[1]}":
            return self._page([st.render(r) for r in st.of_type(TYPES[ls[1]])], q, path)   # subscription-wide list
        if len(ls) == 4 and ls[0] == "microsoft.compute" and ls[1] == "locations" and ls[3] == "virtualmachines":
            return self._page([st.render(r) for r in st.of_type(VM_T)
                               if r["location"] == ls[2]], q, path)
        if len(ls) == 4 and ls[:2] == ["microsoft.compute", "locations"] and ls[3] == "usages" and method == "GET":
            return self._page(usages(self, s[2]), q, path)   # arm_quota.py
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
        if ls == ["microsoft.storage", "checknameavailability"] and method == "POST":
            return 200, {}, st.check_account_name(body)  # arm_storage.py
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
        if getattr(self, "on_poll", None) is not None and op.status == "InProgress":
            self.on_poll(self, op)  # a test hook: e.g. `trainvm down` deleting the group while a create is pending
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
