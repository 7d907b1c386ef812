"""State behind the ARM emulator (tests/emulators/arm.py): the resource store, resource groups, references
between resources, deletes, image versions and lists. PUT handling is in arm_put.py, GET rendering in
arm_render.py, VM actions in arm_vm_actions.py, long-running operations in arm_lro.py, fault injection and
error texts in arm_faults.py, resource types/regions/images in arm_catalog.py.

Error codes marked (*) below are the ones seen in real Azure output (public issue reports or the
knowledge file); the others are approximations with the right HTTP status.
"""
from __future__ import annotations

import copy
import itertools
import re
import uuid

from . import arm_checks as C
from . import arm_schemas as S
from . import arm_validate as V
from .arm_catalog import DISK_T, IMAGES, LOCATIONS, NIC_T, NSG_T, PIP_T, VM_T, VNET_T, now, parse_id, under
from .arm_faults import rg_not_found
from .arm_gallery import GalleryMixin
from .arm_lro import LroMixin
from .arm_permissions import PermissionsMixin
from .arm_put import PutMixin
from .arm_render import RenderMixin
from .arm_roles import RolesMixin
from .arm_storage import StorageMixin
from .arm_validate import ArmError
from .arm_vm_actions import VmActionsMixin
from .arm_vmss import VmssMixin


