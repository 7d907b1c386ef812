"""Request-body validation for the ARM emulator (tests/emulators/arm.py).

A hand-written schema subset of the ARM resource types trainvm creates, covering every field that
azure-mgmt-compute 39 / -network 33 / -resource 26 put on the wire for them (recorded in
shared/knowledge/cloud-sdks.md 2.3) plus the optional fields a provider plausibly sets. Anything
else is rejected, so a typo or an unsupported field fails here instead of on the real cloud.

Behaviour, and where it departs from ARM:
- unknown member -> 400 InvalidRequestContent naming the JSON path (ARM's own wording). ARM (JSON.NET)
  matches member names case-insensitively; the emulator insists on the documented casing.
- wrong JSON type -> 400 InvalidRequestContent; enum values are matched case-insensitively as ARM does.
- read-only members (id, name, type, etag, properties.provisioningState, vmId, ipAddress, ...) are
  IGNORED, as the resource providers do; each one dropped is listed in the recorded request's `ignored`.
- a reference ({"id": ...}) may carry the other members of the referenced resource (the SDK sends a
  whole Subnet model when given one); only `id` is used.
- semantic checks (customData size, Spot-only fields, CIDRs, tags, names...) follow the real error
  codes where known; see check_* below.
"""
from __future__ import annotations

import base64
import binascii
import ipaddress
import re

STR, INT, BOOL, NUM, ANY = "string", "integer", "boolean", "number", "any"
_NET_TYPES = {STR: "System.String", INT: "System.Int32", BOOL: "System.Boolean", NUM: "System.Double"}


