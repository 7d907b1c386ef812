"""Azure Compute Gallery in the ARM emulator: galleries, gallery image definitions and image versions (PUT as a
long-running operation, GET, list, DELETE as an LRO), ``virtualMachines/{vm}/generalize``, and booting a VM from
an image version (``imageReference.id``). Shapes follow the Compute REST reference (api-version 2024-03-03, what
azure-mgmt-compute 39 sends) and the SDK's models.

Validated as ARM does (the texts marked (*) are approximations of the real messages; the codes and statuses are
the documented ones where known):

* gallery names: letters, digits, ``_`` and ``.``; definition names: also ``-``; version names ``N.N.N`` of 32-bit
  integers; a definition needs osType, osState, identifier {publisher, offer, sku} (unique in its gallery);
* a definition or version needs its parent (404 ParentResourceNotFound); a gallery with definitions, or a
  definition with versions, cannot be deleted (409 (*));
* a version's source (``storageProfile.source.virtualMachineId``, or ``id`` naming a VM) must exist, be in the
  version's region, be deallocated (or stopped), and be generalized when the definition is Generalized (a
  generalized VM captured into a Specialized definition is refused too) (*); its Hyper-V generation must be the
  definition's (*);
* ``publishingProfile.targetRegions``: known region names ("East US" or "eastus"), the version's own region among
  them (*);
* ``generalize`` needs the VM deallocated or stopped (409 OperationNotAllowed (*)), after which it never starts;
* a VM booting a version: the version must exist, be Succeeded and have a replica (a target region) in the VM's
  region (404 GalleryImageNotPublished (*)); a Trusted Launch VM needs a definition whose SecurityType feature is
  TrustedLaunch or TrustedLaunchSupported (*).

Not modelled: replication time (a version is Succeeded as soon as its LRO ends: ``polls``), replication status
(``$expand=ReplicationStatus``), storage billing of replicas, image version size other than the source OS disk's,
sharing (RBAC, community/direct galleries), ``excludeFromLatest``/end of life, booting ``.../images/{def}`` (latest
version), data disks, deleting a version while its creation runs (allowed here; the creation then ends Canceled).
"""
from __future__ import annotations

import re

from .arm_catalog import COMP, LOCATIONS, VM_T, now
from .arm_validate import ArmError

GALLERY_T = f"{COMP}/galleries"
DEFINITION_T = f"{COMP}/galleries/images"
VERSION_T = f"{COMP}/galleries/images/versions"
TL_FEATURES = ("trustedlaunch", "trustedlaunchsupported", "trustedlaunchandconfidentialvmsupported")


def _invalid(target, message):
    return ArmError(400, "InvalidParameter", message, target=target)


def _region(name):
    return (name or "").lower().replace(" ", "")


class GalleryRoutes:
    """Routes of ArmRouter for galleries (None: not a gallery request)."""

    def _gallery_route(self, method, rg, ns, rest, q, body, api, mp):
        low = [x.lower() for x in rest]
        if ns.lower() != COMP.lower() or not low:
            return None
        st = self.state
        if low[0] == "virtualmachines" and len(low) == 3 and low[2] == "generalize" and method == "POST":
            st.generalize(rg, rest[1])
            return 200, {}, None
        if low[0] != "galleries":
            return None
        # galleries/G[/images/D[/versions/V]]: even length names one resource, odd length lists its children
        names = rest[1::2]
        kinds = low[0::2]
        if kinds != ["galleries", "images", "versions"][:len(kinds)]:
            return None
        st.group(rg)
        if len(rest) % 2 == 1:
            if method != "GET":
                raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")
            parent = st.gallery_parent(rg, names) if names else None
            kids = st.gallery_children(rg, names, parent)
            return self._page([st.render(r) for r in kids], q, mp[1])
        if method == "GET":
            rec = st.gallery_get(rg, names)
            return 200, {}, st.render(rec)
        if method == "PUT":
            status, rec, op = st.gallery_put(rg, names, body if isinstance(body, dict) else {}, self.polls, mp)
            return status, {"Azure-AsyncOperation": self._op_url(op, api), "Retry-After": "0"}, st.render(rec)
        if method == "DELETE":
            op = st.gallery_delete(rg, names, self.polls)
            if op is None:
                return 204, {}, None
            return 202, {"Location": self._op_url(op, api, location=True), "Retry-After": "0",
                         "Azure-AsyncOperation": self._op_url(op, api)}, None
        return None

    def _gallery_list_all(self, ls, q, path):
        """GET /subscriptions/S/providers/Microsoft.Compute/galleries (None: not that request)."""
        if ls != ["microsoft.compute", "galleries"]:
            return None
        return self._page([self.state.render(r) for r in self.state.of_type(GALLERY_T)], q, path)