class State(LroMixin, PutMixin, RenderMixin, VmActionsMixin, RolesMixin, VmssMixin, StorageMixin, PermissionsMixin,
            GalleryMixin):
    """Everything the emulator knows. All methods run under ArmEmulator's lock."""

    def __init__(self, sub):
        self.sub = sub
        self.groups, self.res, self.ops, self.faults = {}, {}, {}, []
        self.run_output, self.serial_logs, self.run_commands = {}, {}, []
        self._ip = itertools.count(10)
        self.images = copy.deepcopy(IMAGES)
        self.principals, self.role_assignments = {}, {}
        self.accounts, self.taken_storage_names, self.storage_keys = {}, set(), {}  # arm_storage.py

    # ------------------------------------------------------------------ inspection (also exposed by ArmEmulator)
    def resources_in(self, rg):
        """Ids of every resource that still exists in resource group `rg` (sorted)."""
        return sorted(r["id"] for r in self.res.values() if r["rg"] == rg.lower())

    def resource_groups(self):
        return sorted(g["name"] for g in self.groups.values())

    # ------------------------------------------------------------------ ids and lookups
    def rid(self, rg, type_, name):
        return f"/subscriptions/{self.sub}/resourceGroups/{rg}/providers/{type_}/{name}"

    def group(self, rg, required=True):
        g = self.groups.get(rg.lower())
        if g is None and required:
            raise rg_not_found(rg)
        return g

    def get(self, rg, type_, name):
        return self.res.get(self.rid(rg, type_, name).lower())

    def by_id(self, rid):
        return self.res.get((rid or "").lower())

    def of_type(self, type_, rg=None):
        return [r for r in self.res.values() if r["type"] == type_ and (rg is None or r["rg"] == rg.lower())]

    def take_fault(self, stage, method, path, vm=None):
        for f in self.faults:
            if f.matches(stage, method, path, vm):
                if f.times is not None:
                    f.times -= 1
                    if f.times <= 0:
                        self.faults.remove(f)
                return f
        return None

    # ------------------------------------------------------------------ resource groups
    def put_group(self, rg, body):
        C.check_name("resourcegroups", rg)
        body = V.validate(S.RESOURCE_GROUP, body)
        loc = (body.get("location") or "").lower().replace(" ", "")
        if not loc:
            raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
        self.check_location(loc)
        C.check_tags(body.get("tags"))
        g = self.groups.get(rg.lower())
        if g and g["location"] != loc:
            raise ArmError(409, "InvalidResourceGroupLocation", f"Invalid resource group location '{loc}'. The "
                           f"Resource group already exists in location '{g['location']}'.")  # (*)
        if g and g["state"] == "Deleting":
            raise ArmError(409, "ResourceGroupBeingDeleted", f"The resource group '{rg}' is in deprovisioning "
                           "state and cannot perform this operation.")
        created = g is None
        g = g or {"name": rg, "location": loc, "state": "Succeeded"}
        g["tags"] = body.get("tags") or {}
        self.groups[rg.lower()] = g
        return created, self.render_group(g)

    def render_group(self, g):
        return {"id": f"/subscriptions/{self.sub}/resourceGroups/{g['name']}", "name": g["name"],
                "type": "Microsoft.Resources/resourceGroups", "location": g["location"], "tags": g["tags"],
                "properties": {"provisioningState": g["state"]}}

    def delete_group_now(self, rg):
        for key in [k for k, r in self.res.items() if r["rg"] == rg.lower()]:
            if self.res[key]["type"] == VM_T:
                self.drop_identity(self.res[key])
            del self.res[key]
        self.drop_role_assignments(self.groups.get(rg.lower(), {}).get("name", rg))
        self.drop_accounts(rg)
        self.drop_identities(rg)  # arm_permissions.py
        self.groups.pop(rg.lower(), None)

    def check_location(self, loc, type_=None):
        if loc not in LOCATIONS:
            if type_ is None:
                raise ArmError(400, "LocationNotAvailableForResourceGroup", f"The provided location '{loc}' is not "
                               f"available for resource group. List of available regions is "
                               f"'{','.join(sorted(LOCATIONS))}'.")  # (*)
            raise ArmError(400, "LocationNotAvailableForResourceType", f"The provided location '{loc}' is not "
                           f"available for resource type '{type_}'. List of available regions for the resource "
                           f"type is '{','.join(sorted(LOCATIONS))}'.")

    # ------------------------------------------------------------------ generic resources
    def writable_group(self, rg):
        g = self.group(rg)
        if g["state"] == "Deleting":
            raise ArmError(409, "ResourceGroupBeingDeleted", f"The resource group '{rg}' is in deprovisioning "
                           "state and cannot perform this operation.")

    def new_record(self, rg, type_, name, body):
        rid = self.rid(rg, type_, name)
        return {"type": type_, "id": rid, "rg": rg.lower(), "name": name, "body": body, "state": "Creating",
                "location": body.get("location", "").lower(), "created": now(), "extra": {},
                "guid": str(uuid.uuid4())}

    def refs_to(self, rid):
        """(referencing resource id, via) for every live reference to `rid`."""
        out, rid = [], rid.lower()
        for r in self.res.values():
            p = r["body"].get("properties") or {}
            if r["type"] == NIC_T:
                if (p.get("networkSecurityGroup") or {}).get("id", "").lower() == rid:
                    out.append((r["id"], "nsg"))
                for ipc in p.get("ipConfigurations") or []:
                    ip = ipc.get("properties") or {}
                    for key in ("subnet", "publicIPAddress"):
                        target = (ip.get(key) or {}).get("id", "").lower()
                        if target == rid or (key == "subnet" and target.startswith(rid + "/subnets/")):
                            out.append((f"{r['id']}/ipConfigurations/{ipc['name']}", key))
            elif r["type"] == VNET_T:
                for sn in p.get("subnets") or []:
                    if ((sn.get("properties") or {}).get("networkSecurityGroup") or {}).get("id", "").lower() == rid:
                        out.append((f"{r['id']}/subnets/{sn['name']}", "nsg"))
            elif r["type"] == VM_T:
                attached = [i for i, _ in r["extra"].get("nics", [])] + [r["extra"].get("disk") or ""]
                if rid in (i.lower() for i in attached):
                    out.append((r["id"], "vm"))
        return out

    def check_ref(self, ref_id, owner_id, location, type_):
        parsed = parse_id(ref_id)
        target = self.by_id(ref_id.rsplit("/subnets/", 1)[0] if parsed and parsed[3] else ref_id)
        ok = parsed and parsed[1] == type_ and target is not None and target["location"] == location
        if ok and parsed[3]:
            ok = any(s.get("name", "").lower() == parsed[3].lower()
                     for s in target["body"].get("properties", {}).get("subnets") or [])
        if not ok:
            raise ArmError(400, "InvalidResourceReference", f"Resource {ref_id} referenced by resource {owner_id} "
                           "was not found. Please make sure that the referenced resource exists, and that both "
                           "resources are in the same region.")  # (*)
        return target

    def delete_check(self, rec):
        refs = [(i, via) for i, via in self.refs_to(rec["id"]) if not under(i, rec["id"])]
        if not refs:
            return
        users = ", ".join(i for i, _ in refs)
        if rec["type"] == NIC_T:
            raise ArmError(400, "NicInUse", f"Network Interface {rec['id']} is used by existing resource {users}. "
                           "In order to delete the network interface, it must be dissociated from the resource. "
                           "To learn more, see aka.ms/deletenic.")  # (*)
        if rec["type"] == PIP_T:
            raise ArmError(400, "PublicIPAddressCannotBeDeleted", f"Public IP address {rec['id']} can not be "
                           f"deleted since it is still allocated to resource {users}. In order to delete the public "
                           "IP, disassociate/detach the Public IP address from the resource.")
        if rec["type"] == NSG_T:
            raise ArmError(400, "InUseNetworkSecurityGroupCannotBeDeleted", f"Network security group {rec['id']} "
                           f"cannot be deleted because it is in use by the following resources: {users}.")
        if rec["type"] == VNET_T:
            raise ArmError(400, "InUseSubnetCannotBeDeleted", f"Subnet of {rec['id']} is in use by {users} and "
                           "cannot be deleted. In order to delete the subnet, delete all the resources within the "
                           "subnet.")
        if rec["type"] == DISK_T:
            raise ArmError(409, "OperationNotAllowed", f"Disk {rec['name']} is attached to VM {users}.")

    def remove(self, rec):
        """Delete a resource and what Azure deletes with it (VM: disks/NICs/IPs with deleteOption Delete)."""
        self.res.pop(rec["id"].lower(), None)
        extra = rec["extra"]
        if rec["type"] != VM_T:
            return
        self.drop_identity(rec)
        if extra.get("disk") and extra.get("disk_delete"):
            self.res.pop(extra["disk"].lower(), None)
        for rid, delete in extra.get("nics", []) + extra.get("pips", []):
            if delete:
                self.res.pop(rid.lower(), None)

    def next_public_ip(self):
        return f"198.51.100.{next(self._ip) % 250 + 1}"

    # ------------------------------------------------------------------ DELETE
    def delete(self, type_, rg, name, polls, method_path):
        self.group(rg)
        rec = self.get(rg, type_, name)
        if rec is None:
            return None
        self.delete_check(rec)
        rec["state"] = "Deleting"
        never = bool(self.take_fault("lro", *method_path))
        return self.new_op(type_.split("/")[0], rec["location"], polls, lambda fail: self.remove(rec), never)

    def delete_group(self, rg, polls, method_path):
        g = self.group(rg)
        g["state"] = "Deleting"
        never = bool(self.take_fault("lro", *method_path))
        return self.new_op("Microsoft.Resources", g["location"], polls, lambda fail: self.delete_group_now(rg), never)

    # ------------------------------------------------------------------ images and lists
    def image_versions(self, loc, pub, offer, sku, version=None):
        if loc.lower() not in LOCATIONS:
            raise ArmError(404, "NoRegisteredProviderFound", f"No registered resource provider found for location "
                           f"'{loc}'.")
        key = next((k for k in self.images if [x.lower() for x in k] == [pub.lower(), offer.lower(), sku.lower()]),
                   None)
        if key is None or (version and version not in self.images[key][1]):
            raise ArmError(404, "NotFound", "Artifact: VMImage was not found.")  # (*)
        base = (f"/Subscriptions/{self.sub}/Providers/Microsoft.Compute/Locations/{loc.lower()}/Publishers/{key[0]}/"
                f"ArtifactTypes/VMImage/Offers/{key[1]}/Skus/{key[2]}/Versions")
        if version is None:
            return [{"location": loc.lower(), "name": v, "id": f"{base}/{v}"} for v in self.images[key][1]]
        return {"location": loc.lower(), "name": version, "id": f"{base}/{version}", "properties": {
            "hyperVGeneration": self.images[key][0], "architecture": "x64", "dataDiskImages": [],
            "osDiskImage": {"operatingSystem": "Linux", "sizeInGb": 30},
            "automaticOSUpgradeProperties": {"automaticOSUpgradeSupported": False},
            "imageDeprecationStatus": {"imageState": "Active"}}}

    def list_resources(self, rg=None, type_=None, location=None, flt=None):
        crit = parse_filter(flt)
        out = []
        for r in self.res.values():
            if (rg and r["rg"] != rg.lower()) or (type_ and r["type"] != type_) or \
                    (location and r["location"] != location.lower()):
                continue
            if "resourcetype" in crit and r["type"].lower() != crit["resourcetype"].lower():
                continue
            if "name" in crit and r["name"].lower() != crit["name"].lower():
                continue
            if "location" in crit and r["location"] != crit["location"].lower():
                continue
            if not tag_match(r["body"].get("tags"), crit):
                continue
            out.append(r)
        return out

    def list_groups(self, flt=None):
        crit = parse_filter(flt)
        return [self.render_group(g) for g in self.groups.values() if tag_match(g["tags"], crit)]


def parse_filter(flt):
    if not flt:
        return {}
    crit = {}
    for clause in re.split(r"\s+and\s+", flt.strip(), flags=re.I):
        m = re.fullmatch(r"(\w+)\s+eq\s+'([^']*)'", clause.strip(), re.I)
        if not m or m[1].lower() not in ("tagname", "tagvalue", "resourcetype", "name", "location"):
            raise ArmError(400, "InvalidFilterInQueryString", f"The filter '{flt}' is not supported. Supported: "
                           "tagName eq 'n' [and tagValue eq 'v'], resourceType eq 't', name eq 'n', location eq 'l'.")
        crit[m[1].lower()] = m[2]
    if "tagvalue" in crit and "tagname" not in crit:
        raise ArmError(400, "InvalidFilterInQueryString", "tagValue can only be used together with tagName.")
    return crit


def tag_match(tags, crit):
    if "tagname" not in crit:
        return True
    tags = {k.lower(): v for k, v in (tags or {}).items()}
    name = crit["tagname"].lower()
    return name in tags and ("tagvalue" not in crit or tags[name] == crit["tagvalue"])
