"""VPC firewall rules for the Compute Engine emulator (tests/emulators/gce.py): firewalls insert/get/list/update/
delete under /compute/v1/projects/{project}/global/firewalls, globalOperations get/wait, the Compute Engine rules
the discovery schema cannot express (`check_firewall`), and `ingress_decision`, which evaluates the stored rules
for a packet the way VPC firewalls do (lowest priority number wins; DENY beats ALLOW at equal priority; implied
deny-all ingress at 65535), so tests can assert who can actually reach port 22 of an instance.

Every project's `default` network starts with the rules GCE creates for an auto-mode default network
(default-allow-ssh from 0.0.0.0/0 at 65534, ...) unless the emulator is built with default_firewalls=False.
A rule exists from its insert (as instances do) and is gone once its delete operation is DONE; an insert whose
operation carries an injected fault creates nothing. Mixed into GceEmulator; handlers run under its lock."""
from __future__ import annotations

import copy
import ipaddress
import re

from .gce_faults import OP_FAULTS, op_error
from .gce_filter import compile_filter
from .gce_resources import API, now, operation_resource
from .gce_validate import ApiError, invalid, relative

TAG = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
PORTS = re.compile(r"([0-9]+)(?:-([0-9]+))?")
PROTOCOLS = {"tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"}
WITH_PORTS = {"tcp", "udp", "sctp"}
DEFAULT_RULES = (  # what an auto-mode default network comes with
    ("default-allow-internal", ["10.128.0.0/9"], [{"IPProtocol": "tcp", "ports": ["0-65535"]},
                                                  {"IPProtocol": "udp", "ports": ["0-65535"]}, {"IPProtocol": "icmp"}]),
    ("default-allow-ssh", ["0.0.0.0/0"], [{"IPProtocol": "tcp", "ports": ["22"]}]),
    ("default-allow-rdp", ["0.0.0.0/0"], [{"IPProtocol": "tcp", "ports": ["3389"]}]),
    ("default-allow-icmp", ["0.0.0.0/0"], [{"IPProtocol": "icmp"}]),
)


def _ranges(field: str, values, bad) -> None:
    versions = set()
    for i, v in enumerate(values or []):
        try:
            versions.add(ipaddress.ip_network(v, strict=True).version)
        except (TypeError, ValueError):
            bad(f"{field}[{i}]", v, "Must be an IPv4 or IPv6 CIDR range with no host bits set (e.g. 203.0.113.0/24).")
    if len(versions) > 1:
        bad(field, ", ".join(values), "A firewall rule can contain either IPv4 or IPv6 ranges, but not both.")


def check_firewall(body: dict, project: str, networks) -> None:
    """Raise ApiError(400) listing every Compute Engine rule the Firewall body breaks."""
    errs: list[str] = []

    def bad(field: str, value, why: str) -> None:
        errs.append(f"Invalid value for field 'resource.{field}': '{value}'. {why}")

    prio = body.get("priority")
    if prio is not None and not 0 <= int(prio) <= 65535:
        bad("priority", prio, "Must be in [0, 65535].")
    allowed, denied = body.get("allowed") or [], body.get("denied") or []
    if bool(allowed) == bool(denied):
        bad("allowed" if allowed else "denied", "", "Exactly one of allowed or denied must be specified (and not empty).")
    for key, entries in (("allowed", allowed), ("denied", denied)):
        for i, e in enumerate(entries):
            proto = str(e.get("IPProtocol") or "").lower()
            if not proto:
                errs.append(f"Required field 'resource.{key}[{i}].IPProtocol' not specified")
            elif proto not in PROTOCOLS and not (proto.isdigit() and 0 <= int(proto) <= 255):
                bad(f"{key}[{i}].IPProtocol", proto, "Must be tcp, udp, icmp, esp, ah, sctp, ipip, all or a number 0-255.")
            if e.get("ports") and proto not in WITH_PORTS:
                bad(f"{key}[{i}].ports", e["ports"], "Ports can only be specified for tcp, udp and sctp.")
            for j, p in enumerate(e.get("ports") or []):
                m = PORTS.fullmatch(str(p))
                if not m or int(m.group(1)) > 65535 or int(m.group(2) or m.group(1)) > 65535 or \
                        int(m.group(2) or m.group(1)) < int(m.group(1)):
                    bad(f"{key}[{i}].ports[{j}]", p, "Must be a port (0-65535) or a range lo-hi.")
    _ranges("sourceRanges", body.get("sourceRanges"), bad)
    _ranges("destinationRanges", body.get("destinationRanges"), bad)
    if body.get("direction", "INGRESS") == "EGRESS" and (body.get("sourceTags") or body.get("sourceServiceAccounts")):
        bad("sourceTags", "", "sourceTags and sourceServiceAccounts cannot be set for EGRESS rules.")
    if body.get("targetServiceAccounts") and (body.get("targetTags") or body.get("sourceTags")):
        bad("targetServiceAccounts", "", "targetServiceAccounts cannot be used together with targetTags or sourceTags.")
    if body.get("sourceServiceAccounts") and body.get("targetTags"):
        bad("sourceServiceAccounts", "", "sourceServiceAccounts cannot be used together with targetTags.")
    for key in ("targetTags", "sourceTags"):
        for i, t in enumerate(body.get(key) or []):
            if not isinstance(t, str) or not TAG.fullmatch(t):
                bad(f"{key}[{i}]", t, f"Must be a match of regex '{TAG.pattern}'.")
    net = body.get("network")
    m = re.fullmatch(r"(?:projects/([^/]+)/)?global/networks/([^/]+)", relative(net)) if net else None
    if net and (not m or m.group(1) not in (None, project) or m.group(2) not in networks):
        bad("network", net, f"The referenced network was not found (known: {list(networks)}).")
    if errs:
        raise invalid(errs)