class GalleryMixin:
    """The gallery state of arm_state.State (runs under ArmEmulator's lock)."""

    def _gallery_id(self, rg, names):
        rid = f"/subscriptions/{self.sub}/resourceGroups/{rg}/providers/{GALLERY_T}/{names[0]}"
        for kind, name in zip(("images", "versions"), names[1:], strict=False):
            rid += f"/{kind}/{name}"
        return rid

    def gallery_get(self, rg, names, required=True):
        rec = self.by_id(self._gallery_id(rg, names))
        if rec is None and required:
            what = ("Gallery", "Gallery image", "Gallery image version")[len(names) - 1]
            raise ArmError(404, "ResourceNotFound", f"The Resource '{GALLERY_T}/{'/'.join(names)}' under resource "
                           f"group '{rg}' was not found. ({what})")
        return rec

    def gallery_parent(self, rg, names):
        parent = self.gallery_get(rg, names, required=False)
        if parent is None:
            raise ArmError(404, "ParentResourceNotFound", f"Can not perform requested operation on nested resource. "
                           f"Parent resource '{'/'.join(names)}' not found.")
        return parent

    def gallery_children(self, rg, names, parent):
        type_ = (GALLERY_T, DEFINITION_T, VERSION_T)[len(names)]
        if parent is None:
            return self.of_type(type_, rg)
        prefix = parent["id"].lower() + "/"
        return [r for r in self.of_type(type_, rg) if r["id"].lower().startswith(prefix)]

    def gallery_put(self, rg, names, body, polls, mp):
        self.writable_group(rg)
        loc = _region(body.get("location"))
        if not loc:
            raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
        self.check_location(loc, GALLERY_T)
        parent = self.gallery_parent(rg, names[:-1]) if len(names) > 1 else None
        if parent is not None and parent["location"] != loc:
            raise _invalid("location", f"The location '{loc}' must be the location of its parent "
                           f"'{parent['location']}'.")  # (*)
        props = dict(body.get("properties") or {})
        check = (self._check_gallery, self._check_definition, self._check_version)[len(names) - 1]
        type_ = (GALLERY_T, DEFINITION_T, VERSION_T)[len(names) - 1]
        old = self.gallery_get(rg, names, required=False)
        if old is not None and type_ == VERSION_T:
            raise ArmError(409, "OperationNotAllowed", "Updating the source of a gallery image version is not "
                           "allowed.")  # (*) trainvm never updates a version
        props = check(rg, names, props, parent, loc)
        rid = self._gallery_id(rg, names)
        rec = {"type": type_, "id": rid, "rg": rg.lower(), "name": names[-1], "state": "Creating",
               "body": {"location": loc, "tags": dict(body.get("tags") or {}), "properties": props},
               "location": loc, "created": now(), "extra": {}, "guid": rid}
        self.res[rid.lower()] = rec
        op = self.new_op(COMP, loc, polls, self._finisher(rec), bool(self.take_fault("lro", *mp)))
        return (200 if old else 201), rec, op

    def _check_gallery(self, rg, names, props, parent, loc):
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.]{0,78}[A-Za-z0-9]", names[0]):
            raise _invalid("galleryName", f"The gallery name '{names[0]}' is invalid: use letters, digits, "
                           "underscores and periods, beginning and ending with a letter or digit (at most 80).")  # (*)
        props["identifier"] = {"uniqueName": f"{self.sub}-{names[0].upper()}"}
        return props

    def _check_definition(self, rg, names, props, parent, loc):
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,78}[A-Za-z0-9]", names[1]):
            raise _invalid("galleryImageName", f"The gallery image name '{names[1]}' is invalid.")  # (*)
        for field in ("osType", "osState", "identifier"):
            if not props.get(field):
                raise ArmError(400, "InvalidParameter", f"Required parameter '{field}' is missing (null).",
                               target=field)
        if props["osState"] not in ("Generalized", "Specialized") or props["osType"] not in ("Linux", "Windows"):
            raise _invalid("osState", f"osType {props['osType']!r} / osState {props['osState']!r} are not valid.")
        ident = props["identifier"]
        if not all(ident.get(k) for k in ("publisher", "offer", "sku")):
            raise _invalid("identifier", "The identifier needs a publisher, an offer and a sku.")
        key = tuple(ident[k].lower() for k in ("publisher", "offer", "sku"))
        for other in self.gallery_children(rg, names[:1], parent):
            o = other["body"]["properties"]["identifier"]
            if other["name"].lower() != names[1].lower() and tuple(o[k].lower() for k in ("publisher", "offer", "sku")) == key:
                raise ArmError(409, "Conflict", f"Gallery image {other['name']} already has the identifier "
                               f"{'/'.join(key)}; the (publisher, offer, sku) of a gallery must be unique.")  # (*)
        props.setdefault("hyperVGeneration", "V1")
        return props

    def _check_version(self, rg, names, props, definition, loc):
        if not re.fullmatch(r"\d+\.\d+\.\d+", names[2]) or any(int(x) > 2**31 - 1 for x in names[2].split(".")):
            raise _invalid("galleryImageVersionName", f"The gallery image version name '{names[2]}' is invalid: it "
                           "must be Major.Minor.Patch, each a 32-bit integer.")  # (*)
        pub = props.get("publishingProfile") or {}
        targets = pub.get("targetRegions") or [{"name": loc}]
        for t in targets:
            if _region(t.get("name")) not in LOCATIONS:
                raise _invalid("publishingProfile.targetRegions", f"The region '{t.get('name')}' is not a valid "
                               "Azure region.")  # (*)
        if loc not in {_region(t.get("name")) for t in targets}:
            raise _invalid("publishingProfile.targetRegions", f"The target regions must include the location of "
                           f"the gallery image version '{loc}'.")  # (*)
        source = (props.get("storageProfile") or {}).get("source") or {}
        sid = source.get("virtualMachineId") or source.get("id")
        if not sid:
            raise ArmError(400, "InvalidParameter", "Required parameter 'storageProfile.source' is missing (null).",
                           target="storageProfile.source")
        vm = self.by_id(sid)
        if vm is None or vm["type"] != VM_T:
            raise ArmError(404, "NotFound", f"The source virtual machine '{sid}' was not found.", target="source")  # (*)
        if vm["location"] != loc:
            raise _invalid("storageProfile.source", f"The source virtual machine is in '{vm['location']}', the gallery "
                           f"image version in '{loc}': they must be in the same region.")  # (*)
        if vm["extra"].get("power") not in ("deallocated", "stopped"):
            raise ArmError(409, "OperationNotAllowed", f"The source virtual machine '{vm['name']}' must be stopped "
                           "(deallocated) to capture it.")  # (*)
        dprops = definition["body"]["properties"]
        generalized = bool(vm["extra"].get("generalized"))
        if (dprops["osState"] == "Generalized") != generalized:
            raise _invalid("storageProfile.source", f"The source virtual machine '{vm['name']}' is "
                           f"{'generalized' if generalized else 'not generalized'} and cannot be captured into the "
                           f"{dprops['osState']} gallery image '{definition['name']}'.")  # (*)
        if (vm["extra"].get("image_gen") or "V2") != dprops.get("hyperVGeneration"):
            raise _invalid("hyperVGeneration", f"The source is a Hyper-V generation {vm['extra'].get('image_gen')} "
                           f"VM; the gallery image is {dprops.get('hyperVGeneration')}.")  # (*)
        disk = self.by_id(vm["extra"].get("disk") or "")
        size = ((disk or {}).get("body") or {}).get("properties", {}).get("diskSizeGB") or 30
        pub = {**pub, "targetRegions": [{"regionalReplicaCount": 1, "storageAccountType": "Standard_LRS", **t,
                                         "name": t["name"]} for t in targets], "publishedDate": now()}
        return {**props, "publishingProfile": pub, "storageProfile": {
            "source": {"virtualMachineId": vm["id"]}, "osDiskImage": {"sizeInGB": size, "hostCaching": "ReadWrite"}}}

    def gallery_delete(self, rg, names, polls):
        self.group(rg)
        rec = self.gallery_get(rg, names, required=False)
        if rec is None:
            return None
        if len(names) < 3 and self.gallery_children(rg, names, rec):
            raise ArmError(409, "CannotDeleteResource", "Can not delete resource before nested resources are "
                           "deleted.")  # (*)
        rec["state"] = "Deleting"
        return self.new_op(COMP, rec["location"], polls, lambda fail: self.res.pop(rec["id"].lower(), None))

    # ------------------------------------------------------------------ VMs
    def generalize(self, rg, name):
        rec = self.vm(rg, name)
        if rec["extra"].get("power") not in ("deallocated", "stopped"):
            raise ArmError(409, "OperationNotAllowed", f"Operation 'generalize' is not allowed on VM '{name}' since "
                           "the VM is running. Deallocate the VM first.")  # (*)
        rec["extra"]["generalized"] = True

    def gallery_image_for(self, image_id, loc, security_type=""):
        """(Hyper-V generation, id) of the image version a VM in ``loc`` boots."""
        rec = self.by_id(image_id)
        if rec is None or rec["type"] != VERSION_T or rec["state"] != "Succeeded":
            raise ArmError(404, "GalleryImageNotFound", f"The gallery image {image_id} is not available.",
                           target="imageReference")  # (*)
        regions = {_region(t.get("name")) for t in rec["body"]["properties"]["publishingProfile"]["targetRegions"]}
        if loc not in regions:
            raise ArmError(404, "GalleryImageNotPublished", f"The gallery image {image_id} is not available in {loc} "
                           "region. Please contact image owner to replicate to this region, or change your "
                           "requested region.", target="imageReference")  # (*)
        definition = self.by_id(rec["id"].rsplit("/versions/", 1)[0])
        dprops = definition["body"]["properties"]
        features = {f["name"].lower(): f["value"].lower() for f in dprops.get("features") or []}
        if security_type.lower() == "trustedlaunch" and features.get("securitytype") not in TL_FEATURES:
            raise _invalid("securityProfile.securityType", f"The gallery image {definition['name']} does not support "
                           "Trusted Launch: its SecurityType feature is not TrustedLaunch or "
                           "TrustedLaunchSupported.")  # (*)
        return dprops.get("hyperVGeneration", "V1"), rec["id"]
