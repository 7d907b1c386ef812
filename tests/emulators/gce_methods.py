"""The Compute methods the emulator (tests/emulators/gce.py) serves: zoneOperations get/wait, instances
insert/get/delete/list/aggregatedList/getSerialPortOutput/getGuestAttributes, images get/getFromFamily.
Mixed into GceEmulator; each handler runs under the emulator's lock."""
from __future__ import annotations

import copy
import re
import uuid
import zlib

from .gce_faults import OP_FAULTS, op_error
from .gce_filter import compile_filter
from .gce_resources import (
    API,
    image_known,
    image_resource,
    instance_resource,
    now,
    operation_resource,
    paginate,
    scoped_items,
)
from .gce_validate import ApiError, check_instance, invalid, relative


class ComputeMethodsMixin:
    """Operations, instances and images handlers; mixed into GceEmulator."""

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
        if self.on_poll is not None and self.operations[key]["status"] != "DONE":
            self.on_poll(self, key)
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
        elif op["operationType"] in ("stop", "start"):
            self._finish_power(op["operationType"], target)
        elif op["operationType"] == "delete":
            self.instances.pop(target, None)
            self._guest.pop(target, None)
            for k in [k for k in self._serial if k[:3] == target]:
                del self._serial[k]
            # GCE's operations run with time, not with polls: once the instance is deleted, the operation that
            # inserted it has long finished (a requestId replay must answer DONE, not a still-running insert)
            for k, other in self.operations.items():
                if self._op_state[k]["target"] == target and other["status"] != "DONE" and other["operationType"] == "insert":
                    other.update(status="DONE", progress=100, endTime=now())

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
        accels = body.get("guestAccelerators") or [{}]
        gpu = str(accels[0].get("acceleratorType", "")).rsplit("/", 1)[-1] or None
        fault = self._take_fault(OP_FAULTS, "compute.instances.insert", zone, gpu)
        inst_id = str(self._rng.getrandbits(63))
        if fault is None or fault.kind == "op_never_done":
            self.instances[key] = instance_resource(body, project, zone, inst_id, self._rng)
        return self._remember(req, project, self._new_op(project, zone, "insert", body["name"], inst_id, fault))

    def _check_image(self, body: dict) -> None:
        for d in body.get("disks") or []:
            src = (d.get("initializeParams") or {}).get("sourceImage")
            baked = relative(src).split("/") if src else []  # projects/P/global/images/NAME made by images.insert
            if len(baked) == 5 and (baked[1], baked[4]) in getattr(self, "baked", {}) \
                    and self.baked[(baked[1], baked[4])]["status"] == "READY":
                continue
            if src and not image_known(relative(src), self.images):
                raise ApiError(404, "notFound", f"The resource '{relative(src)}' was not found")

    def _instances_get(self, req, project, zone, instance):
        key = self._lookup(project, zone, instance)
        if self.power_ends_after_reads:
            # GCE's operations run with time, not with polls: a stop/start nobody waits for (`stop --no-wait`)
            # still ends, here after that many reads of its instance (one held with set_status has no operation)
            for k, op in list(self.operations.items()):
                st = self._op_state[k]
                if op["status"] != "DONE" and op["operationType"] in ("stop", "start") and st["target"] == key:
                    st["reads"] = st.get("reads", 0) + 1
                    if st["reads"] >= self.power_ends_after_reads:
                        self._finish(k)
        return copy.deepcopy(self.instances[key])

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
        if self._take_fault({"unreachable"}, "compute.instances.list", zone):
            raise ApiError(503, "backendError", f"Zone 'zones/{zone}' is unreachable.")
        page, nxt = self._page(req, self._filtered(req, project, zone))
        out = {"kind": "compute#instanceList", "id": f"projects/{project}/zones/{zone}/instances",
               "selfLink": f"{API}projects/{project}/zones/{zone}/instances"}
        return {**out, **({"items": page} if page else {}), **({"nextPageToken": nxt} if nxt else {})}

    def _zones_list(self, req, project):
        """compute.zones.list: the zones this emulator knows (all UP; an outage is an "unreachable" fault)."""
        items = [{"kind": "compute#zone", "name": z, "status": "UP", "selfLink": f"{API}projects/{project}/zones/{z}",
                  "region": f"{API}projects/{project}/regions/{z.rsplit('-', 1)[0]}"} for z in self.known_zones]
        return {"kind": "compute#zoneList", "id": f"projects/{project}/zones", "items": items,
                "selfLink": f"{API}projects/{project}/zones"}

    def _projects_get(self, req, project):
        """compute.projects.get: the project, with the default compute service account GCE creates for it (its
        email is ``PROJECT_NUMBER-compute@developer.gserviceaccount.com``); none when the test removed it."""
        number = str(zlib.crc32(project.encode()) % 10**12 or 1)
        out = {"kind": "compute#project", "id": number, "name": project, "selfLink": f"{API}projects/{project}",
               "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS"}
        quotas = self._quota_items(None)
        if quotas:
            out["quotas"] = quotas
        if project not in self.no_default_sa:
            out["defaultServiceAccount"] = f"{number}-compute@developer.gserviceaccount.com"
        return out

    def _instances_aggregatedList(self, req, project):
        page, nxt = self._page(req, self._filtered(req, project))
        # returnPartialSuccess exists only where the discovery document lists it (compute v1 rev 20261106 and
        # google-cloud-compute 1.57 have no such parameter on instances.aggregatedList): without it, one
        # unreachable zone fails the whole call
        partial = self.partial_success and req.query.get("returnPartialSuccess") == "true"
        unreachable = [z for z in self.known_zones if self._take_fault({"unreachable"}, "compute.instances.aggregatedList", z)]
        if unreachable and not partial:
            raise ApiError(503, "backendError", f"Zone 'zones/{unreachable[0]}' is unreachable.")
        items = scoped_items(self.known_zones, page, unreachable)
        out = {"kind": "compute#instanceAggregatedList", "id": f"projects/{project}/aggregated/instances",
               "items": items, "selfLink": f"{API}projects/{project}/aggregated/instances"}
        if unreachable:
            out["unreachables"] = [f"zones/{z}" for z in unreachable]
        return {**out, **({"nextPageToken": nxt} if nxt else {})}

    def _instances_getSerialPortOutput(self, req, project, zone, instance):
        key = self._lookup(project, zone, instance)
        port, start = int(req.query.get("port", 1)), int(req.query.get("start", 0))
        if port == 1 and self._serial_play.get(instance):
            self.append_serial(instance, self._serial_play[instance].pop(0), port, zone, project)
        buf = self._serial.get((*key, port), {"data": b"", "offset": 0})
        end = buf["offset"] + len(buf["data"])
        start = max(buf["offset"], end + start if start < 0 else min(start, end))
        return {"kind": "compute#serialPortOutput", "contents": buf["data"][start - buf["offset"]:].decode(errors="replace"),
                "start": str(start), "next": str(end),
                "selfLink": f"{API}projects/{project}/zones/{zone}/instances/{instance}/serialPort?port={port}"}

    def _instances_getGuestAttributes(self, req, project, zone, instance):
        key = self._lookup(project, zone, instance)
        if self._guest_play.get(instance):
            self.set_guest_attributes(instance, self._guest_play[instance].pop(0), self._guest_play_ns, zone, project)
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
