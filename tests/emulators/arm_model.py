"""State and behaviour behind the ARM emulator (tests/emulators/arm.py): resources, references,
long-running operations, fault injection and the error texts Azure uses.

Error codes marked (*) below are the ones seen in real Azure output (public issue reports or the
knowledge file); the others are approximations with the right HTTP status.
"""
from __future__ import annotations

import copy
import datetime
import ipaddress
import itertools
import re
import uuid

from . import arm_validate as V
from .arm_validate import ArmError

NET, COMP = "Microsoft.Network", "Microsoft.Compute"
TYPES = {t.split("/")[1].lower(): t for t in (
    f"{NET}/virtualNetworks", f"{NET}/networkSecurityGroups", f"{NET}/publicIPAddresses",
    f"{NET}/networkInterfaces", f"{COMP}/virtualMachines", f"{COMP}/disks")}
VM_T, NIC_T, PIP_T, NSG_T, VNET_T, DISK_T = (TYPES[k] for k in (
    "virtualmachines", "networkinterfaces", "publicipaddresses", "networksecuritygroups", "virtualnetworks",
    "disks"))

LOCATIONS = set("""eastus eastus2 westus westus2 westus3 centralus northcentralus southcentralus westcentralus
canadacentral canadaeast brazilsouth northeurope westeurope uksouth ukwest francecentral germanywestcentral
swedencentral switzerlandnorth norwayeast polandcentral italynorth spaincentral eastasia southeastasia japaneast
japanwest koreacentral australiaeast australiasoutheast centralindia southindia uaenorth southafricanorth
qatarcentral israelcentral mexicocentral newzealandnorth""".split())

# (publisher, offer, sku) -> (hyperVGeneration, versions, os version)
IMAGES = {
    ("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"):
        ("V2", ["22.04.202609230", "22.04.202610010", "22.04.202610150"], "22.04"),
    ("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts"):
        ("V1", ["22.04.202609230", "22.04.202610010", "22.04.202610150"], "22.04"),
    ("Canonical", "ubuntu-24_04-lts", "server"):
        ("V2", ["24.04.202609230", "24.04.202610010", "24.04.202610150"], "24.04"),
    ("Canonical", "ubuntu-24_04-lts", "server-gen1"):
        ("V1", ["24.04.202609230", "24.04.202610010", "24.04.202610150"], "24.04"),
    ("Debian", "debian-12", "12-gen2"): ("V2", ["0.20260915.2230", "0.20261001.2245", "0.20261015.2260"], "12"),
    ("Debian", "debian-12", "12"): ("V1", ["0.20260915.2230", "0.20261001.2245", "0.20261015.2260"], "12"),
}

ALLOCATION_MESSAGES = {
    "AllocationFailed": "Allocation failed. We do not have sufficient capacity for the requested VM size in this "
                        "region. Read more about improving likelihood of allocation success at "
                        "http://aka.ms/allocation-guidance",
    "ZonalAllocationFailed": "Allocation failed. We do not have sufficient capacity for the requested VM size in "
                             "this zone. Read more about improving likelihood of allocation success at "
                             "http://aka.ms/allocation-guidance",
    "OverconstrainedAllocationRequest": "Allocation failed. VM(s) with the following constraints cannot be "
                                        "allocated, because the condition is too restrictive. Please remove some "
                                        "constraints and try again. Constraints applied are: - VM Size - Zone - "
                                        "Priority",
}
KINDS = {  # fault kind -> (stage, default error code)
    "sku_not_available_409": ("vm", "SkuNotAvailable"), "quota": ("vm", "OperationNotAllowed"),
    "allocation_failed_lro": ("vm", "AllocationFailed"), "zonal_allocation_failed_lro": ("vm", "ZonalAllocationFailed"),
    "overconstrained_allocation_lro": ("vm", "OverconstrainedAllocationRequest"), "lro_never_done": ("vm", None),
    "throttle_429": ("http", "SubscriptionRequestsThrottled"), "unavailable_503": ("http", "ServiceUnavailable"),
    "auth_401": ("http", "InvalidAuthenticationToken"), "invalid_400": ("http", "InvalidParameter"),
}
ALIASES = {"sku_not_available": "sku_not_available_409", "quota_409": "quota", "allocation_failed":
           "allocation_failed_lro", "zonal_allocation_failed": "zonal_allocation_failed_lro",
           "overconstrained_allocation_request": "overconstrained_allocation_lro", "throttle": "throttle_429",
           "unavailable": "unavailable_503", "auth": "auth_401", "invalid": "invalid_400"}


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def not_found(type_, name, rg):
    return ArmError(404, "ResourceNotFound", f"The Resource '{type_}/{name}' under resource group '{rg}' was not "
                    "found. For more details please go to https://aka.ms/ARMResourceNotFoundFix")  # (*)