class ArmError(Exception):
    """An ARM error response: {"error": {"code", "message", "target"?, "details"?}}."""

    def __init__(self, status, code, message, target=None, details=None, headers=None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.target, self.details, self.headers = target, details, headers or {}

    def body(self):
        err = {"code": self.code, "message": self.message}
        if self.target:
            err["target"] = self.target
        if self.details:
            err["details"] = self.details
        return {"error": err}


class Obj:
    def __init__(self, name, fields, required=(), readonly=(), ref=False):
        self.name, self.fields, self.required = name, fields, tuple(required)
        self.readonly, self.ref = set(readonly), ref


class Arr:
    def __init__(self, item):
        self.item = item


class Enum:
    def __init__(self, name, *values):
        self.name, self.values = name, values


class MapOf:
    def __init__(self, value):
        self.value = value


def _bad_content(path, detail):
    return ArmError(400, "InvalidRequestContent", "The request content was invalid and could not be "
                    f"deserialized: '{detail} Path '{path}', line 1, position 1.'")


def required_missing(path):
    leaf = path.split(".")[-1]
    return ArmError(400, "InvalidParameter", f"Required parameter '{path}' is missing (null).", target=leaf)


def validate(spec, value, path="", ignored=None):
    """Return `value` with read-only members removed; raise ArmError on the first violation."""
    ignored = [] if ignored is None else ignored
    if value is None or spec == ANY:
        return value
    if isinstance(spec, Obj):
        if not isinstance(value, dict):
            raise _bad_content(path, f"Error converting value {value!r} to type '{spec.name}'.")
        out = {}
        for key, val in value.items():
            sub = f"{path}.{key}" if path else key
            if key in spec.readonly or (spec.ref and key != "id"):
                ignored.append(sub)
                continue
            if key not in spec.fields:
                raise _bad_content(sub, f"Could not find member '{key}' on object of type '{spec.name}'.")
            out[key] = validate(spec.fields[key], val, sub, ignored)
        for key in spec.required:
            if out.get(key) in (None, "", []):
                raise required_missing(f"{path}.{key}" if path else key)
        return out
    if isinstance(spec, Arr):
        if not isinstance(value, list):
            raise _bad_content(path, f"Cannot deserialize the current JSON value into type 'List'.")
        return [validate(spec.item, v, f"{path}[{i}]", ignored) for i, v in enumerate(value)]
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise _bad_content(path, "Cannot deserialize the current JSON value into type 'Dictionary'.")
        return {k: validate(spec.value, v, f"{path}.{k}", ignored) for k, v in value.items()}
    if isinstance(spec, Enum):
        if not isinstance(value, str) or value.lower() not in {v.lower() for v in spec.values}:
            raise _bad_content(path, f"Error converting value {value!r} to type '{spec.name}'. "
                               f"Allowed values: {', '.join(spec.values)}.")
        return value
    ok = {STR: isinstance(value, str), BOOL: isinstance(value, bool),
          INT: isinstance(value, int) and not isinstance(value, bool),
          NUM: isinstance(value, (int, float)) and not isinstance(value, bool)}[spec]
    if not ok:
        raise _bad_content(path, f"Error converting value {value!r} to type '{_NET_TYPES[spec]}'.")
    return value


# --------------------------------------------------------------------------- schemas
REF = Obj("SubResource", {"id": STR}, required=("id",), ref=True)
TAGS = MapOf(STR)
_TOP_RO = ("id", "name", "type", "etag", "systemData", "managedBy")
_PS_RO = ("provisioningState", "resourceGuid")

RESOURCE_GROUP = Obj("ResourceGroup", {
    "location": STR, "tags": TAGS,
    "properties": Obj("ResourceGroupProperties", {}, readonly=("provisioningState",)),
}, readonly=_TOP_RO)

SUBNET = Obj("Subnet", {
    "name": STR,
    "properties": Obj("SubnetPropertiesFormat", {
        "addressPrefix": STR, "addressPrefixes": Arr(STR), "networkSecurityGroup": REF,
        "routeTable": REF, "natGateway": REF, "defaultOutboundAccess": BOOL, "delegations": Arr(ANY),
        "serviceEndpoints": Arr(Obj("ServiceEndpointPropertiesFormat", {"service": STR, "locations": Arr(STR)})),
        "privateEndpointNetworkPolicies": Enum("VirtualNetworkPrivateEndpointNetworkPolicies", "Enabled",
                                               "Disabled", "NetworkSecurityGroupEnabled", "RouteTableEnabled"),
        "privateLinkServiceNetworkPolicies": Enum("VirtualNetworkPrivateLinkServiceNetworkPolicies",
                                                  "Enabled", "Disabled"),
    }, readonly=_PS_RO + ("ipConfigurations", "purpose")),
}, readonly=("id", "etag", "type"))

VIRTUAL_NETWORK = Obj("VirtualNetwork", {
    "location": STR, "tags": TAGS,
    "properties": Obj("VirtualNetworkPropertiesFormat", {
        "addressSpace": Obj("AddressSpace", {"addressPrefixes": Arr(STR)}),
        "subnets": Arr(SUBNET), "dhcpOptions": Obj("DhcpOptions", {"dnsServers": Arr(STR)}),
        "enableDdosProtection": BOOL, "enableVmProtection": BOOL, "flowTimeoutInMinutes": INT,
    }, readonly=_PS_RO + ("virtualNetworkPeerings",)),
}, readonly=_TOP_RO)

SECURITY_RULE = Obj("SecurityRule", {
    "name": STR,
    "properties": Obj("SecurityRulePropertiesFormat", {
        "description": STR, "priority": INT,
        "protocol": Enum("SecurityRuleProtocol", "Tcp", "Udp", "Icmp", "Esp", "Ah", "*"),
        "access": Enum("SecurityRuleAccess", "Allow", "Deny"),
        "direction": Enum("SecurityRuleDirection", "Inbound", "Outbound"),
        "sourcePortRange": STR, "sourcePortRanges": Arr(STR),
        "destinationPortRange": STR, "destinationPortRanges": Arr(STR),
        "sourceAddressPrefix": STR, "sourceAddressPrefixes": Arr(STR),
        "destinationAddressPrefix": STR, "destinationAddressPrefixes": Arr(STR),
        "sourceApplicationSecurityGroups": Arr(REF), "destinationApplicationSecurityGroups": Arr(REF),
    }, readonly=("provisioningState",)),
}, readonly=("id", "etag", "type"))

NETWORK_SECURITY_GROUP = Obj("NetworkSecurityGroup", {
    "location": STR, "tags": TAGS,
    "properties": Obj("NetworkSecurityGroupPropertiesFormat", {
        "securityRules": Arr(SECURITY_RULE), "flushConnection": BOOL,
    }, readonly=_PS_RO + ("defaultSecurityRules", "networkInterfaces", "subnets", "flowLogs")),
}, readonly=_TOP_RO)

PIP_SKU = Obj("PublicIPAddressSku", {"name": Enum("PublicIPAddressSkuName", "Basic", "Standard", "StandardV2"),
                                     "tier": Enum("PublicIPAddressSkuTier", "Regional", "Global")})
PIP_DNS = Obj("PublicIPAddressDnsSettings", {
    "domainNameLabel": STR, "reverseFqdn": STR,
    "domainNameLabelScope": Enum("PublicIpAddressDnsSettingsDomainNameLabelScope", "TenantReuse",
                                 "SubscriptionReuse", "ResourceGroupReuse", "NoReuse")}, readonly=("fqdn",))
ALLOC = Enum("IPAllocationMethod", "Static", "Dynamic")
IPVER = Enum("IPVersion", "IPv4", "IPv6")
DELETE_OPTION = Enum("DeleteOptions", "Delete", "Detach")

PUBLIC_IP = Obj("PublicIPAddress", {
    "location": STR, "tags": TAGS, "sku": PIP_SKU, "zones": Arr(STR),
    "properties": Obj("PublicIPAddressPropertiesFormat", {
        "publicIPAllocationMethod": ALLOC, "publicIPAddressVersion": IPVER, "idleTimeoutInMinutes": INT,
        "dnsSettings": PIP_DNS, "deleteOption": DELETE_OPTION, "publicIPPrefix": REF,
        "ipTags": Arr(Obj("IpTag", {"ipTagType": STR, "tag": STR})),
    }, readonly=_PS_RO + ("ipAddress", "ipConfiguration", "natGateway", "linkedPublicIPAddress")),
}, readonly=_TOP_RO)

NIC_IPCONFIG = Obj("NetworkInterfaceIPConfiguration", {
    "name": STR,
    "properties": Obj("NetworkInterfaceIPConfigurationPropertiesFormat", {
        "subnet": REF, "publicIPAddress": REF, "primary": BOOL, "privateIPAddress": STR,
        "privateIPAllocationMethod": ALLOC, "privateIPAddressVersion": IPVER,
        "applicationSecurityGroups": Arr(REF), "loadBalancerBackendAddressPools": Arr(REF),
    }, readonly=("provisioningState", "privateIPAddressPrefixLength")),
}, required=("name",), readonly=("id", "etag", "type"))

NETWORK_INTERFACE = Obj("NetworkInterface", {
    "location": STR, "tags": TAGS,
    "properties": Obj("NetworkInterfacePropertiesFormat", {
        "ipConfigurations": Arr(NIC_IPCONFIG), "networkSecurityGroup": REF,
        "enableAcceleratedNetworking": BOOL, "enableIPForwarding": BOOL, "disableTcpStateTracking": BOOL,
        "dnsSettings": Obj("NetworkInterfaceDnsSettings", {"dnsServers": Arr(STR), "internalDnsNameLabel": STR},
                           readonly=("appliedDnsServers", "internalFqdn", "internalDomainNameSuffix")),
        "nicType": Enum("NetworkInterfaceNicType", "Standard", "Elastic"),
    }, readonly=_PS_RO + ("virtualMachine", "macAddress", "primary", "vnetEncryptionSupported",
                          "hostedWorkloads", "tapConfigurations", "privateEndpoint", "dscpConfiguration")),
}, readonly=_TOP_RO)

STORAGE_TYPES = ("Standard_LRS", "Premium_LRS", "StandardSSD_LRS", "UltraSSD_LRS", "Premium_ZRS",
                 "StandardSSD_ZRS", "PremiumV2_LRS")
CACHING = Enum("CachingTypes", "None", "ReadOnly", "ReadWrite")
MANAGED_DISK = Obj("ManagedDiskParameters", {
    "id": STR, "storageAccountType": Enum("StorageAccountTypes", *STORAGE_TYPES), "diskEncryptionSet": REF,
    "securityProfile": Obj("VMDiskSecurityProfile", {"securityEncryptionType": STR, "diskEncryptionSet": REF})})
OS_DISK = Obj("OSDisk", {
    "name": STR, "osType": Enum("OperatingSystemTypes", "Linux", "Windows"), "caching": CACHING,
    "createOption": Enum("DiskCreateOptionTypes", "FromImage", "Empty", "Attach", "Copy", "Restore"),
    "diskSizeGB": INT, "deleteOption": Enum("DiskDeleteOptionTypes", "Delete", "Detach"),
    "managedDisk": MANAGED_DISK, "writeAcceleratorEnabled": BOOL,
    "diffDiskSettings": Obj("DiffDiskSettings", {"option": Enum("DiffDiskOptions", "Local"), "placement": Enum(
        "DiffDiskPlacement", "CacheDisk", "ResourceDisk", "NvmeDisk")}),
}, required=("createOption",))
DATA_DISK = Obj("DataDisk", {
    "lun": INT, "name": STR, "caching": CACHING, "diskSizeGB": INT, "managedDisk": MANAGED_DISK,
    "createOption": Enum("DiskCreateOptionTypes", "FromImage", "Empty", "Attach", "Copy", "Restore"),
    "deleteOption": Enum("DiskDeleteOptionTypes", "Delete", "Detach"), "writeAcceleratorEnabled": BOOL,
}, required=("lun", "createOption"), readonly=("diskIOPSReadWrite", "diskMBpsReadWrite"))
IMAGE_REF = Obj("ImageReference", {
    "publisher": STR, "offer": STR, "sku": STR, "version": STR, "id": STR,
    "sharedGalleryImageId": STR, "communityGalleryImageId": STR}, readonly=("exactVersion",))
LINUX_CONFIG = Obj("LinuxConfiguration", {
    "disablePasswordAuthentication": BOOL, "provisionVMAgent": BOOL, "enableVMAgentPlatformUpdates": BOOL,
    "ssh": Obj("SshConfiguration", {"publicKeys": Arr(Obj("SshPublicKey", {"path": STR, "keyData": STR}))}),
    "patchSettings": Obj("LinuxPatchSettings", {
        "patchMode": Enum("LinuxVMGuestPatchMode", "ImageDefault", "AutomaticByPlatform"),
        "assessmentMode": Enum("LinuxPatchAssessmentMode", "ImageDefault", "AutomaticByPlatform")}),
})
OS_PROFILE = Obj("OSProfile", {
    "computerName": STR, "adminUsername": STR, "adminPassword": STR, "customData": STR,
    "linuxConfiguration": LINUX_CONFIG, "allowExtensionOperations": BOOL, "requireGuestProvisionSignal": BOOL,
    "secrets": Arr(ANY)})
PIP_CONFIG = Obj("VirtualMachinePublicIPAddressConfiguration", {
    "name": STR, "sku": PIP_SKU,
    "properties": Obj("VirtualMachinePublicIPAddressConfigurationProperties", {
        "idleTimeoutInMinutes": INT, "deleteOption": DELETE_OPTION, "publicIPAllocationMethod": ALLOC,
        "publicIPAddressVersion": IPVER, "dnsSettings": Obj("VirtualMachinePublicIPAddressDnsSettingsConfiguration",
                                                             {"domainNameLabel": STR})})}, required=("name",))
NIC_CONFIG = Obj("VirtualMachineNetworkInterfaceConfiguration", {
    "name": STR,
    "properties": Obj("VirtualMachineNetworkInterfaceConfigurationProperties", {
        "primary": BOOL, "deleteOption": DELETE_OPTION, "enableAcceleratedNetworking": BOOL,
        "enableIPForwarding": BOOL, "networkSecurityGroup": REF, "disableTcpStateTracking": BOOL,
        "dnsSettings": Obj("VirtualMachineNetworkInterfaceDnsSettingsConfiguration", {"dnsServers": Arr(STR)}),
        "ipConfigurations": Arr(Obj("VirtualMachineNetworkInterfaceIPConfiguration", {
            "name": STR,
            "properties": Obj("VirtualMachineNetworkInterfaceIPConfigurationProperties", {
                "primary": BOOL, "subnet": REF, "privateIPAddressVersion": IPVER,
                "publicIPAddressConfiguration": PIP_CONFIG, "applicationSecurityGroups": Arr(REF)})},
            required=("name",)))})}, required=("name",))
VIRTUAL_MACHINE = Obj("VirtualMachine", {
    "location": STR, "tags": TAGS, "zones": Arr(STR),
    "identity": Obj("VirtualMachineIdentity", {"type": Enum(
        "ResourceIdentityType", "SystemAssigned", "UserAssigned", "SystemAssigned, UserAssigned", "None"),
        "userAssignedIdentities": MapOf(ANY)}, readonly=("principalId", "tenantId")),
    "properties": Obj("VirtualMachineProperties", {
        "hardwareProfile": Obj("HardwareProfile", {"vmSize": STR}, required=("vmSize",)),
        "storageProfile": Obj("StorageProfile", {
            "imageReference": IMAGE_REF, "osDisk": OS_DISK, "dataDisks": Arr(DATA_DISK),
            "diskControllerType": Enum("DiskControllerTypes", "SCSI", "NVMe")}),
        "osProfile": OS_PROFILE,
        "networkProfile": Obj("NetworkProfile", {
            "networkInterfaces": Arr(Obj("NetworkInterfaceReference", {
                "id": STR, "properties": Obj("NetworkInterfaceReferenceProperties", {
                    "primary": BOOL, "deleteOption": DELETE_OPTION})}, required=("id",))),
            "networkApiVersion": Enum("NetworkApiVersion", "2020-11-01", "2022-11-01"),
            "networkInterfaceConfigurations": Arr(NIC_CONFIG)}),
        "securityProfile": Obj("SecurityProfile", {
            "securityType": Enum("SecurityTypes", "TrustedLaunch", "ConfidentialVM", "Standard"),
            "encryptionAtHost": BOOL,
            "uefiSettings": Obj("UefiSettings", {"secureBootEnabled": BOOL, "vTpmEnabled": BOOL})}),
        "diagnosticsProfile": Obj("DiagnosticsProfile", {
            "bootDiagnostics": Obj("BootDiagnostics", {"enabled": BOOL, "storageUri": STR})}),
        "additionalCapabilities": Obj("AdditionalCapabilities", {"ultraSSDEnabled": BOOL, "hibernationEnabled": BOOL}),
        "priority": Enum("VirtualMachinePriorityTypes", "Regular", "Low", "Spot"),
        "evictionPolicy": Enum("VirtualMachineEvictionPolicyTypes", "Deallocate", "Delete"),
        "billingProfile": Obj("BillingProfile", {"maxPrice": NUM}),
        "userData": STR, "licenseType": STR, "availabilitySet": REF, "proximityPlacementGroup": REF,
        "extensionsTimeBudget": STR,
    }, readonly=("provisioningState", "vmId", "instanceView", "timeCreated")),
}, readonly=_TOP_RO + ("resources",))

RUN_COMMAND_INPUT = Obj("RunCommandInput", {
    "commandId": STR, "script": Arr(STR),
    "parameters": Arr(Obj("RunCommandInputParameter", {"name": STR, "value": STR}, required=("name", "value")))},
    required=("commandId",))

SCHEMAS = {
    "Microsoft.Network/virtualNetworks": VIRTUAL_NETWORK,
    "Microsoft.Network/networkSecurityGroups": NETWORK_SECURITY_GROUP,
    "Microsoft.Network/publicIPAddresses": PUBLIC_IP,
    "Microsoft.Network/networkInterfaces": NETWORK_INTERFACE,
    "Microsoft.Compute/virtualMachines": VIRTUAL_MACHINE,
}

# --------------------------------------------------------------------------- semantic checks
CUSTOM_DATA_MAX = 87380
RESERVED_USERS = {"administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1",
                  "123", "a", "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest",
                  "john", "owner", "root", "server", "sql", "support", "support_388945a0", "sys", "test2",
                  "test3", "user4", "user5"}
_NAME_RE = {
    "resourcegroups": (re.compile(r"^[-\w._()]{0,89}[-\w_()]$"), 90),
    "Microsoft.Network": (re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$"), 80),
    "Microsoft.Compute/virtualMachines": (re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_])?$"), 64),
}


def invalid(target, message, code="InvalidParameter", status=400):
    return ArmError(status, code, message, target=target)


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
        raise invalid("adminUsername", f"The Admin Username specified is not allowed.")
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