def firewall_resource(body: dict, project: str, fw_id: str) -> dict:
    """The Firewall as firewalls.get returns it: full network URL and the defaults GCE fills in."""
    fw = copy.deepcopy(body)
    net = relative(body.get("network") or "global/networks/default").split("/")[-1]
    direction = body.get("direction") or "INGRESS"
    fw.update(kind="compute#firewall", id=fw_id, creationTimestamp=now(), direction=direction,
              priority=int(body.get("priority", 1000)), disabled=bool(body.get("disabled")),
              network=f"{API}projects/{project}/global/networks/{net}",
              selfLink=f"{API}projects/{project}/global/firewalls/{body['name']}",
              logConfig={"enable": False, **(body.get("logConfig") or {})})
    if direction == "INGRESS" and not (fw.get("sourceRanges") or fw.get("sourceTags") or fw.get("sourceServiceAccounts")):
        fw["sourceRanges"] = ["0.0.0.0/0"]  # what the API does when no source is given
    if direction == "EGRESS" and not fw.get("destinationRanges"):
        fw["destinationRanges"] = ["0.0.0.0/0"]
    return fw


def _covers(entry: dict, protocol: str, port: int) -> bool:
    proto = str(entry.get("IPProtocol", "")).lower()
    if proto not in ("all", protocol):
        return False
    for p in entry.get("ports") or ["0-65535"]:
        lo, _, hi = str(p).partition("-")
        if int(lo) <= port <= int(hi or lo):
            return True
    return False