def rg_not_found(rg):
    return ArmError(404, "ResourceGroupNotFound", f"Resource group '{rg}' could not be found.")  # (*)


def under(child, parent):
    """True when `child` is `parent` or one of its sub-resources (case-insensitive ARM ids)."""
    child, parent = child.lower(), parent.lower()
    return child == parent or child.startswith(parent + "/")


def parse_id(rid):
    """'/subscriptions/s/resourceGroups/rg/providers/NS/type/name[/child/cname]' -> (rg, type, name, child)."""
    m = re.fullmatch(r"/subscriptions/[^/]+/resourcegroups/([^/]+)/providers/([^/]+)/([^/]+)/([^/]+)"
                     r"(?:/([^/]+)/([^/]+))?", rid or "", re.I)
    if not m or m[3].lower() not in TYPES:
        return None
    return m[1], TYPES[m[3].lower()], m[4], (m[6] if m[5] else None)


def vm_family(size):
    known = [(r"NC\d+as_T4_v3", "standardNCASv3_T4Family"), (r"NC\d+ads_A100_v4", "StandardNCADSA100v4Family"),
             (r"NV\d+ads_A10_v5", "StandardNVADSA10v5Family"), (r"NC\d+ads_H100_v5", "standardNCadsH100v5Family"),
             (r"ND96is?r_H100_v5", "standardNDSH100v5Family"), (r"ND96am?sr_A100_v4", "standardNDAMSv4_A100Family")]
    for pat, fam in known:
        if re.search(pat, size, re.I):
            return fam
    m = re.match(r"Standard_([A-Z]+)\d+(?:-\d+)?([a-z]*)(?:_(v\d))?", size)
    return f"standard{m[1]}{m[2].upper()}{m[3] or ''}Family" if m else "standardFamily"


def vcpus(size):
    m = re.match(r"(?:Standard|Basic)_[A-Z]+(\d+)", size)
    return int(m[1]) if m else 1


class Fault:
    def __init__(self, kind, location=None, times=1, size=None, zone=None, code=None, message=None,
                 method=None, path=None):
        kind = ALIASES.get(kind, kind)
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {sorted(KINDS)}")
        self.kind, self.location, self.times, self.size, self.zone = kind, location, times, size, zone
        self.code, self.message, self.method, self.path = code or KINDS[kind][1], message, method, path
        # HTTP faults narrowed to a VM (location/size/zone) fire at the VM PUT; path/method narrow any request.
        self.stage = "vm" if KINDS[kind][0] == "vm" or any((location, size, zone)) else "http"
        if kind == "lro_never_done" and (method or path) and not any((location, size, zone)):
            self.stage = "lro"  # any LRO-starting request (PUT/DELETE/POST) matching method/path

    def matches(self, stage, method, path, vm=None):
        if stage != self.stage or (self.method and self.method.upper() != method):
            return False
        if self.path and not re.search(self.path, path, re.I):
            return False
        if stage == "vm":
            loc, size, zones = vm
            if (self.location and self.location.lower() != loc.lower()) or \
                    (self.size and self.size.lower() != size.lower()) or (self.zone and self.zone not in zones):
                return False
        return True


class Op:
    """A long-running operation, polled through Azure-AsyncOperation / Location or the resource body."""

    def __init__(self, ns, location, polls, finish, never=False, fail=None):
        self.id, self.ns, self.location = str(uuid.uuid4()), ns, location
        self.polls, self.finish, self.never, self.fail = polls, finish, never, fail
        self.status, self.error, self.result, self.start, self.end = "InProgress", None, None, now(), None

    def advance(self):
        if self.status != "InProgress" or self.never:
            return
        if self.polls > 0:
            self.polls -= 1
            return
        try:
            self.result = self.finish(self.fail)
            self.status = "Failed" if self.fail else "Succeeded"
            self.error = self.fail
        except ArmError as e:  # e.g. the resource vanished (its group was deleted) while the LRO ran
            self.status, self.error = "Canceled", {"code": e.code, "message": e.message}
        self.end = now()

    def status_body(self):
        body = {"startTime": self.start, "status": self.status, "name": self.id}
        if self.end:
            body["endTime"] = self.end
        if self.error:
            body["error"] = self.error
        if self.status == "Succeeded" and self.result is not None:
            body["properties"] = {"output": self.result}
        return body


