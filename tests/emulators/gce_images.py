"""Private images for the GCE emulator (tests/emulators/gce.py): compute.images.insert from a disk, images.get,
images.list (with the list filter, e.g. ``labels.trainvm-stack = "..."``), images.getFromFamily (the newest READY,
non-deprecated image of the family) and images.delete, with the field names of Compute's discovery document
(``sourceDisk``, ``family``, ``labels``, ``diskSizeGb``, ``archiveSizeBytes``, ``storageLocations``,
``sourceDiskId``, ``status``). Inserts and deletes answer global operations.

What GCE does and this models: a disk attached to a RUNNING instance cannot be imaged without ``forceCreate``
(400 resourceInUseByAnotherResource); a missing source disk is 404; an image name that exists is 409. Not modelled:
disks as their own resources (a disk exists while the instance it belongs to exists, as trainvm's boot disks with
autoDelete do), image storage billing, deprecation states, storage location choice (the disk's region's multi-region
is recorded when none is asked), image creation time (the operation finishes on the next poll).
"""
from __future__ import annotations

import copy
import re

from .gce_filter import compile_filter
from .gce_resources import API, image_resource, now, operation_resource
from .gce_validate import ApiError, invalid, relative

_NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
_MULTI = {"us": "us", "europe": "eu", "asia": "asia"}


class ImagesMixin:
    """images.insert/get/list/getFromFamily/delete for images made in the emulator (``self.baked``)."""

    def _disk_owner(self, project: str, disk_path: str) -> tuple[dict, dict] | None:
        """(instance, attached disk) whose disk is ``projects/P/zones/Z/disks/D``, or None."""
        for (p, _z, _n), inst in self.instances.items():
            if p != project:
                continue
            for d in inst.get("disks") or []:
                if relative(d["source"]) == disk_path:
                    return inst, d
        return None

    def _image_op(self, req, project: str, op_type: str, name: str, target_id: str, image: dict | None) -> dict:
        op = operation_resource(project, "global", op_type, name, target_id, self.initial_op_status, self._rng)
        del op["zone"]
        op.update(targetLink=f"{API}projects/{project}/global/images/{name}",
                  selfLink=f"{API}projects/{project}/global/operations/{op['name']}")
        key = (project, None, op["name"])
        self.operations[key] = op
        self._op_state[key] = {"polls": 0, "fault": None, "target": (project, None, name), "collection": "images",
                               "image": image}
        if self.polls_to_done <= 0:
            self._finish(key)
        return copy.deepcopy(op)

    def _finish_image(self, key: tuple) -> None:
        st, op = self._op_state[key], self.operations[key]
        op.update(status="DONE", progress=100, endTime=now())
        project, _, name = st["target"]
        if op["operationType"] == "insert":
            self.baked[(project, name)]["status"] = "READY"
        elif op["operationType"] == "delete":
            self.baked.pop((project, name), None)

    def _images_insert(self, req, project):
        body = req.body
        if not isinstance(body, dict):
            raise invalid("Invalid value for field 'resource': ''. The request body must be an Image object.")
        errs = self.discovery.check_body("Image", body, "compute.images.insert")
        if errs:
            raise invalid(errs)
        name = body.get("name", "")
        if not _NAME.fullmatch(name):
            raise invalid(f"Invalid value for field 'resource.name': '{name}'. Must be a match of regex "
                          "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'")
        family = body.get("family")
        if family is not None and not _NAME.fullmatch(family):
            raise invalid(f"Invalid value for field 'resource.family': '{family}'. Must be a match of regex "
                          "'[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'")
        for k, v in (body.get("labels") or {}).items():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", k) or not re.fullmatch(r"[a-z0-9_-]{0,63}", str(v)):
                raise invalid(f"Invalid value for field 'resource.labels': '{k}={v}'. Label keys and values may contain "
                              "only lowercase letters, numeric characters, underscores and dashes (at most 63 characters).")
        src = body.get("sourceDisk")
        if not src:
            raise invalid("Required field 'sourceDisk' (or another source) not specified")
        disk_path = relative(src)
        owner = self._disk_owner(project, disk_path)
        if owner is None:
            raise ApiError(404, "notFound", f"The resource '{disk_path}' was not found")
        inst, disk = owner
        if inst["status"] not in ("TERMINATED", "STOPPED") and req.query.get("forceCreate") != "true":
            raise ApiError(400, "resourceInUseByAnotherResource",
                           f"The disk resource '{disk_path}' is already being used by '{relative(inst['selfLink'])}'")
        if (project, name) in self.baked or any(p == project and n == name for (p, _f), n in self.images.items()):
            raise ApiError(409, "alreadyExists", f"The resource 'projects/{project}/global/images/{name}' already exists")
        zone = disk_path.split("/")[3]
        image = image_resource(project, name, family or "")
        if family is None:
            del image["family"]
        image.update(status="PENDING", creationTimestamp=now(), sourceType="RAW", sourceDisk=f"{API}{disk_path}",
                     sourceDiskId=str(inst["id"]), diskSizeGb=str(disk.get("diskSizeGb", "10")),
                     archiveSizeBytes=str(int(disk.get("diskSizeGb", "10")) * 2**30 // 4),
                     storageLocations=body.get("storageLocations") or [_MULTI.get(zone.split("-")[0], zone.rsplit("-", 2)[0])],
                     labels=dict(body.get("labels") or {}), labelFingerprint="bGFiZWxz")
        if body.get("description"):
            image["description"] = body["description"]
        self.baked[(project, name)] = image
        return self._image_op(req, project, "insert", name, image["id"], image)

    def _images_get(self, req, project, image):
        if (project, image) in self.baked:
            return copy.deepcopy(self.baked[(project, image)])
        return super()._images_get(req, project, image)

    def _images_getFromFamily(self, req, project, family):
        mine = [i for (p, _), i in self.baked.items() if p == project and i.get("family") == family and i["status"] == "READY"]
        if mine:
            return copy.deepcopy(max(mine, key=lambda i: (i["creationTimestamp"], i["name"])))
        return super()._images_getFromFamily(req, project, family)

    def _images_list(self, req, project):
        try:
            pred = compile_filter(req.query.get("filter"))
        except (ValueError, re.error) as e:
            raise invalid(f"Invalid value for field 'filter': '{req.query.get('filter')}'. Invalid list filter expression ({e}).")
        items = [copy.deepcopy(i) for (p, _), i in sorted(self.baked.items()) if p == project and pred(i)]
        page, nxt = self._page(req, items)
        out = {"kind": "compute#imageList", "id": f"projects/{project}/global/images",
               "selfLink": f"{API}projects/{project}/global/images"}
        return {**out, **({"items": page} if page else {}), **({"nextPageToken": nxt} if nxt else {})}

    def _images_delete(self, req, project, image):
        if (project, image) not in self.baked:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/global/images/{image}' was not found")
        self.baked[(project, image)]["status"] = "DELETING"
        return self._image_op(req, project, "delete", image, self.baked[(project, image)]["id"], None)
