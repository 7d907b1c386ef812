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

    def check_location(self, loc):
        if loc not in LOCATIONS:
            raise ArmError(400, "LocationNotAvailableForResourceGroup", f"The provided location '{loc}' is not "
                           f"available for resource group. List of available regions is '{','.join(sorted(LOCATIONS))}'.")

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
                for n in (p.get("networkProfile") or {}).get("networkInterfaces") or []:
                    if n["id"].lower() == rid:
                        out.append((r["id"], "vm"))
                if r["extra"].get("disk", "").lower() == rid:
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
        refs = [(i, via) for i, via in self.refs_to(rec["id"]) if not i.lower().startswith(rec["id"].lower())]
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
        if rec["type"] != VM_T:
            return
        p = rec["body"]["properties"]
        disk = self.by_id(rec["extra"].get("disk"))
        if disk and (p["storageProfile"].get("osDisk") or {}).get("deleteOption", "Detach").lower() == "delete":
            self.res.pop(disk["id"].lower(), None)
        for ref in p["networkProfile"].get("networkInterfaces") or []:
            nic = self.by_id(ref["id"])
            if nic and (ref.get("properties") or {}).get("deleteOption", "Detach").lower() == "delete":
                self.res.pop(nic["id"].lower(), None)
        for nic_id, pip_id, nic_del, pip_del in rec["extra"].get("managed", []):
            if nic_del:
                self.res.pop(nic_id.lower(), None)
            if pip_del and not self.refs_to(pip_id):
                self.res.pop(pip_id.lower(), None)

    def next_public_ip(self):
        return f"198.51.100.{next(self._ip) % 250 + 1}"
