"""The ARM emulator's group engine: Microsoft.Compute/virtualMachineScaleSets (Uniform) and
proximityPlacementGroups, mixed into arm_state.State (VmssMixin) and arm_http.ArmRouter (VmssRoutes).

Modelled (request bodies validated against arm_vmss_schemas.py, built from azure-mgmt-compute 39's models):
- proximityPlacementGroups PUT (synchronous, as the SDK's ``create_or_update``: 200/201 with the body, no LRO),
  GET (``virtualMachineScaleSets`` lists the scale sets placed in it), DELETE; a PPG in use by a scale set
  cannot be deleted (409).
- virtualMachineScaleSets PUT (an LRO like the VM PUT; on success ``sku.capacity`` instances ``0..N-1``
  exist, each running, with one NIC per ``networkInterfaceConfigurations`` entry, a private IP in the
  referenced subnet and, with ``publicIPAddressConfiguration``, a public IP), GET (``$expand=userData``; never
  ``customData``), PATCH (tags: an LRO), DELETE (the instances, NICs and public IPs go with it), lists by
  group and subscription; ``/virtualMachines`` (``$expand=instanceView``), ``/virtualMachines/{id}``,
  ``/virtualMachines/{id}/instanceView``, ``/virtualMachines/{id}/runCommand`` (RunShellScript; the output
  is planted with ``emu.set_run_command_output(rg, "NAME_ID", ...)``), ``/networkInterfaces`` and
  ``/publicipaddresses`` (azure-mgmt-network's VMSS lists), ``/deallocate``, ``/start``, ``/poweroff`` (all
  instances or ``instanceIds``), ``/virtualMachines/{id}/retrieveBootDiagnosticsData`` + the SAS blob (the log is
  planted with ``emu.set_serial_log(rg, "NAME_ID", text)``).
- Checks (stateless ones approximate ARM's wording): Uniform only is modelled (Flexible is refused, 400, as
  trainvm never sends it); ``sku.name``/``sku.capacity`` required; capacity <= 100 with
  ``singlePlacementGroup: true`` (Azure's single-placement-group cap) and <= 1000; ``networkApiVersion`` and
  NIC/disk ``deleteOption`` are Flexible-only (400 in Uniform); ``computerNamePrefix`` 1-58 characters;
  ``osDisk.name`` is refused with managed disks; the subnet, NSG and PPG references must exist in the scale
  set's region; TrustedLaunch needs a Gen2 image; the OS profile as for a VM (arm_checks).
- Faults (``emu.inject`` with location/size, fired at the scale-set PUT): sku_not_available_409 and quota
  as for a VM; allocation_failed_lro: the LRO fails AllocationFailed and every instance is left in
  provisioning state Failed; ``partial_capacity_lro`` with ``created=K``: the LRO fails AllocationFailed
  after K instances were allocated (running, with addresses) and the other N-K are left Failed: the scale
  set has no minimum count and deletes nothing itself, so the caller must.

Not modelled: placement itself (no racks, fabric or InfiniBand partition keys: the PPG and
``singlePlacementGroup`` are only recorded, so co-location cannot be observed here), overprovisioning (with
``overprovision: true`` the emulator still creates exactly N), instance-id gaps (real ids are not always
0..N-1), Flexible orchestration, autoscale, upgrade policies, extensions, per-instance tags (ARM ignores tag
writes on Uniform instances), what IMDS shows an instance (``compute/tags``: the scale set's tags on Azure,
not observable here), and references from scale sets in NSG/VNet renders.
"""
from __future__ import annotations

import copy
import ipaddress
import uuid

from . import arm_checks as C
from . import arm_validate as V
from . import arm_vmss_schemas as VS
from .arm_catalog import COMP, NSG_T, PPG_T, VMSS_T, VNET_T, now
from .arm_faults import ALLOCATION_MESSAGES, KINDS, http_fault_error, not_found
from .arm_validate import ArmError

VMSS_VM_T = f"{VMSS_T}/virtualMachines"
SPG_MAX, VMSS_MAX = 100, 1000