class State:
    """Everything the emulator knows. All methods run under ArmEmulator's lock."""

    def __init__(self, sub):
        self.sub = sub
        self.groups, self.res, self.ops, self.faults = {}, {}, {}, []
        self.run_output, self.serial_logs, self.run_commands = {}, {}, []
        self._ip = itertools.count(10)
        self.images = copy.deepcopy(IMAGES)

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
        V.check_name("resourcegroups", rg)
        body = V.validate(V.RESOURCE_GROUP, body)
        loc = (body.get("location") or "").lower().replace(" ", "")
        if not loc:
            raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
        self.check_location(loc)
        V.check_tags(body.get("tags"))
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
            del self.res[key]
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
        if extra.get("disk") and extra.get("disk_delete"):
            self.res.pop(extra["disk"].lower(), None)
        for rid, delete in extra.get("nics", []) + extra.get("pips", []):
            if delete:
                self.res.pop(rid.lower(), None)

    def next_public_ip(self):
        return f"198.51.100.{next(self._ip) % 250 + 1}"

    # ------------------------------------------------------------------ LROs
    def new_op(self, ns, location, polls, finish, never=False, fail=None):
        op = Op(ns, location, polls, finish, never, fail)
        self.ops[op.id] = op
        return op

    def _finisher(self, rec, on_success=None):
        def finish(fail):
            if self.by_id(rec["id"]) is not rec:
                raise ArmError(409, "OperationPreempted", "Operation execution has been preempted by a more "
                               "recent operation.")
            rec["state"] = "Failed" if fail else "Succeeded"
            rec["extra"]["error"], rec["extra"]["end"] = fail, now()
            if not fail and on_success:
                on_success()
        return finish

    # ------------------------------------------------------------------ PUT
    def put(self, type_, rg, name, body, polls, method_path):
        V.check_name(type_, name)
        self.writable_group(rg)
        ignored = []
        body = V.validate(V.SCHEMAS[type_], body, "", ignored)
        loc = (body.get("location") or "").lower().replace(" ", "")
        if not loc:
            raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
        self.check_location(loc, type_)
        body["location"] = loc
        V.check_tags(body.get("tags"))
        old = self.get(rg, type_, name)
        if old and old["location"] != loc:
            raise ArmError(409, "InvalidResourceLocation", f"The resource '{name}' already exists in location "
                           f"'{old['location']}' in resource group '{rg}'. A resource with the same name cannot be "
                           f"created in location '{loc}'. Please select a new resource name.")
        if old and old["state"] in ("Creating", "Updating", "Deleting"):
            raise ArmError(409, "Conflict", f"The operation 'PUT' on '{name}' is not allowed while the resource "
                           f"is in state '{old['state']}'. Retry after the running operation finishes.")
        rec = self.new_record(rg, type_, name, body)
        if old:
            rec.update(guid=old["guid"], created=old["created"], extra=dict(old["extra"]), state="Updating")
        handler = {VM_T: self._put_vm, NIC_T: self._put_nic, PIP_T: self._put_pip, NSG_T: self._put_nsg,
                   VNET_T: self._put_vnet}[type_]
        on_success, never, fail = handler(rec, old, method_path) or (None, False, None)
        self.res[rec["id"].lower()] = rec
        f = self.take_fault("lro", *method_path)
        op = self.new_op(type_.split("/")[0], loc, polls, self._finisher(rec, on_success), never or bool(f), fail)
        rec["op"] = op.id
        return (200 if old else 201), rec, op, ignored

    def _put_vnet(self, rec, old, _mp):
        props = rec["body"].get("properties") or {}
        V.check_vnet(props, rec["name"])
        for sn in props.get("subnets") or []:
            nsg = (sn.get("properties") or {}).get("networkSecurityGroup")
            if nsg:
                self.check_ref(nsg["id"], rec["id"], rec["location"], NSG_T)
        if old:
            keep = {sn.get("name", "").lower() for sn in props.get("subnets") or []}
            for user, via in self.refs_to(rec["id"]):
                sub = next(iter(r for r in self.res.values() if under(user, r["id"])), None)
                for ipc in (sub["body"]["properties"].get("ipConfigurations") or []) if sub else []:
                    sid = ((ipc.get("properties") or {}).get("subnet") or {}).get("id", "")
                    if sid.lower().startswith(rec["id"].lower() + "/subnets/") and \
                            sid.rsplit("/", 1)[1].lower() not in keep:
                        raise ArmError(400, "InUseSubnetCannotBeDeleted", f"Subnet {sid.rsplit('/', 1)[1]} is "
                                       f"in use by {user} and cannot be deleted. In order to delete the subnet, "
                                       "delete all the resources within the subnet.")  # (*)

    def _put_nsg(self, rec, old, _mp):
        V.check_nsg(rec["body"].get("properties") or {})

    def _put_pip(self, rec, old, _mp):
        V.check_public_ip(rec["body"], rec["id"])
        rec["extra"].setdefault("ip", self.next_public_ip())

    def _put_nic(self, rec, old, _mp):
        props = rec["body"].get("properties") or {}
        ipcs = props.get("ipConfigurations") or []
        if not ipcs:
            raise V.required_missing("properties.ipConfigurations")
        if props.get("networkSecurityGroup"):
            self.check_ref(props["networkSecurityGroup"]["id"], rec["id"], rec["location"], NSG_T)
        for i, ipc in enumerate(ipcs):
            ip = ipc.get("properties") or {}
            if not ip.get("subnet"):
                raise V.required_missing(f"properties.ipConfigurations[{i}].properties.subnet")
            self.check_ref(ip["subnet"]["id"], rec["id"], rec["location"], VNET_T)
            if ip.get("publicIPAddress"):
                pip = self.check_ref(ip["publicIPAddress"]["id"], rec["id"], rec["location"], PIP_T)
                users = [u for u, via in self.refs_to(pip["id"]) if not under(u, rec["id"])]
                if users:
                    raise ArmError(400, "PublicIPAddressInUse", f"Resource {pip['id']} is referenced by "
                                   f"{users[0]} and cannot be used by {rec['id']}.")

    def _put_vm(self, rec, old, method_path):
        body, name = rec["body"], rec["name"]
        p = body["properties"]
        V.check_vm(body, name)
        size, zones, loc = p["hardwareProfile"]["vmSize"], body.get("zones") or [], rec["location"]
        osp = p.get("osProfile") or {}
        if old:
            op_ = old["body"]["properties"].get("osProfile") or {}
            for target, new, was in (("zones", zones, old["body"].get("zones") or []),
                                     ("customData", osp.get("customData"), op_.get("customData")),
                                     ("adminUsername", osp.get("adminUsername"), op_.get("adminUsername")),
                                     ("imageReference", p["storageProfile"].get("imageReference"),
                                      old["body"]["properties"]["storageProfile"].get("imageReference"))):
                if new is not None and new != was:
                    raise ArmError(409, "PropertyChangeNotAllowed", f"Changing property '{target}' is not "
                                   "allowed.", target=target)  # (*)
        gen, image = self._image_for(p["storageProfile"].get("imageReference"), loc)
        sec = (p.get("securityProfile") or {}).get("securityType", "")
        if sec.lower() in ("trustedlaunch", "confidentialvm") and gen == "V1":
            raise V.invalid("securityProfile.securityType", f"The VM size or image does not support security type "
                            f"'{sec}': a Generation 2 image is required.")
        nics = []
        for ref in p["networkProfile"].get("networkInterfaces") or []:
            nic = self.by_id(ref["id"])
            if nic is None or nic["type"] != NIC_T or nic["location"] != loc:
                raise ArmError(400, "InvalidResourceReference", f"Resource {ref['id']} referenced by resource "
                               f"{rec['id']} was not found. Please make sure that the referenced resource exists, "
                               "and that both resources are in the same region.")
            users = [u for u, via in self.refs_to(nic["id"]) if via == "vm" and u.lower() != rec["id"].lower()]
            if users:
                raise ArmError(400, "NicInUse", f"Network Interface {nic['id']} is used by existing resource "
                               f"{users[0]}. A network interface can be attached to one virtual machine only.")
            nics.append((nic["id"], (ref.get("properties") or {}).get("deleteOption", "Detach").lower() == "delete"))
        created = []   # VM-managed NIC/public IP records, stored only once the PUT is accepted
        managed = self._plan_managed_nics(rec, p["networkProfile"].get("networkInterfaceConfigurations") or [],
                                          created)
        f = self.take_fault("vm", *method_path, vm=(loc, size, zones))
        never, fail = False, None
        if f and f.kind == "sku_not_available_409":
            where = f"location '{loc}'" + (f" zones '{','.join(zones)}'" if zones else "")
            raise ArmError(409, f.code, f.message or f"The requested size for resource '{rec['id']}' is currently "
                           f"not available in {where} for subscription '{self.sub}'. Please try another size or "
                           "deploy to a different location or zones. See https://aka.ms/azureskunotavailable for "
                           "details.")
        if f and f.kind == "quota":
            n, spot = vcpus(size), (p.get("priority") or "").lower() == "spot"
            what = "LowPriorityCores" if spot else f"{vm_family(size)} Cores"
            raise ArmError(409, f.code, f.message or f"Operation could not be completed as it results in exceeding "
                           f"approved {what} quota. Additional details - Deployment Model: Resource Manager, Location: "
                           f"{loc}, Current Limit: 0, Current Usage: 0, Additional Required: {n}, (Minimum) New Limit "
                           f"Required: {n}. Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/"
                           "Microsoft_Azure_Capacity/UsageAndQuota.ReactView by specifying parameters listed in the "
                           "'Details' section for deployment to succeed.")
        if f and f.stage == "vm" and KINDS[f.kind][0] == "http":
            raise http_fault_error(f)
        if f and f.kind in ("allocation_failed_lro", "zonal_allocation_failed_lro", "overconstrained_allocation_lro"):
            fail = {"code": f.code, "message": f.message or ALLOCATION_MESSAGES.get(f.code, f.code)}
        never = bool(f and f.kind == "lro_never_done")
        for r in created:
            self.res.setdefault(r["id"].lower(), r)
        ex = rec["extra"]
        ex.update(nics=nics + [(n, d) for n, d, _, _ in managed], pips=[(pp, d) for _, _, pp, d in managed if pp],
                  image_gen=gen, image=image, size=size)
        ex.setdefault("power", None)
        os_disk = p["storageProfile"].get("osDisk") or {}
        disk_name = os_disk.get("name") or ex.get("disk_name") or f"{name}_OsDisk_1_{uuid.uuid4().hex}"
        ex.update(disk_name=disk_name, disk_delete=os_disk.get("deleteOption", "Detach").lower() == "delete")

        def on_success():
            ex["power"] = "running"
            did = self.rid(rec["rg"], DISK_T, disk_name)
            if did.lower() not in self.res:
                drec = self.new_record(rec["rg"], DISK_T, disk_name, {"location": loc, "properties": {
                    "osType": "Linux", "diskSizeGB": os_disk.get("diskSizeGB") or 30,
                    "creationData": {"createOption": "FromImage", "imageReference": {"id": image}}},
                    "sku": {"name": (os_disk.get("managedDisk") or {}).get("storageAccountType", "Premium_LRS")}})
                drec["state"] = "Succeeded"
                if zones:
                    drec["body"]["zones"] = zones
                self.res[did.lower()] = drec
            ex["disk"] = did
        return on_success, never, fail

    def _plan_managed_nics(self, rec, cfgs, created):
        """networkInterfaceConfigurations: the VM creates (and later deletes) its own NIC and public IP."""
        out = []
        for cfg in cfgs:
            cp = cfg.get("properties") or {}
            nsg = cp.get("networkSecurityGroup")
            if nsg:
                self.check_ref(nsg["id"], rec["id"], rec["location"], NSG_T)
            ipcs, pip_id, pip_del = [], None, False
            for ipc in cp.get("ipConfigurations") or []:
                ip = ipc.get("properties") or {}
                if not ip.get("subnet"):
                    raise V.required_missing("networkInterfaceConfigurations.ipConfigurations.subnet")
                self.check_ref(ip["subnet"]["id"], rec["id"], rec["location"], VNET_T)
                nic_ip = {"subnet": ip["subnet"], "primary": ip.get("primary", True)}
                pc = ip.get("publicIPAddressConfiguration")
                if pc:
                    pbody = {"location": rec["location"], "sku": pc.get("sku") or {"name": "Standard"},
                             "properties": {k: v for k, v in (pc.get("properties") or {}).items()
                                            if k in ("publicIPAllocationMethod", "idleTimeoutInMinutes")}}
                    pbody["properties"].setdefault("publicIPAllocationMethod", "Static")
                    pip_id = self.rid(rec["rg"], PIP_T, pc["name"])
                    V.check_public_ip(pbody, pip_id)
                    pip_del = (pc.get("properties") or {}).get("deleteOption", "Detach").lower() == "delete"
                    prec = self.new_record(rec["rg"], PIP_T, pc["name"], pbody)
                    prec["state"], prec["extra"]["ip"] = "Succeeded", self.next_public_ip()
                    created.append(prec)
                    nic_ip["publicIPAddress"] = {"id": pip_id}
                ipcs.append({"name": ipc["name"], "properties": nic_ip})
            nbody = {"location": rec["location"], "properties": {"ipConfigurations": ipcs}}
            if nsg:
                nbody["properties"]["networkSecurityGroup"] = nsg
            if cp.get("enableAcceleratedNetworking") is not None:
                nbody["properties"]["enableAcceleratedNetworking"] = cp["enableAcceleratedNetworking"]
            nrec = self.new_record(rec["rg"], NIC_T, cfg["name"], nbody)
            nrec["state"] = "Succeeded"
            created.append(nrec)
            out.append((nrec["id"], cp.get("deleteOption", "Detach").lower() == "delete", pip_id, pip_del))
        return out

    def _image_for(self, ir, loc):
        if not ir:
            return "V2", None
        key = next((k for k in self.images if [x.lower() for x in k] ==
                    [(ir.get(f) or "").lower() for f in ("publisher", "offer", "sku")]), None)
        version = ir.get("version") or "latest"
        if key is None or (version != "latest" and version not in self.images[key][1]):
            urn = ":".join(str(ir.get(f)) for f in ("publisher", "offer", "sku")) + f":{version}"
            raise ArmError(404, "PlatformImageNotFound", f"The platform image '{urn}' is not available. Verify that "
                           "all fields in the storage profile are correct. For more details about storage profile "
                           "information, please refer to https://aka.ms/storageprofile", target="imageReference")  # (*)
        gen, versions, _ = self.images[key]
        exact = versions[-1] if version == "latest" else version
        return gen, (f"/Subscriptions/{self.sub}/Providers/Microsoft.Compute/Locations/{loc}/Publishers/{key[0]}/"
                     f"ArtifactTypes/VMImage/Offers/{key[1]}/Skus/{key[2]}/Versions/{exact}")

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

    # ------------------------------------------------------------------ GET rendering
    def render(self, rec, expand=""):
        t, body = rec["type"], copy.deepcopy(rec["body"])
        out = {"name": rec["name"], "id": rec["id"], "type": t, "location": rec["location"]}
        for k in ("tags", "zones", "sku", "identity"):
            if body.get(k):
                out[k] = body[k]
        props = body.get("properties") or {}
        props["provisioningState"] = rec["state"]
        if t.startswith(NET):
            out["etag"] = f'W/"{rec["guid"]}"'
            props["resourceGuid"] = rec["guid"]
        if t == VM_T:
            self._render_vm(rec, props, expand)
        elif t == NIC_T:
            self._render_nic(rec, props)
        elif t == PIP_T:
            props.setdefault("publicIPAddressVersion", "IPv4")
            props.setdefault("idleTimeoutInMinutes", 4)
            props["ipAddress"] = rec["extra"]["ip"]
            cfg = [u for u, via in self.refs_to(rec["id"]) if via == "publicIPAddress"]
            if cfg:
                props["ipConfiguration"] = {"id": cfg[0]}
        elif t == NSG_T:
            for r in props.get("securityRules") or []:
                r.update(id=f"{rec['id']}/securityRules/{r['name']}", type=f"{NSG_T}/securityRules")
                r["properties"]["provisioningState"] = "Succeeded"
            props["defaultSecurityRules"] = DEFAULT_RULES
            users = self.refs_to(rec["id"])
            props["networkInterfaces"] = [{"id": u} for u, via in users if "/networkInterfaces/" in u]
            props["subnets"] = [{"id": u} for u, via in users if "/subnets/" in u]
        elif t == VNET_T:
            users = self.refs_to(rec["id"])
            for sn in props.get("subnets") or []:
                sn.update(id=f"{rec['id']}/subnets/{sn['name']}", type=f"{VNET_T}/subnets", etag=out["etag"])
                sn.setdefault("properties", {})["provisioningState"] = "Succeeded"
                ipcs = [{"id": u} for u, via in users if via == "subnet" and self._subnet_of(u) == sn["id"].lower()]
                if ipcs:
                    sn["properties"]["ipConfigurations"] = ipcs
        elif t == DISK_T:
            vm = [u for u, via in self.refs_to(rec["id"])]
            if vm:
                out["managedBy"] = vm[0]
            props["diskState"] = "Attached" if vm else "Unattached"
        out["properties"] = props
        return out

    def _subnet_of(self, ipconfig_id):
        nic_id = ipconfig_id.split("/ipConfigurations/")[0]
        nic, name = self.by_id(nic_id), ipconfig_id.rsplit("/", 1)[1]
        for ipc in nic["body"]["properties"]["ipConfigurations"] if nic else []:
            if ipc["name"] == name:
                return ipc["properties"]["subnet"]["id"].lower()
        return None

    def _render_nic(self, rec, props):
        vms = [u for u, via in self.refs_to(rec["id"]) if via == "vm"]
        for i, ipc in enumerate(props.get("ipConfigurations") or []):
            ip = ipc.setdefault("properties", {})
            ipc.update(id=f"{rec['id']}/ipConfigurations/{ipc['name']}", type=f"{NIC_T}/ipConfigurations",
                       etag=f'W/"{rec["guid"]}"')
            ip.setdefault("privateIPAllocationMethod", "Dynamic")
            ip.setdefault("privateIPAddressVersion", "IPv4")
            ip.setdefault("primary", i == 0)
            ip["provisioningState"] = "Succeeded"
            ip.setdefault("privateIPAddress", self._private_ip(ipc["id"], ip["subnet"]["id"]))
        props.setdefault("enableAcceleratedNetworking", False)
        props.setdefault("enableIPForwarding", False)
        props["nicType"] = props.get("nicType", "Standard")
        if vms:
            props["virtualMachine"] = {"id": vms[0]}
            props["primary"] = True
            props["macAddress"] = "60-45-BD-" + "-".join(rec["guid"][i:i + 2].upper() for i in (0, 2, 4))

    def _private_ip(self, ipconfig_id, subnet_id):
        vnet = self.by_id(subnet_id.split("/subnets/")[0])
        sname = subnet_id.rsplit("/", 1)[1].lower()
        prefix = next((s["properties"].get("addressPrefix") or s["properties"]["addressPrefixes"][0]
                       for s in vnet["body"]["properties"]["subnets"] if s["name"].lower() == sname), "10.0.0.0/24")
        users = [u.lower() for u, via in self.refs_to(vnet["id"]) if via == "subnet"
                 and self._subnet_of(u) == subnet_id.lower()]
        idx = users.index(ipconfig_id.lower()) if ipconfig_id.lower() in users else len(users)
        return str(ipaddress.ip_network(prefix).network_address + 4 + idx)

    def _render_vm(self, rec, props, expand):
        ex = rec["extra"]
        for k in ("customData", "adminPassword"):
            (props.get("osProfile") or {}).pop(k, None)
        if "userdata" not in (expand or "").lower():   # ARM returns userData only with $expand=userData
            props.pop("userData", None)
        props.update(vmId=rec["guid"], timeCreated=rec["created"])
        osd = props["storageProfile"].setdefault("osDisk", {"createOption": "FromImage"})
        osd.update(name=ex["disk_name"], osType="Linux")
        osd.setdefault("diskSizeGB", 30)
        osd.setdefault("caching", "ReadWrite")
        osd.setdefault("deleteOption", "Detach")
        md = osd.setdefault("managedDisk", {})
        md.setdefault("storageAccountType", "Premium_LRS" if V.premium_capable(ex["size"]) else "Standard_LRS")
        if ex.get("disk"):
            md["id"] = ex["disk"]
        if ex.get("image"):
            props["storageProfile"]["imageReference"]["exactVersion"] = ex["image"].rsplit("/", 1)[1]
        np_ = props["networkProfile"]
        if np_.get("networkInterfaceConfigurations"):
            np_["networkInterfaces"] = [{"id": n, "properties": {"deleteOption": "Delete" if d else "Detach"}}
                                        for n, d in ex["nics"]]
        if expand and "instanceview" in expand.lower():
            props["instanceView"] = self.instance_view(rec)

    def instance_view(self, rec):
        ex, st = rec["extra"], rec["state"]
        if st == "Failed":
            err = ex["error"]
            statuses = [{"code": f"ProvisioningState/failed/{err['code']}", "level": "Error",
                         "displayStatus": "Provisioning failed", "message": err["message"], "time": ex.get("end")}]
        else:
            statuses = [{"code": f"ProvisioningState/{st.lower()}", "level": "Info",
                         "displayStatus": f"Provisioning {st.lower()}", "time": ex.get("end") or rec["created"]}]
        power = ex.get("power")
        if power:
            statuses.append({"code": f"PowerState/{power}", "level": "Info", "displayStatus": f"VM {power}"})
        image = ex.get("image") or ""
        osp = rec["body"]["properties"].get("osProfile") or {}
        view = {"computerName": osp.get("computerName", rec["name"]), "hyperVGeneration": ex.get("image_gen", "V2"),
                "osName": "debian" if "/Debian/" in image else "ubuntu",
                "osVersion": next((v[2] for k, v in self.images.items() if f"/Offers/{k[1]}/" in image), ""),
                "disks": [{"name": ex["disk_name"], "statuses": [{"code": "ProvisioningState/succeeded",
                                                                  "level": "Info"}]}] if ex.get("disk") else [],
                "statuses": statuses}
        if power == "running":
            view["vmAgent"] = {"vmAgentVersion": "2.13.1.1", "statuses": [
                {"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Ready",
                 "message": "Guest Agent is running"}]}
        return view

    # ------------------------------------------------------------------ VM actions
    def vm(self, rg, name):
        self.group(rg)
        rec = self.get(rg, VM_T, name)
        if rec is None:
            raise not_found(VM_T, name, rg)
        return rec

    def run_command(self, rg, name, body, polls, method_path):
        rec = self.vm(rg, name)
        body = V.validate(V.RUN_COMMAND_INPUT, body)
        if body["commandId"].lower() not in ("runshellscript", "ifconfig"):
            raise V.invalid("commandId", f"The run command '{body['commandId']}' is not available for Linux "
                            "virtual machines. Use RunShellScript.")
        if rec["state"] != "Succeeded" or rec["extra"].get("power") != "running":
            raise ArmError(409, "OperationNotAllowed", "The operation requires the VM to be running (or set to "
                           "run).")  # (*)
        busy = self.ops.get(rec["extra"].get("run_op"))
        if busy and busy.status == "InProgress":
            raise ArmError(409, "Conflict", "Run command extension execution is in progress. Please wait for "
                           "completion before invoking a run command.")
        script = body.get("script") or []
        self.run_commands.append({"rg": rg, "vm": name, "commandId": body["commandId"], "script": script,
                                  "parameters": body.get("parameters") or []})

        def finish(fail):
            planted = self.run_output.get((rg.lower(), name.lower()), ("", ""))
            out = planted(script) if callable(planted) else planted
            stdout, stderr = (out, "") if isinstance(out, str) else out
            tail = lambda s: s.encode()[-4096:].decode(errors="ignore")  # noqa: E731 (Azure keeps the last 4 KiB)
            return {"value": [{"code": "ProvisioningState/succeeded", "level": "Info",
                               "displayStatus": "Provisioning succeeded",
                               "message": f"Enable succeeded: \n[stdout]\n{tail(stdout)}\n[stderr]\n{tail(stderr)}\n"}]}
        never = bool(self.take_fault("lro", *method_path))
        op = self.new_op(COMP, rec["location"], polls, finish, never)
        rec["extra"]["run_op"] = op.id
        return op

    def power(self, rg, name, action, polls, method_path):
        rec = self.vm(rg, name)
        target = {"start": "running", "poweroff": "stopped", "deallocate": "deallocated", "restart": "running"}
        if rec["state"] != "Succeeded":
            raise ArmError(409, "OperationNotAllowed", f"Operation '{action}' is not allowed on VM '{name}' since "
                           f"the VM is in provisioning state '{rec['state']}'.")
        if action.lower() == "restart" and rec["extra"].get("power") != "running":
            raise ArmError(409, "OperationNotAllowed", "The operation requires the VM to be running (or set to "
                           "run).")

        def finish(fail):
            rec["extra"]["power"] = target[action.lower()]
        never = bool(self.take_fault("lro", *method_path))
        return self.new_op(COMP, rec["location"], polls, finish, never)

    def boot_diagnostics(self, rg, name, base):
        rec = self.vm(rg, name)
        bd = (rec["body"]["properties"].get("diagnosticsProfile") or {}).get("bootDiagnostics") or {}
        if not bd.get("enabled"):
            raise ArmError(409, "OperationNotAllowed", f"Boot diagnostics is not enabled for virtual machine "
                           f"'{name}'. Enable diagnosticsProfile.bootDiagnostics.")
        url = f"{base}/bootdiagnostics/{rec['guid']}/{name}.%s?sv=2025-01-05&sr=b&sp=r&sig=emulated"
        return {"consoleScreenshotBlobUri": url % "screenshot.bmp",
                "serialConsoleLogBlobUri": url % "serialconsole.log"}

    def serial_log(self, guid):
        rec = next((r for r in self.res.values() if r["type"] == VM_T and r["guid"] == guid), None)
        return None if rec is None else self.serial_logs.get((rec["rg"], rec["name"].lower()), "")

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


