"""The Compute Engine emulator (gce.py) with the group engine trainvm uses for clusters: instances.bulkInsert
(count / minCount / perInstanceProperties / namePattern, all-or-nothing below minCount, partial success read
from the operation's instancesBulkInsertOperationMetadata.perLocationStatus), compact placement policies
(resourcePolicies insert/get/delete, regionOperations get/wait; a policy in use cannot be deleted),
instances.setMetadata (with the fingerprint check) and instances.setLabels (with the labelFingerprint check), through the same discovery-checked routes.

Capacity: ``emu.capacity[zone] = K`` lets at most K more VMs be created in that zone by bulkInsert (unset:
unlimited). With K >= minCount, min(count, K) VMs are created and the operation ends DONE without error (a
partial success); with 0 < K < minCount, K are created, then deleted, and the operation fails
VM_MIN_COUNT_NOT_REACHED; with K == 0 it fails ZONE_RESOURCE_POOL_EXHAUSTED and nothing is created.

Rules modelled from the API reference and SkyPilot's notes (docs/spec.md, "Multi-node clusters"): either
namePattern or perInstanceProperties; count >= minCount >= 1; int64 fields arrive as JSON strings; machineType,
acceleratorType and diskType must be bare names (a selfLink answers 503, as SkyPilot observed); a
resourcePolicies entry must name an existing policy in the zone's region; a name that exists is 409.
Not modelled: placement itself (the emulator has no racks: co-location is only the policy attached)."""
from __future__ import annotations

import copy
import ipaddress
import re

from .gce import GceEmulator
from .gce_resources import API, instance_resource, now, region_of
from .gce_validate import ApiError, check_instance, invalid, relative

GROUP_ROUTES = ("compute.instances.bulkInsert", "compute.instances.setMetadata", "compute.instances.setLabels", "compute.resourcePolicies.insert",
                "compute.resourcePolicies.get", "compute.resourcePolicies.delete", "compute.regionOperations.get",
                "compute.regionOperations.wait")
_PATTERN = re.compile(r"^([a-z][-a-z0-9]*?)(#+)$")


