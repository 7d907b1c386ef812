"""PUT of ARM resources (virtual networks, NSGs, public IPs, NICs, VMs): validation against the stored
state, references, images and injected VM faults. Mixed into arm_state.State.

Error codes marked (*) below are the ones seen in real Azure output (public issue reports or the
knowledge file); the others are approximations with the right HTTP status.
"""
from __future__ import annotations

import uuid

from . import arm_checks as C
from . import arm_schemas as S
from . import arm_validate as V
from . import arm_vmss_schemas as VS
from .arm_catalog import DISK_T, NIC_T, NSG_T, PIP_T, PPG_T, VM_T, VMSS_T, VNET_T, under, vcpus, vm_family
from .arm_faults import ALLOCATION_MESSAGES, KINDS, concurrent_write, http_fault_error
from .arm_validate import ArmError


class PutMixin:
    """Resource PUTs; mixed into arm_state.State (runs under ArmEmulator's lock)."""

    # ------------------------------------------------------------------ PUT
    def put(self, type_, rg, name, body, polls, method_path):
        C.check_name(type_, name)
        self.writable_group(rg)
        ignored = []
        schema = S.SCHEMAS.get(type_) or {VMSS_T: VS.VIRTUAL_MACHINE_SCALE_SET, PPG_T: VS.PROXIMITY_PLACEMENT_GROUP}[type_]
        body = V.validate(schema, body, "", ignored)
        loc = (body.get("location") or "").lower().replace(" ", "")
        if not loc:
            raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
        self.check_location(loc, type_)
        body["location"] = loc
        C.check_tags(body.get("tags"))
        old = self.get(rg, type_, name)
        if old and old["location"] != loc:
            raise ArmError(409, "InvalidResourceLocation", f"The resource '{name}' already exists in location "
                           f"'{old['location']}' in resource group '{rg}'. A resource with the same name cannot be "
                           f"created in location '{loc}'. Please select a new resource name.")
        if old and old["state"] in ("Creating", "Updating", "Deleting"):
            raise concurrent_write(type_, self.sub, loc)
        rec = self.new_record(rg, type_, name, body)
        if old:
            rec.update(guid=old["guid"], created=old["created"], extra=dict(old["extra"]), state="Updating")
        handler = {VM_T: self._put_vm, NIC_T: self._put_nic, PIP_T: self._put_pip, NSG_T: self._put_nsg,
                   VNET_T: self._put_vnet, VMSS_T: self._put_vmss, PPG_T: self._put_ppg}[type_]
        # a handler returns None or (on_success, never, fail[, its own finish(fail)])
        on_success, never, fail, *finish = handler(rec, old, method_path) or (None, False, None)
        self.res[rec["id"].lower()] = rec
        f = self.take_fault("lro", *method_path)
        op = self.new_op(type_.split("/")[0], loc, polls, finish[0] if finish else self._finisher(rec, on_success),
                         never or bool(f), fail)
        rec["op"] = op.id
        return (200 if old else 201), rec, op, ignored

    def _put_vnet(self, rec, old, _mp):
        props = rec["body"].get("properties") or {}
        C.check_vnet(props, rec["name"])
        for sn in props.get("subnets") or []:
            nsg = (sn.get("properties") or {}).get("networkSecurityGroup")
            if nsg:
                self.check_ref(nsg["id"], rec["id"], rec["location"], NSG_T)
        if old:
            keep = {sn.get("name", "").lower() for sn in props.get("subnets") or []}
            for user, _via in self.refs_to(rec["id"]):
                sub = next(iter(r for r in self.res.values() if under(user, r["id"])), None)
                for ipc in (sub["body"]["properties"].get("ipConfigurations") or []) if sub else []:
                    sid = ((ipc.get("properties") or {}).get("subnet") or {}).get("id", "")
                    if sid.lower().startswith(rec["id"].lower() + "/subnets/") and \
                            sid.rsplit("/", 1)[1].lower() not in keep:
                        raise ArmError(400, "InUseSubnetCannotBeDeleted", f"Subnet {sid.rsplit('/', 1)[1]} is "
                                       f"in use by {user} and cannot be deleted. In order to delete the subnet, "
                                       "delete all the resources within the subnet.")  # (*)

    def _put_nsg(self, rec, old, _mp):
        C.check_nsg(rec["body"].get("properties") or {})

    def _put_pip(self, rec, old, _mp):
        C.check_public_ip(rec["body"], rec["id"])
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
        C.check_vm(body, name)
        self.give_identity(rec, old)
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
        sec = (p.get("securityProfile") or {}).get("securityType", "")
        gen, image = self._image_for(p["storageProfile"].get("imageReference"), loc, sec)
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
                    C.check_public_ip(pbody, pip_id)
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

    def _image_for(self, ir, loc, security_type=""):
        if not ir:
            return "V2", None
        if ir.get("id"):  # a gallery image version (arm_gallery.py)
            return self.gallery_image_for(ir["id"], loc, security_type)
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