DEFAULT_RULES = [
    {"name": n, "properties": {"priority": prio, "direction": d, "access": a, "protocol": "*",
                               "sourceAddressPrefix": src, "destinationAddressPrefix": dst, "sourcePortRange": "*",
                               "destinationPortRange": "*", "provisioningState": "Succeeded"}}
    for n, prio, d, a, src, dst in (
        ("AllowVnetInBound", 65000, "Inbound", "Allow", "VirtualNetwork", "VirtualNetwork"),
        ("AllowAzureLoadBalancerInBound", 65001, "Inbound", "Allow", "AzureLoadBalancer", "*"),
        ("DenyAllInBound", 65500, "Inbound", "Deny", "*", "*"),
        ("AllowVnetOutBound", 65000, "Outbound", "Allow", "VirtualNetwork", "VirtualNetwork"),
        ("AllowInternetOutBound", 65001, "Outbound", "Allow", "*", "Internet"),
        ("DenyAllOutBound", 65500, "Outbound", "Deny", "*", "*"))]


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


def http_fault_error(f):
    status = {"throttle_429": 429, "unavailable_503": 503, "auth_401": 401, "invalid_400": 400}[f.kind]
    text = {"throttle_429": "Number of requests for subscription exceeded the limit. Please try again after '0' "
                            "seconds.",
            "unavailable_503": "The service is temporarily unavailable. Please retry later.",
            "auth_401": "The access token is invalid.",
            "invalid_400": "The value of a parameter in the request is invalid (injected by the emulator)."}[f.kind]
    headers = {"Retry-After": "0"} if status in (429, 503) else {}
    if status == 401:
        headers["WWW-Authenticate"] = ('Bearer authorization_uri="https://login.microsoftonline.com/common", '
                                       'error="invalid_token", error_description="The access token is invalid."')
    return ArmError(status, f.code, f.message or text, headers=headers)
