"""Semantic checks of ARM request bodies that the schemas (arm_schemas.py) cannot express: names, tags,
customData, CIDRs, NSG rules, public IPs and VMs, following the real error codes where known."""
from __future__ import annotations

import base64
import binascii
import ipaddress
import re

from .arm_validate import ArmError, invalid, required_missing

CUSTOM_DATA_MAX = 87380
RESERVED_USERS = {"administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1",
                  "123", "a", "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest",
                  "john", "owner", "root", "server", "sql", "support", "support_388945a0", "sys", "test2",
                  "test3", "user4", "user5"}
_NAME_RE = {
    "resourcegroups": (re.compile(r"^[-\w._()]{0,89}[-\w_()]$"), 90),
    "Microsoft.Network": (re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$"), 80),
    "Microsoft.Compute/virtualMachines": (re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_])?$"), 64),
    "Microsoft.Compute/virtualMachineScaleSets": (re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_])?$"),
                                                  64),
    "Microsoft.Compute/proximityPlacementGroups": (re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$"),
                                                   80),
}


def check_name(kind, name):
    pattern, limit = _NAME_RE["Microsoft.Network" if kind.startswith("Microsoft.Network") else kind]
    if not pattern.match(name):
        if kind == "resourcegroups":
            raise ArmError(400, "InvalidResourceGroup", f"The provided resource group name '{name}' has these "
                           "invalid characters or is too long (max 90).")
        code = "InvalidResourceName" if kind.startswith("Microsoft.Network") else "InvalidParameter"
        raise invalid("name", f"Resource name {name} is invalid. The name can be up to {limit} characters long. "
                      "It must begin with a word character, and it must end with a word character or with '_'. "
                      "The name may contain word characters or '.', '-', '_'.", code)


def check_tags(tags):
    if not tags:
        return
    if len(tags) > 50:
        raise ArmError(400, "InvalidTag", "The number of tags (%d) exceeds the limit of 50." % len(tags))
    for k, v in tags.items():
        if re.search(r"[<>%&\\?/]", k):
            raise ArmError(400, "InvalidTagNameCharacters", f"The tag names '{k}' have reserved characters "
                           "'<,>,%,&,\\,?,/' or control characters.")
        if len(k) > 512 or len(v or "") > 256:
            raise ArmError(400, "InvalidTag", f"The tag '{k}' has a name longer than 512 or a value longer "
                           "than 256 characters.")


def _b64(value, target, label):
    try:
        ok = len(value) % 4 == 0 and base64.b64decode(value, validate=True) is not None
    except (binascii.Error, ValueError):
        ok = False
    if not ok or len(value) > CUSTOM_DATA_MAX:
        raise invalid(target, f"{label} must be in Base64 encoding and with a maximum length of "
                      f"{CUSTOM_DATA_MAX} characters.")


def cidr(value, target, code):
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ArmError(400, code, f"Address prefix {value} is not a valid CIDR ({target}).", target=target)


_TAGS = {"*", "internet", "virtualnetwork", "azureloadbalancer", "any"}


def check_nsg(props):
    seen = {}
    for i, rule in enumerate(props.get("securityRules") or []):
        name, rp = rule.get("name"), rule.get("properties") or {}
        details = [f"Required property '{k}' not found in JSON. Path 'properties.securityRules[{i}].properties'."
                   for k in ("priority", "protocol", "access", "direction") if rp.get(k) is None]
        if not name or details:
            raise ArmError(400, "InvalidRequestFormat", "Cannot parse the request.",
                           details=[{"code": "MissingJsonProperty", "message": d} for d in details or ["name"]])
        if not 100 <= rp["priority"] <= 4096:
            raise ArmError(400, "SecurityRuleInvalidPriority", f"Security rule {name} has invalid priority "
                           f"{rp['priority']}. Value provided: {rp['priority']} Allowed range 100-4096.")
        key = (rp["priority"], rp["direction"].lower())
        if key in seen:
            raise ArmError(400, "SecurityRuleConflict", f"Security rule {name} conflicts with rule {seen[key]}. "
                           "Rules cannot have the same Priority and Direction.")
        seen[key] = name
        for fld in ("sourceAddressPrefix", "destinationAddressPrefix"):
            for p in ([rp[fld]] if rp.get(fld) else []) + list(rp.get(fld + "es") or []):
                if p.lower() not in _TAGS and not re.fullmatch(r"[A-Za-z][A-Za-z0-9.]+", p):
                    try:
                        ipaddress.ip_network(p, strict=False)
                    except ValueError:
                        raise ArmError(400, "SecurityRuleInvalidAddressPrefix", f"Security rule {name} has "
                                       f"invalid Address prefix. Value provided: {p}")
        for fld in ("sourcePortRange", "destinationPortRange"):
            for p in ([rp[fld]] if rp.get(fld) else []) + list(rp.get(fld + "s") or []):
                m = re.fullmatch(r"(\d+)(?:-(\d+))?", p)
                if p != "*" and not (m and 0 <= int(m[1]) <= int(m[2] or m[1]) <= 65535):
                    raise ArmError(400, "SecurityRuleInvalidPortRange", f"Security rule has invalid Port "
                                   f"range. Value provided: {p}. Value should be an integer OR integer range "
                                   "with '-' delimiter. Valid range 0-65535.")
        if not (rp.get("sourceAddressPrefix") or rp.get("sourceAddressPrefixes")) or \
                not (rp.get("destinationPortRange") or rp.get("destinationPortRanges")):
            raise ArmError(400, "SecurityRuleParameterContainsUnsupportedValue",
                           f"Security rule {name} must specify source address prefix(es) and destination "
                           "port range(s).")


