"""GET rendering of ARM resources: the JSON ARM returns for each stored record (read-only members,
back-references, default NSG rules, private IPs, the VM instance view). Mixed into arm_state.State."""
from __future__ import annotations

import copy
import ipaddress

from . import arm_checks as C
from .arm_catalog import DISK_T, NET, NIC_T, NSG_T, PIP_T, PPG_T, VM_T, VMSS_T, VNET_T

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


class RenderMixin:
    """GET rendering; mixed into arm_state.State (runs under ArmEmulator's lock)."""

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
        elif t == VMSS_T:
            self.render_vmss(rec, props, expand)
        elif t == PPG_T:
            self.render_ppg(rec, props)
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
        md.setdefault("storageAccountType", "Premium_LRS" if C.premium_capable(ex["size"]) else "Standard_LRS")
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
