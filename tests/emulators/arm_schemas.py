"""The ARM request-body schemas the emulator validates against (arm_validate.validate): a hand-written subset
of the resource types trainvm creates; see arm_validate.py for how they are applied."""
from __future__ import annotations

from .arm_validate import ANY, BOOL, INT, NUM, STR, Arr, Enum, MapOf, Obj

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