def check_vnet(props, name):
    space = [cidr(p, "addressSpace.addressPrefixes", "InvalidAddressPrefixFormat")
             for p in (props.get("addressSpace") or {}).get("addressPrefixes") or []]
    nets = []
    for sn in props.get("subnets") or []:
        sp = sn.get("properties") or {}
        for p in ([sp["addressPrefix"]] if sp.get("addressPrefix") else []) + list(sp.get("addressPrefixes") or []):
            try:
                net = ipaddress.ip_network(p, strict=True)
            except ValueError:
                raise ArmError(400, "NetcfgInvalidSubnet", f"Subnet '{sn.get('name')}' is not valid in virtual "
                               f"network '{name}'.")
            if not any(net.version == s.version and net.subnet_of(s) for s in space):
                raise ArmError(400, "NetcfgSubnetRangeOutsideVnet", f"Subnet '{sn.get('name')}' is not valid "
                               f"because its IP address range is outside the IP address range of virtual network "
                               f"'{name}'.")
            for other_name, other in nets:
                if net.overlaps(other):
                    raise ArmError(400, "NetcfgSubnetRangesOverlap", f"Subnet '{sn.get('name')}' is not valid in "
                                   f"virtual network '{name}' because it overlaps with subnet '{other_name}'.")
            nets.append((sn.get("name"), net))


def check_public_ip(body, rid):
    sku = ((body.get("sku") or {}).get("name") or "Basic").lower()
    props = body.get("properties") or {}
    if sku == "basic":
        raise ArmError(400, "IPv4BasicSkuPublicIpCountLimitReached", "Cannot create more than 0 IPv4 Basic SKU "
                       "public IP addresses for this subscription in this region.")
    if (props.get("publicIPAllocationMethod") or "Dynamic").lower() != "static":
        raise ArmError(400, "StandardSkuPublicIPAddressesMustBeStatic", f"Standard sku publicIp {rid} must have "
                       "AllocationMethod set to Static.")
    if not 4 <= props.get("idleTimeoutInMinutes", 4) <= 30:
        raise invalid("idleTimeoutInMinutes", "The idle timeout must be between 4 and 30 minutes.")
    for z in body.get("zones") or []:
        if z not in ("1", "2", "3"):
            raise invalid("zones", f"The zone '{z}' is not a valid availability zone.")


def premium_capable(size):
    m = re.match(r"^Standard_([A-Z]+)(\d+)(?:-\d+)?([a-z]*)", size)
    return bool(m) and ("s" in m[3] or m[1].endswith("S"))