def _b36(n, width=6):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out.rjust(width, "0")


class VmssMixin:
    """Scale sets and proximity placement groups; mixed into arm_state.State (runs under the emulator's lock)."""

    # ------------------------------------------------------------------ PUT
    def _put_ppg(self, rec, old, _mp):
        rec["state"] = "Succeeded"

    def _put_vmss(self, rec, old, method_path):
        body, loc = rec["body"], rec["location"]
        p = body.get("properties") or {}
        sku = body.get("sku") or {}
        if not sku.get("name"):
            raise V.required_missing("sku.name")
        if sku.get("capacity") is None:
            raise V.required_missing("sku.capacity")
        cap, size = sku["capacity"], sku["name"]
        mode = (p.get("orchestrationMode") or "Uniform").lower()
        if mode != "uniform":
            raise V.invalid("orchestrationMode", "The emulator models Uniform scale sets only.")
        if not 0 <= cap <= VMSS_MAX:
            raise V.invalid("sku.capacity", f"The capacity {cap} is outside the allowed range 0-{VMSS_MAX}.")
        if p.get("singlePlacementGroup", True) and cap > SPG_MAX:
            raise V.invalid("sku.capacity", f"The capacity {cap} exceeds {SPG_MAX}, the maximum of a scale set with "
                            "singlePlacementGroup set to true.")
        vp = p.get("virtualMachineProfile")
        if not vp:
            raise V.required_missing("properties.virtualMachineProfile")
        st, osp, net = (vp.get(k) or {} for k in ("storageProfile", "osProfile", "networkProfile"))
        if net.get("networkApiVersion"):
            raise V.invalid("networkApiVersion", "networkApiVersion is supported only for scale sets with "
                            "orchestration mode Flexible.")
        os_disk = st.get("osDisk") or {}
        if os_disk.get("deleteOption"):
            raise V.invalid("osDisk.deleteOption", "The OS disk delete option is supported only for scale sets with "
                            "orchestration mode Flexible.")
        if os_disk.get("name") and os_disk.get("managedDisk") is not None:
            raise V.invalid("osDisk.name", "Parameter 'osDisk.name' is not allowed with managed disks.")
        prefix = osp.get("computerNamePrefix") or ""
        if not 1 <= len(prefix) <= 58:
            raise V.invalid("computerNamePrefix", "Linux computer name prefix must be 1 to 58 characters long.")
        # the VM checks, on the scale set's profile seen as one VM
        as_vm = {"properties": {"hardwareProfile": {"vmSize": size}, "storageProfile": st, "networkProfile": {
            "networkInterfaceConfigurations": net.get("networkInterfaceConfigurations"),
            "networkApiVersion": "2020-11-01"},
            "osProfile": {**{k: v for k, v in osp.items() if k != "computerNamePrefix"}, "computerName": prefix},
            **{k: vp[k] for k in ("priority", "evictionPolicy", "billingProfile", "userData") if k in vp}}}
        C.check_vm(as_vm, rec["name"])
        if p.get("proximityPlacementGroup"):
            self.check_ref(p["proximityPlacementGroup"]["id"], rec["id"], loc, PPG_T)
        subnets = []
        for cfg in net.get("networkInterfaceConfigurations") or []:
            cp = cfg.get("properties") or {}
            if cp.get("deleteOption"):
                raise V.invalid("networkInterfaceConfigurations.deleteOption", "The NIC delete option is supported "
                                "only for scale sets with orchestration mode Flexible.")
            if cp.get("networkSecurityGroup"):
                self.check_ref(cp["networkSecurityGroup"]["id"], rec["id"], loc, NSG_T)
            for ipc in cp.get("ipConfigurations") or []:
                ip = ipc.get("properties") or {}
                if not ip.get("subnet"):
                    raise V.required_missing("networkInterfaceConfigurations.ipConfigurations.subnet")
                self.check_ref(ip["subnet"]["id"], rec["id"], loc, VNET_T)
                subnets.append(ip["subnet"]["id"])
        gen, image = self._image_for(st.get("imageReference"), loc)
        sec = (vp.get("securityProfile") or {}).get("securityType", "")
        if sec.lower() in ("trustedlaunch", "confidentialvm") and gen == "V1":
            raise V.invalid("securityProfile.securityType", f"The VM size or image does not support security type "
                            f"'{sec}': a Generation 2 image is required.")
        self.give_identity(rec, old)
        f = self.take_fault("vm", *method_path, vm=(loc, size, body.get("zones") or []))
        if f and f.kind == "sku_not_available_409":
            raise ArmError(409, f.code, f.message or f"The requested size for resource '{rec['id']}' is currently "
                           f"not available in location '{loc}' for subscription '{self.sub}'. Please try another "
                           "size or deploy to a different location or zones. See https://aka.ms/azureskunotavailable "
                           "for details.")
        if f and f.kind == "quota":
            raise ArmError(409, f.code, f.message or "Operation could not be completed as it results in exceeding "
                           f"approved Cores quota. Additional details - Location: {loc}, Additional Required: "
                           f"{cap} VMs of {size}.")
        if f and KINDS[f.kind][0] == "http":
            raise http_fault_error(f)
        ok, fail = cap, None
        if f and f.kind in ("allocation_failed_lro", "zonal_allocation_failed_lro", "overconstrained_allocation_lro",
                            "partial_capacity_lro"):
            ok = min(cap, f.created or 0) if f.kind == "partial_capacity_lro" else 0
            fail = {"code": f.code, "message": f.message or ALLOCATION_MESSAGES.get(f.code, f.code)}
        ex = rec["extra"]
        ex.update(size=size, image=image, image_gen=gen, subnets=subnets)
        ex.setdefault("instances", {})

        def finish(failure):
            if self.by_id(rec["id"]) is not rec:
                raise ArmError(409, "OperationPreempted", "Operation execution has been preempted by a more recent "
                               "operation.")
            for i in range(cap):
                if str(i) not in ex["instances"]:
                    self._new_instance(rec, str(i), ok=i < ok, error=failure)
            for iid in [k for k in ex["instances"] if int(k) >= cap]:
                del ex["instances"][iid]
            rec["state"] = "Failed" if failure else "Succeeded"
            ex["error"], ex["end"] = failure, now()
        return None, bool(f and f.kind == "lro_never_done"), fail, finish

    def _new_instance(self, rec, iid, ok, error):
        vp = rec["body"]["properties"]["virtualMachineProfile"]
        nics = []
        for cfg in (vp.get("networkProfile") or {}).get("networkInterfaceConfigurations") or []:
            ipcs = []
            for ipc in (cfg.get("properties") or {}).get("ipConfigurations") or []:
                ip = ipc.get("properties") or {}
                ipcs.append({"name": ipc["name"], "subnet": ip["subnet"]["id"], "primary": ip.get("primary", True),
                             "private": self._vmss_private_ip(ip["subnet"]["id"]) if ok else None,
                             "public": (self.next_public_ip() if ok and ip.get("publicIPAddressConfiguration")
                                        else None),
                             "pip_name": (ip.get("publicIPAddressConfiguration") or {}).get("name")})
            nics.append({"name": cfg["name"], "ipcs": ipcs, "nsg": (cfg.get("properties") or {}).get(
                "networkSecurityGroup"), "primary": (cfg.get("properties") or {}).get("primary", True)})
        rec["extra"]["instances"][iid] = {
            "id": iid, "guid": str(uuid.uuid4()), "created": now(), "state": "Succeeded" if ok else "Failed",
            "power": "running" if ok else None, "error": None if ok else error, "nics": nics}

    def _vmss_private_ip(self, subnet_id):
        vnet = self.by_id(subnet_id.split("/subnets/")[0])
        sname = subnet_id.rsplit("/", 1)[1].lower()
        prefix = next((s["properties"].get("addressPrefix") or s["properties"]["addressPrefixes"][0]
                       for s in vnet["body"]["properties"]["subnets"] if s["name"].lower() == sname), "10.0.0.0/24")
        used = {c["private"] for r in self.of_type(VMSS_T) for inst in r["extra"].get("instances", {}).values()
                for n in inst["nics"] for c in n["ipcs"] if c["subnet"].lower() == subnet_id.lower()}
        taken = len([u for u, via in self.refs_to(vnet["id"]) if via == "subnet"])  # standalone NICs there
        net = ipaddress.ip_network(prefix)
        k = 4 + taken
        while str(net.network_address + k) in used:
            k += 1
        return str(net.network_address + k)

    def patch_vmss(self, rg, name, body, polls, method_path):
        rec = self.vmss(rg, name)
        body = V.validate(VS.VIRTUAL_MACHINE_SCALE_SET_UPDATE, body or {})
        if body.get("properties") or body.get("sku") or body.get("identity"):
            raise V.invalid("properties", "The emulator models tag updates of a scale set only.")
        if rec["state"] in ("Creating", "Updating", "Deleting"):
            raise ArmError(409, "Conflict", f"The operation 'PATCH' on '{name}' is not allowed while the resource is "
                           f"in state '{rec['state']}'. Retry after the running operation finishes.")
        if "tags" in body:
            C.check_tags(body["tags"])
        state = rec["state"]
        rec["state"] = "Updating"

        def finish(fail):
            if "tags" in body:
                rec["body"]["tags"] = body["tags"]
            rec["state"] = state
            return self.render(rec)
        never = bool(self.take_fault("lro", *method_path))
        return self.new_op(COMP, rec["location"], polls, finish, never)

    # ------------------------------------------------------------------ lookups
    def vmss(self, rg, name):
        self.group(rg)
        rec = self.get(rg, VMSS_T, name)
        if rec is None:
            raise not_found(VMSS_T, name, rg)
        return rec

    def vmss_instance(self, rg, name, iid):
        rec = self.vmss(rg, name)
        inst = rec["extra"].get("instances", {}).get(iid)
        if inst is None:
            raise ArmError(404, "NotFound", f"The entity was not found in this Azure location. Instance {iid} of "
                           f"{name}.")
        return rec, inst

    def ppg_users(self, ppg_id):
        return [r["id"] for r in self.of_type(VMSS_T)
                if ((r["body"].get("properties") or {}).get("proximityPlacementGroup") or {}).get("id", "").lower()
                == ppg_id.lower()]

    # ------------------------------------------------------------------ rendering
    def render_vmss(self, rec, props, expand):
        vp = props.get("virtualMachineProfile") or {}
        (vp.get("osProfile") or {}).pop("customData", None)
        (vp.get("osProfile") or {}).pop("adminPassword", None)
        if "userdata" not in (expand or "").lower():
            vp.pop("userData", None)
        props.update(uniqueId=rec["guid"], timeCreated=rec["created"])
        props.setdefault("orchestrationMode", "Uniform")
        props.setdefault("overprovision", True)
        props.setdefault("singlePlacementGroup", True)

    def render_ppg(self, rec, props):
        props.setdefault("proximityPlacementGroupType", "Standard")
        users = self.ppg_users(rec["id"])
        if users:
            props["virtualMachineScaleSets"] = [{"id": u} for u in users]

    def _nic_id(self, rec, inst, nic):
        return f"{rec['id']}/virtualMachines/{inst['id']}/networkInterfaces/{nic['name']}"

    def render_instance(self, rec, inst, expand=""):
        vp = copy.deepcopy(rec["body"]["properties"]["virtualMachineProfile"])
        osp, st = vp.get("osProfile") or {}, vp.get("storageProfile") or {}
        osd = st.get("osDisk") or {}
        disk = f"{rec['name']}_{inst['id']}_OsDisk_1_{inst['guid'].replace('-', '')}"
        props = {
            "latestModelApplied": True, "vmId": inst["guid"], "provisioningState": inst["state"],
            "timeCreated": inst["created"],
            "storageProfile": {"imageReference": {**(st.get("imageReference") or {}),
                                                  "exactVersion": (rec["extra"].get("image") or "/").rsplit("/", 1)[1]},
                               "osDisk": {"name": disk, "osType": "Linux", "createOption": "FromImage",
                                          "caching": osd.get("caching", "ReadWrite"),
                                          "diskSizeGB": osd.get("diskSizeGB") or 30,
                                          "managedDisk": {**(osd.get("managedDisk") or {}), "id": self.rid(
                                              rec["rg"], "Microsoft.Compute/disks", disk)}}},
            "osProfile": {"computerName": f"{osp.get('computerNamePrefix', '')}{_b36(int(inst['id']))}",
                          "adminUsername": osp.get("adminUsername"), "linuxConfiguration": osp.get("linuxConfiguration"),
                          "secrets": [], "allowExtensionOperations": True, "requireGuestProvisionSignal": True},
            "networkProfile": {"networkInterfaces": [{"id": self._nic_id(rec, inst, n)} for n in inst["nics"]]},
            "networkProfileConfiguration": {"networkInterfaceConfigurations": copy.deepcopy(
                (vp.get("networkProfile") or {}).get("networkInterfaceConfigurations") or [])},
        }
        if vp.get("diagnosticsProfile"):
            props["diagnosticsProfile"] = vp["diagnosticsProfile"]
        if "instanceview" in (expand or "").lower():
            props["instanceView"] = self.instance_view_of(rec, inst)
        return {"name": f"{rec['name']}_{inst['id']}", "id": f"{rec['id']}/virtualMachines/{inst['id']}",
                "type": VMSS_VM_T, "location": rec["location"], "instanceId": inst["id"],
                "sku": {"name": rec["extra"]["size"], "tier": "Standard"}, "properties": props}

    def instance_view_of(self, rec, inst):
        if inst["state"] == "Failed":
            err = inst["error"] or {"code": "AllocationFailed", "message": ALLOCATION_MESSAGES["AllocationFailed"]}
            statuses = [{"code": f"ProvisioningState/failed/{err['code']}", "level": "Error",
                         "displayStatus": "Provisioning failed", "message": err["message"]}]
        else:
            statuses = [{"code": f"ProvisioningState/{inst['state'].lower()}", "level": "Info",
                         "displayStatus": f"Provisioning {inst['state'].lower()}",
                         "time": inst.get("end") or inst["created"]}]
        if inst["power"]:
            statuses.append({"code": f"PowerState/{inst['power']}", "level": "Info",
                             "displayStatus": f"VM {inst['power']}"})
        view = {"platformUpdateDomain": 0, "platformFaultDomain": 0, "statuses": statuses,
                "computerName": f"{(rec['body']['properties']['virtualMachineProfile'].get('osProfile') or {}).get('computerNamePrefix', '')}{_b36(int(inst['id']))}"}
        if inst["power"] == "running":
            view["vmAgent"] = {"vmAgentVersion": "2.13.1.1", "statuses": [
                {"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Ready",
                 "message": "Guest Agent is running"}]}
        return view

    def render_vmss_nics(self, rec):
        out = []
        for inst in rec["extra"].get("instances", {}).values():
            for n in inst["nics"]:
                nid = self._nic_id(rec, inst, n)
                ipcs = []
                for c in n["ipcs"]:
                    ipc = {"name": c["name"], "id": f"{nid}/ipConfigurations/{c['name']}", "properties": {
                        "provisioningState": "Succeeded", "primary": c["primary"], "subnet": {"id": c["subnet"]},
                        "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4"}}
                    if c["private"]:
                        ipc["properties"]["privateIPAddress"] = c["private"]
                    if c["public"]:
                        ipc["properties"]["publicIPAddress"] = {"id": f"{ipc['id']}/publicIPAddresses/{c['pip_name']}"}
                    ipcs.append(ipc)
                props = {"provisioningState": "Succeeded", "ipConfigurations": ipcs, "primary": n["primary"],
                         "virtualMachine": {"id": f"{rec['id']}/virtualMachines/{inst['id']}"},
                         "enableAcceleratedNetworking": False, "enableIPForwarding": False, "nicType": "Standard"}
                if n["nsg"]:
                    props["networkSecurityGroup"] = {"id": n["nsg"]["id"]}
                out.append({"name": n["name"], "id": nid, "location": rec["location"],
                            "etag": f'W/"{inst["guid"]}"', "properties": props})
        return out

    def render_vmss_pips(self, rec):
        out = []
        for nic in self.render_vmss_nics(rec):
            inst = rec["extra"]["instances"][nic["properties"]["virtualMachine"]["id"].rsplit("/", 1)[1]]
            by_name = {c["name"]: c for n in inst["nics"] for c in n["ipcs"]}
            for ipc in nic["properties"]["ipConfigurations"]:
                pip = ipc["properties"].get("publicIPAddress")
                if pip:
                    out.append({"name": pip["id"].rsplit("/", 1)[1], "id": pip["id"], "location": rec["location"],
                                "sku": {"name": "Standard", "tier": "Regional"}, "properties": {
                                    "provisioningState": "Succeeded", "ipAddress": by_name[ipc["name"]]["public"],
                                    "publicIPAddressVersion": "IPv4", "publicIPAllocationMethod": "Static",
                                    "idleTimeoutInMinutes": 4, "ipConfiguration": {"id": ipc["id"]}}})
        return out

    # ------------------------------------------------------------------ actions
    def vmss_power(self, rg, name, action, body, polls, method_path):
        rec = self.vmss(rg, name)
        ids = V.validate(VS.INSTANCE_IDS, body or {}).get("instanceIds")
        insts = rec["extra"].get("instances", {})
        if rec["state"] != "Succeeded" and not ids:
            raise ArmError(409, "OperationNotAllowed", f"Operation '{action}' is not allowed on scale set '{name}' "
                           f"since it is in provisioning state '{rec['state']}'.")
        for i in ids or []:
            if i not in insts:
                raise V.invalid("instanceIds", f"The provided instanceId {i} is not an active Virtual Machine Scale "
                                "Set VM instanceId.")
        target = {"start": "running", "poweroff": "stopped", "deallocate": "deallocated"}[action]

        def finish(fail):
            for i in ids or list(insts):
                if insts[i]["state"] == "Succeeded":  # an update: it sets the ProvisioningState time, as in Azure
                    insts[i]["power"], insts[i]["end"] = target, now()
        never = bool(self.take_fault("lro", *method_path))
        return self.new_op(COMP, rec["location"], polls, finish, never)

    def vmss_boot_diagnostics(self, rg, name, iid, base):
        rec, inst = self.vmss_instance(rg, name, iid)
        bd = (rec["body"]["properties"]["virtualMachineProfile"].get("diagnosticsProfile") or {}).get(
            "bootDiagnostics") or {}
        if not bd.get("enabled"):
            raise ArmError(409, "OperationNotAllowed", f"Boot diagnostics is not enabled for scale set '{name}'.")
        url = f"{base}/bootdiagnostics/{inst['guid']}/{name}_{iid}.%s?sv=2025-01-05&sr=b&sp=r&sig=emulated"
        return {"consoleScreenshotBlobUri": url % "screenshot.bmp", "serialConsoleLogBlobUri": url % "serialconsole.log"}

    def vmss_serial_log(self, guid):
        """The planted serial log (emu.set_serial_log(rg, "NAME_ID", text)) of the instance ``guid``; None: none."""
        for rec in self.of_type(VMSS_T):
            for iid, inst in rec["extra"].get("instances", {}).items():
                if inst["guid"] == guid:
                    return self.serial_logs.get((rec["rg"], f"{rec['name']}_{iid}".lower()), "")
        return None

    def vmss_run_command(self, rg, name, iid, body, polls, method_path):
        rec, inst = self.vmss_instance(rg, name, iid)
        key = f"{name}_{iid}"
        fake = {"id": rec["id"], "location": rec["location"], "state": inst["state"],
                "extra": {"power": inst["power"], "run_op": inst.get("run_op")}}
        op = self.run_command_on(fake, rg, key, body, polls, method_path)
        inst["run_op"] = op.id
        return op