class GceGroupEmulator(GceEmulator):
    def __init__(self, **kw):
        super().__init__(**kw)
        for mid in GROUP_ROUTES:
            m = self.discovery.method(mid)
            rx = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(m["flatPath"]))
            self._routes.insert(0, (mid, m["httpMethod"], re.compile(rx)))

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self.policies: dict[tuple, dict] = {}  # (project, region, name) -> ResourcePolicy
            self.region_ops: dict[tuple, dict] = {}
            self.capacity: dict[str, int] = {}
            self._next_ip = int(ipaddress.IPv4Address("10.128.1.2"))
            self._next_nat = 0

    # ------------------------------------------------------------------ resource policies
    def _region_op(self, project, region, op_type, target, error=None) -> dict:
        name = f"operation-{self._rng.getrandbits(52):013x}"
        rurl = f"{API}projects/{project}/regions/{region}"
        op = {"kind": "compute#operation", "id": str(self._rng.getrandbits(63)), "name": name, "region": rurl,
              "operationType": op_type, "targetLink": f"{rurl}/resourcePolicies/{target}", "status": "DONE",
              "progress": 100, "insertTime": now(), "startTime": now(), "endTime": now(), "selfLink": f"{rurl}/operations/{name}"}
        if error:
            op["error"] = {"errors": [error]}
        self.region_ops[(project, region, name)] = op
        return copy.deepcopy(op)

    def _resourcePolicies_insert(self, req, project, region):
        body = req.body
        if not isinstance(body, dict) or not body.get("name"):
            raise invalid("Invalid value for field 'resource.name': ''. Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'")
        errs = self.discovery.check_body("ResourcePolicy", body, "compute.resourcePolicies.insert")
        if errs:
            raise invalid(errs)
        gp = body.get("groupPlacementPolicy") or {}
        if gp.get("collocation") not in (None, "COLLOCATED", "UNSPECIFIED_COLLOCATION"):
            raise invalid(f"Invalid value for field 'resource.groupPlacementPolicy.collocation': '{gp.get('collocation')}'.")
        key = (project, region, body["name"])
        if key in self.policies:
            raise ApiError(409, "alreadyExists", f"The resource 'projects/{project}/regions/{region}/resourcePolicies/{body['name']}' already exists")
        rurl = f"{API}projects/{project}/regions/{region}"
        self.policies[key] = {**copy.deepcopy(body), "kind": "compute#resourcePolicy", "id": str(self._rng.getrandbits(63)),
                              "region": rurl, "selfLink": f"{rurl}/resourcePolicies/{body['name']}", "status": "READY",
                              "creationTimestamp": now()}
        return self._region_op(project, region, "insert", body["name"])

    def _policy(self, project, region, name) -> tuple:
        key = (project, region, name)
        if key not in self.policies:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/regions/{region}/resourcePolicies/{name}' was not found")
        return key

    def _resourcePolicies_get(self, req, project, region, resourcePolicy):
        return copy.deepcopy(self.policies[self._policy(project, region, resourcePolicy)])

    def _resourcePolicies_delete(self, req, project, region, resourcePolicy):
        key = self._policy(project, region, resourcePolicy)
        users = [n for (p, z, n), inst in self.instances.items() if p == project and any(
            relative(r).endswith(f"regions/{region}/resourcePolicies/{resourcePolicy}") for r in inst.get("resourcePolicies") or [])]
        if users:
            raise ApiError(400, "resourceInUseByAnotherResource",
                           f"The resource_policy resource 'projects/{project}/regions/{region}/resourcePolicies/"
                           f"{resourcePolicy}' is already being used by 'projects/{project}/zones/-/instances/{users[0]}'")
        del self.policies[key]
        return self._region_op(project, region, "delete", resourcePolicy)

    def _regionOperations_get(self, req, project, region, operation):
        key = (project, region, operation)
        if key not in self.region_ops:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/regions/{region}/operations/{operation}' was not found")
        return copy.deepcopy(self.region_ops[key])

    _regionOperations_wait = _regionOperations_get

    # ------------------------------------------------------------------ bulkInsert
    def _bulk_names(self, body: dict, project: str, zone: str, count: int) -> list[str]:
        per = body.get("perInstanceProperties") or {}
        pattern = body.get("namePattern")
        if not per and not pattern:
            raise invalid("Invalid value for field 'resource': ''. Either namePattern or perInstanceProperties must be specified.")
        names = list(per)
        if len(names) < count:
            m = _PATTERN.match(pattern or "")
            if not m:
                raise invalid(f"Invalid value for field 'resource.namePattern': '{pattern}'. Only one sequence of '#' at the end is allowed.")
            prefix, width = m.group(1), len(m.group(2))
            taken = [int(n[len(prefix):]) for (p, z, n) in self.instances if p == project and z == zone
                     and n.startswith(prefix) and n[len(prefix):].isdigit()]
            nxt = max(taken, default=0) + 1
            while len(names) < count:
                names.append(f"{prefix}{nxt:0{width}d}")
                nxt += 1
        return names[:count]

    def _instances_bulkInsert(self, req, project, zone):
        if (dup := self._request_id(req, project)) is not None:
            return dup
        body = req.body
        if not isinstance(body, dict):
            raise invalid("Invalid value for field 'resource': ''. The request body must be a BulkInsertInstanceResource.")
        errs = self.discovery.check_body("BulkInsertInstanceResource", body, "compute.instances.bulkInsert")
        if errs:
            raise invalid(errs)
        try:
            count, min_count = int(body.get("count", 0)), int(body.get("minCount", body.get("count", 0)))
        except (TypeError, ValueError):
            raise invalid("Invalid value for field 'resource.count'.")
        if count < 1 or not 1 <= min_count <= count:
            raise invalid(f"Invalid value for field 'resource.minCount': '{min_count}'. minCount must be between 1 and count ({count}).")
        props = copy.deepcopy(body.get("instanceProperties") or {})
        links = [props.get("machineType", "")] + [a.get("acceleratorType", "") for a in props.get("guestAccelerators") or []] + [
            (d.get("initializeParams") or {}).get("diskType", "") for d in props.get("disks") or []]
        if any("/" in str(x) for x in links):
            raise ApiError(503, "backendError", "Internal error. Please try again or contact Google Support. (Code: '-3021491736273291232')")
        region = region_of(zone)
        for rp in props.get("resourcePolicies") or []:
            parts = relative(rp).split("/")
            if len(parts) < 6 or parts[2] != "regions" or (parts[1], parts[3], parts[5]) not in self.policies:
                raise ApiError(404, "notFound", f"The resource '{relative(rp)}' was not found")
            if parts[3] != region:
                raise invalid(f"Invalid value for field 'resource.instanceProperties.resourcePolicies[0]': '{rp}'. "
                              f"Resource policy must be in the same region as the instance.")
        names = self._bulk_names(body, project, zone, count)
        for n in names:
            if (project, zone, n) in self.instances:
                raise ApiError(409, "alreadyExists", f"The resource 'projects/{project}/zones/{zone}/instances/{n}' already exists")
        zurl = f"{API}projects/{project}/zones/{zone}"
        bodies = []
        for n in names:
            inst = {**copy.deepcopy(props), "name": n, "machineType": f"{zurl}/machineTypes/{props.get('machineType')}"}
            for a in inst.get("guestAccelerators") or []:
                a["acceleratorType"] = f"{zurl}/acceleratorTypes/{a['acceleratorType']}"
            for d in inst.get("disks") or []:
                init = d.get("initializeParams") or {}
                if init.get("diskType"):
                    init["diskType"] = f"zones/{zone}/diskTypes/{init['diskType']}"
            check_instance(inst, project, zone, self.networks)
            self._check_image(inst)
            bodies.append(inst)
        if zone not in self.known_zones:
            self.known_zones.append(zone)
        cap = self.capacity.get(zone)
        created = count if cap is None else min(count, cap)
        if cap is not None:
            self.capacity[zone] = cap - (created if created >= min_count else 0)
        op = self._new_op(project, zone, "bulkInsert", names[0], str(self._rng.getrandbits(63)))
        op["targetLink"] = f"{zurl}/instances/{names[0]}"
        key = (project, zone, op["name"])
        self._op_state[key]["bulk"] = {"names": names[:created], "count": count, "min": min_count}
        for inst in bodies[:created]:
            self._put_instance(project, zone, inst)
        if created < min_count:  # all or nothing: what was created goes again when the operation ends
            self._op_state[key]["bulk"]["rollback"] = True
        if op["status"] == "DONE":  # polls_to_done <= 0 finished it before the instances existed
            self.operations[key].update(status="RUNNING")
            self._finish(key)
        return self._remember(req, project, copy.deepcopy(self.operations[key]))

    def _put_instance(self, project, zone, body) -> None:
        inst = instance_resource(body, project, zone, str(self._rng.getrandbits(63)), self._rng)
        for nic in inst["networkInterfaces"]:
            nic["networkIP"] = str(ipaddress.IPv4Address(self._next_ip))
            self._next_ip += 1
        inst["resourcePolicies"] = [f"{API}{relative(r)}" for r in body.get("resourcePolicies") or []]
        self.instances[(project, zone, body["name"])] = inst

    def _finish(self, key: tuple) -> None:
        st = self._op_state[key]
        bulk = st.get("bulk")
        if bulk is None:
            return super()._finish(key)
        op = self.operations[key]
        project, zone = key[0], key[1]
        op.update(status="DONE", progress=100, endTime=now())
        made = bulk["names"]
        failed = bulk["count"] - len(made)
        if bulk.get("rollback"):
            for n in made:
                self.instances.pop((project, zone, n), None)
            status = {"status": "FAILED", "targetVmCount": bulk["count"], "createdVmCount": 0,
                      "failedToCreateVmCount": bulk["count"], "deletedVmCount": len(made)}
            code, msg = (("VM_MIN_COUNT_NOT_REACHED", f"Requested minimum count of {bulk['min']} VMs could not be created.")
                         if made else ("ZONE_RESOURCE_POOL_EXHAUSTED",
                                       f"The zone 'projects/{project}/zones/{zone}' does not have enough resources available "
                                       f"to fulfill the request.  Try a different zone, or try again later."))
            op.update(error={"errors": [{"code": code, "message": msg}]}, httpErrorStatusCode=503,
                      httpErrorMessage="SERVICE UNAVAILABLE")
        else:
            for n in made:
                inst = self.instances.get((project, zone, n))
                if inst is not None:  # RUNNING with its ephemeral external address, as an inserted VM gets
                    inst.update(status="RUNNING", lastStartTimestamp=now(), cpuPlatform="Intel Sapphire Rapids")
                    for nic in inst["networkInterfaces"]:
                        for ac in nic.get("accessConfigs", []):
                            self._next_nat += 1
                            ac["natIP"] = f"198.51.{100 + self._next_nat // 250 % 100}.{2 + self._next_nat % 250}"
            status = {"status": "CREATED", "targetVmCount": bulk["count"], "createdVmCount": len(made),
                      "failedToCreateVmCount": failed, "deletedVmCount": 0}
        op["instancesBulkInsertOperationMetadata"] = {"perLocationStatus": {f"zones/{zone}": status}}

    # ------------------------------------------------------------------ metadata
    def _instances_setMetadata(self, req, project, zone, instance):
        key = self._lookup(project, zone, instance)
        body = req.body if isinstance(req.body, dict) else {}
        errs = self.discovery.check_body("Metadata", body, "compute.instances.setMetadata")
        if errs:
            raise invalid(errs)
        current = self.instances[key].setdefault("metadata", {"kind": "compute#metadata"})
        fp = current.get("fingerprint") or "c2VlZDA="
        if body.get("fingerprint") != fp:
            raise ApiError(412, "conditionNotMet", "Supplied fingerprint does not match current metadata fingerprint.")
        current.update(items=copy.deepcopy(body.get("items") or []), fingerprint=f"ZnA{self._rng.getrandbits(24):06x}=")
        op = self._new_op(project, zone, "setMetadata", instance, self.instances[key]["id"])
        return copy.deepcopy(op)

    def _instances_setLabels(self, req, project, zone, instance):
        """labels replaced as a whole; the labelFingerprint must be the current one (412 otherwise)."""
        key = self._lookup(project, zone, instance)
        body = req.body if isinstance(req.body, dict) else {}
        errs = self.discovery.check_body("InstancesSetLabelsRequest", body, "compute.instances.setLabels")
        if errs:
            raise invalid(errs)
        inst = self.instances[key]
        if body.get("labelFingerprint") != inst.get("labelFingerprint"):
            raise ApiError(412, "conditionNotMet", "Labels fingerprint either invalid or resource labels have changed")
        inst.update(labels=dict(body.get("labels") or {}), labelFingerprint=f"bGI{self._rng.getrandbits(24):06x}=")
        op = self._new_op(project, zone, "setLabels", instance, inst["id"])
        return copy.deepcopy(op)