class FirewallsMixin:
    """firewalls.* and globalOperations.* handlers, plus test helpers; mixed into GceEmulator."""

    # ------------------------------------------------------------------ state
    def _fw_seed(self, project: str) -> None:
        if project in self._fw_projects:
            return
        self._fw_projects.add(project)
        if self.default_firewalls and "default" in self.networks:
            for name, ranges, allowed in DEFAULT_RULES:
                body = {"name": name, "description": f"Allow {name[len('default-allow-'):]} on the default network",
                        "network": "global/networks/default", "priority": 65534, "sourceRanges": ranges, "allowed": allowed}
                self.firewalls[(project, name)] = firewall_resource(body, project, str(self._rng.getrandbits(63)))

    def _fw_lookup(self, project: str, firewall: str) -> tuple:
        self._fw_seed(project)
        if (project, firewall) not in self.firewalls:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/global/firewalls/{firewall}' was not found")
        return (project, firewall)

    def _global_op(self, req, project: str, op_type: str, name: str, target_id: str, fault=None) -> dict:
        op = operation_resource(project, "global", op_type, name, target_id, self.initial_op_status, self._rng)
        del op["zone"]
        op.update(targetLink=f"{API}projects/{project}/global/firewalls/{name}",
                  selfLink=f"{API}projects/{project}/global/operations/{op['name']}")
        key = (project, None, op["name"])
        self.operations[key] = op
        self._op_state[key] = {"polls": 0, "fault": fault, "target": (project, None, name), "collection": "firewalls"}
        if "requestId" in req.query:
            self._request_ids[(project, req.query["requestId"])] = key
        if self.polls_to_done <= 0:
            self._finish(key)
        return copy.deepcopy(op)

    def _finish(self, key: tuple) -> None:
        st = self._op_state[key]
        if st.get("collection") == "images":
            return self._finish_image(key)
        if st.get("collection") != "firewalls":
            return super()._finish(key)
        op, (project, _, name), fault = self.operations[key], st["target"], st["fault"]
        op.update(status="DONE", progress=100, endTime=now())
        if fault:
            op.update(op_error(fault.kind, fault.params, project, None))
        elif op["operationType"] == "delete":
            self.firewalls.pop((project, name), None)

    # ------------------------------------------------------------------ handlers
    def _globalOperations_get(self, req, project, operation):
        if (project, None, operation) not in self.operations:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/global/operations/{operation}' was not found")
        return self._advance((project, None, operation))

    _globalOperations_wait = _globalOperations_get

    def _fw_body(self, req, project, method_id: str) -> dict:
        body = req.body
        if not isinstance(body, dict):
            raise invalid("Invalid value for field 'resource': ''. The request body must be a Firewall object.")
        errs = self.discovery.check_body("Firewall", body, method_id)
        if errs:
            raise invalid(errs)
        check_firewall(body, project, self.networks)
        return body

    def _firewalls_insert(self, req, project):
        if (dup := self._request_id(req, project)) is not None:
            return dup
        body = self._fw_body(req, project, "compute.firewalls.insert")
        self._fw_seed(project)
        if (project, body["name"]) in self.firewalls:
            raise ApiError(409, "alreadyExists", f"The resource 'projects/{project}/global/firewalls/{body['name']}' already exists")
        fault = self._take_fault(OP_FAULTS, "compute.firewalls.insert", None)
        fw_id = str(self._rng.getrandbits(63))
        if fault is None or fault.kind == "op_never_done":
            self.firewalls[(project, body["name"])] = firewall_resource(body, project, fw_id)
        return self._global_op(req, project, "insert", body["name"], fw_id, fault)

    def _firewalls_get(self, req, project, firewall):
        return copy.deepcopy(self.firewalls[self._fw_lookup(project, firewall)])

    def _firewalls_update(self, req, project, firewall):
        if (dup := self._request_id(req, project)) is not None:
            return dup
        key = self._fw_lookup(project, firewall)
        body = self._fw_body(req, project, "compute.firewalls.update")
        if body.get("name") not in (None, firewall):
            raise invalid(f"Invalid value for field 'resource.name': '{body['name']}'. The name of a firewall rule "
                          "cannot be changed.")
        old = self.firewalls[key]
        self.firewalls[key] = {**firewall_resource({**body, "name": firewall}, project, old["id"]),
                               "creationTimestamp": old["creationTimestamp"]}
        return self._global_op(req, project, "update", firewall, old["id"])

    def _firewalls_delete(self, req, project, firewall):
        if (dup := self._request_id(req, project)) is not None:
            return dup
        key = self._fw_lookup(project, firewall)
        return self._global_op(req, project, "delete", firewall, self.firewalls[key]["id"])

    def _firewalls_list(self, req, project):
        self._fw_seed(project)
        try:
            pred = compile_filter(req.query.get("filter"))
        except (ValueError, re.error) as e:
            raise invalid(f"Invalid value for field 'filter': '{req.query.get('filter')}'. Invalid list filter expression ({e}).")
        items = [copy.deepcopy(v) for k, v in sorted(self.firewalls.items()) if k[0] == project and pred(v)]
        page, nxt = self._page(req, items)
        out = {"kind": "compute#firewallList", "id": f"projects/{project}/global/firewalls",
               "selfLink": f"{API}projects/{project}/global/firewalls"}
        return {**out, **({"items": page} if page else {}), **({"nextPageToken": nxt} if nxt else {})}

    # ------------------------------------------------------------------ test helpers
    def firewall(self, name: str, project: str) -> dict | None:
        """A copy of the stored rule (as firewalls.get returns it), or None."""
        with self._lock:
            self._fw_seed(project)
            rule = self.firewalls.get((project, name))
            return copy.deepcopy(rule) if rule else None

    def firewall_names(self, project: str) -> list[str]:
        with self._lock:
            self._fw_seed(project)
            return sorted(n for p, n in self.firewalls if p == project)

    def ingress_decision(self, instance: str, source: str, port: int = 22, protocol: str = "tcp",
                         zone: str | None = None, project: str | None = None) -> tuple[str, str | None]:
        """("allow" | "deny", deciding rule or None for the implied deny) for a packet from ``source`` to the
        instance's ``port``, from the enabled INGRESS rules of its networks that match its tags and the source."""
        with self._lock:
            key = self.find(instance, zone, project)
            inst, project = self.instances[key], key[0]
            self._fw_seed(project)
            nets = {relative(n["network"]).split("/")[-1] for n in inst["networkInterfaces"]}
            tags, ip = set((inst.get("tags") or {}).get("items") or []), ipaddress.ip_address(source)
            found = []
            for (p, name), fw in self.firewalls.items():
                if p != project or fw.get("disabled") or fw["direction"] != "INGRESS" or \
                        relative(fw["network"]).split("/")[-1] not in nets:
                    continue
                if (fw.get("targetTags") and not tags & set(fw["targetTags"])) or fw.get("targetServiceAccounts"):
                    continue
                if not any(ip in ipaddress.ip_network(r) for r in fw.get("sourceRanges") or []):
                    continue
                for rank, action in ((0, "denied"), (1, "allowed")):
                    if any(_covers(e, protocol, port) for e in fw.get(action) or []):
                        found.append((fw["priority"], rank, name))
            if not found:
                return "deny", None
            prio, rank, name = min(found)
            return ("deny" if rank == 0 else "allow"), name