def check_vm(body, name):
    """Stateless VM checks (the emulator checks references, images and updates itself)."""
    p = body.get("properties") or {}
    hw, st, osp, net = (p.get(k) for k in ("hardwareProfile", "storageProfile", "osProfile", "networkProfile"))
    for path, part in (("properties.hardwareProfile", hw), ("properties.storageProfile", st),
                       ("properties.networkProfile", net)):
        if not part:
            raise required_missing(path)
    size = hw["vmSize"]
    if not re.fullmatch(r"(Standard|Basic)_[A-Za-z0-9_-]+", size):
        raise invalid("vmSize", f"The value {size} provided for the VM size is not valid. The valid sizes in "
                      "the current region are: ... (truncated by the emulator).")
    zones = body.get("zones") or []
    if len(zones) > 1 or any(z not in ("1", "2", "3") for z in zones):
        raise invalid("zones", f"The zones {zones} are not valid: a virtual machine takes one of '1', '2', '3'.")
    prio = (p.get("priority") or "Regular").lower()
    if prio == "low":
        raise invalid("priority", "Priority 'Low' is only supported for virtual machine scale sets; use 'Spot'.")
    if p.get("evictionPolicy") and prio != "spot":
        raise invalid("evictionPolicy", "Eviction policy can be set only on Azure Spot Virtual Machines.")
    if p.get("billingProfile") and prio != "spot":
        raise invalid("billingProfile", "Max price can be set only on Azure Spot Virtual Machines.")
    max_price = (p.get("billingProfile") or {}).get("maxPrice")
    if max_price is not None and max_price != -1 and max_price <= 0:
        raise invalid("billingProfile.maxPrice", f"Max price {max_price} is invalid: use -1 or a price above 0.")
    os_disk = st.get("osDisk") or {}
    if os_disk.get("createOption", "").lower() == "fromimage" and not st.get("imageReference"):
        raise required_missing("properties.storageProfile.imageReference")
    if os_disk.get("diskSizeGB") is not None and not 30 <= os_disk["diskSizeGB"] <= 4095:
        raise invalid("osDisk.diskSizeGB", f"The specified disk size {os_disk['diskSizeGB']} GB is outside "
                      "the range allowed for OS disks (the image's size, 30 GB, to 4095 GB).")
    sat = ((os_disk.get("managedDisk") or {}).get("storageAccountType") or "").lower()
    if sat in ("ultrassd_lrs", "premiumv2_lrs"):
        raise invalid("osDisk.managedDisk.storageAccountType", f"Storage account type {sat} is not supported "
                      "for OS disks.")
    if sat.startswith("premium") and not premium_capable(size):
        raise ArmError(409, "OperationNotAllowed", f"Requested operation cannot be performed because the VM size "
                       f"{size} does not support the storage account type {sat} of disk "
                       f"'{os_disk.get('name') or name}'. Consider updating the VM to a size that supports "
                       "Premium storage.")
    if os_disk.get("diffDiskSettings") and (os_disk.get("caching") or "").lower() != "readonly":
        raise invalid("osDisk.caching", "Ephemeral OS disks support only ReadOnly caching.")
    luns = [d["lun"] for d in st.get("dataDisks") or []]
    if len(luns) != len(set(luns)):
        raise invalid("dataDisks", "Two data disks use the same LUN.")
    if osp:
        _check_os_profile(osp, name)
    elif os_disk.get("createOption", "").lower() == "fromimage":
        raise required_missing("properties.osProfile")
    if p.get("userData"):
        _b64(p["userData"], "userData", "User data")
    nics, cfgs = net.get("networkInterfaces") or [], net.get("networkInterfaceConfigurations") or []
    if not nics and not cfgs:
        raise required_missing("properties.networkProfile.networkInterfaces")
    if cfgs and not net.get("networkApiVersion"):
        raise invalid("networkProfile.networkApiVersion", "networkApiVersion must be specified when "
                      "networkInterfaceConfigurations are used.")
    items = nics + cfgs
    if len(items) > 1 and sum(1 for n in items if (n.get("properties") or {}).get("primary")) != 1:
        raise invalid("networkProfile", "Virtual machine with more than one network interface must have "
                      "exactly one primary network interface.")


def _check_os_profile(osp, name):
    user = osp.get("adminUsername")
    if not user:
        raise required_missing("properties.osProfile.adminUsername")
    if user.lower() in RESERVED_USERS or not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,63}", user, re.I):
        raise invalid("adminUsername", "The Admin Username specified is not allowed.")
    comp = osp.get("computerName") or name
    if len(comp) > 64 or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", comp):
        raise invalid("computerName", "Linux host name cannot exceed 64 characters in length or contain the "
                      "following characters: ` ~ ! @ # $ % ^ & * ( ) = + _ [ ] { } \\ | ; : ' \" , < > / ?.")
    if osp.get("customData") is not None:
        _b64(osp["customData"], "customData", "Custom data in OSProfile")
    lin = osp.get("linuxConfiguration") or {}
    keys = (lin.get("ssh") or {}).get("publicKeys") or []
    if lin.get("disablePasswordAuthentication") and not keys:
        raise invalid("linuxConfiguration", "Authentication using either SSH or by user name and password must "
                      "be enabled in Linux profile.")
    if not lin.get("disablePasswordAuthentication") and not osp.get("adminPassword") and not keys:
        raise required_missing("properties.osProfile.adminPassword")
    for k in keys:
        if k.get("path") != f"/home/{user}/.ssh/authorized_keys":
            raise invalid("linuxConfiguration.ssh.publicKeys.path", "The value of parameter "
                          "linuxConfiguration.ssh.publicKeys.path is invalid.")
        if not re.match(r"^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]+", k.get("keyData") or ""):
            raise invalid("linuxConfiguration.ssh.publicKeys.keyData", "The value of parameter "
                          "linuxConfiguration.ssh.publicKeys.keyData is invalid.")
