"""Request-body schemas of the ARM emulator's group engine (arm_vmss.py): Microsoft.Compute/virtualMachineScaleSets
(Uniform and Flexible bodies; the members azure-mgmt-compute 39's VirtualMachineScaleSet* models put on the wire),
its PATCH (VirtualMachineScaleSetUpdate: tags and the members trainvm could send), the instance-id list of the
scale-set actions, and Microsoft.Compute/proximityPlacementGroups. Applied by arm_validate.validate as the
other schemas (arm_schemas.py): an unknown member is 400 InvalidRequestContent."""
from __future__ import annotations

from .arm_schemas import (
    _TOP_RO,
    CACHING,
    DELETE_OPTION,
    IMAGE_REF,
    IPVER,
    LINUX_CONFIG,
    PIP_SKU,
    REF,
    STORAGE_TYPES,
    TAGS,
)
from .arm_validate import ANY, BOOL, INT, NUM, STR, Arr, Enum, MapOf, Obj

API_REF = Obj("ApiEntityReference", {"id": STR}, required=("id",), ref=True)

VMSS_OS_PROFILE = Obj("VirtualMachineScaleSetOSProfile", {
    "computerNamePrefix": STR, "adminUsername": STR, "adminPassword": STR, "customData": STR,
    "linuxConfiguration": LINUX_CONFIG, "secrets": Arr(ANY), "allowExtensionOperations": BOOL,
    "requireGuestProvisionSignal": BOOL})
VMSS_MANAGED_DISK = Obj("VirtualMachineScaleSetManagedDiskParameters", {
    "storageAccountType": Enum("StorageAccountTypes", *STORAGE_TYPES), "diskEncryptionSet": REF,
    "securityProfile": Obj("VMDiskSecurityProfile", {"securityEncryptionType": STR, "diskEncryptionSet": REF})})
VMSS_OS_DISK = Obj("VirtualMachineScaleSetOSDisk", {
    "name": STR, "caching": CACHING, "writeAcceleratorEnabled": BOOL,
    "createOption": Enum("DiskCreateOptionTypes", "FromImage", "Empty", "Attach", "Copy", "Restore"),
    "diskSizeGB": INT, "osType": Enum("OperatingSystemTypes", "Linux", "Windows"), "managedDisk": VMSS_MANAGED_DISK,
    "deleteOption": Enum("DiskDeleteOptionTypes", "Delete", "Detach"),
    "diffDiskSettings": Obj("DiffDiskSettings", {"option": Enum("DiffDiskOptions", "Local"), "placement": Enum(
        "DiffDiskPlacement", "CacheDisk", "ResourceDisk", "NvmeDisk")}),
}, required=("createOption",))
VMSS_PIP_CONFIG = Obj("VirtualMachineScaleSetPublicIPAddressConfiguration", {
    "name": STR, "sku": PIP_SKU, "tags": TAGS,
    "properties": Obj("VirtualMachineScaleSetPublicIPAddressConfigurationProperties", {
        "idleTimeoutInMinutes": INT, "publicIPAddressVersion": IPVER, "deleteOption": DELETE_OPTION,
        "publicIPPrefix": REF, "ipTags": Arr(Obj("VirtualMachineScaleSetIpTag", {"ipTagType": STR, "tag": STR})),
        "dnsSettings": Obj("VirtualMachineScaleSetPublicIPAddressConfigurationDnsSettings",
                           {"domainNameLabel": STR, "domainNameLabelScope": STR})})}, required=("name",))
VMSS_IP_CONFIG = Obj("VirtualMachineScaleSetIPConfiguration", {
    "name": STR,
    "properties": Obj("VirtualMachineScaleSetIPConfigurationProperties", {
        "subnet": API_REF, "primary": BOOL, "publicIPAddressConfiguration": VMSS_PIP_CONFIG,
        "privateIPAddressVersion": IPVER, "applicationSecurityGroups": Arr(REF),
        "loadBalancerBackendAddressPools": Arr(REF), "loadBalancerInboundNatPools": Arr(REF),
        "applicationGatewayBackendAddressPools": Arr(REF)})}, required=("name",))
VMSS_NIC_CONFIG = Obj("VirtualMachineScaleSetNetworkConfiguration", {
    "name": STR, "tags": TAGS,
    "properties": Obj("VirtualMachineScaleSetNetworkConfigurationProperties", {
        "primary": BOOL, "enableAcceleratedNetworking": BOOL, "disableTcpStateTracking": BOOL, "enableFpga": BOOL,
        "networkSecurityGroup": REF, "enableIPForwarding": BOOL, "deleteOption": DELETE_OPTION,
        "dnsSettings": Obj("VirtualMachineScaleSetNetworkConfigurationDnsSettings", {"dnsServers": Arr(STR)}),
        "ipConfigurations": Arr(VMSS_IP_CONFIG)})}, required=("name",))
VMSS_VM_PROFILE = Obj("VirtualMachineScaleSetVMProfile", {
    "osProfile": VMSS_OS_PROFILE,
    "storageProfile": Obj("VirtualMachineScaleSetStorageProfile", {
        "imageReference": IMAGE_REF, "osDisk": VMSS_OS_DISK, "dataDisks": Arr(ANY),
        "diskControllerType": Enum("DiskControllerTypes", "SCSI", "NVMe")}),
    "networkProfile": Obj("VirtualMachineScaleSetNetworkProfile", {
        "networkInterfaceConfigurations": Arr(VMSS_NIC_CONFIG), "healthProbe": API_REF,
        "networkApiVersion": Enum("NetworkApiVersion", "2020-11-01", "2022-11-01")}),
    "securityProfile": Obj("SecurityProfile", {
        "securityType": Enum("SecurityTypes", "TrustedLaunch", "ConfidentialVM", "Standard"),
        "encryptionAtHost": BOOL,
        "uefiSettings": Obj("UefiSettings", {"secureBootEnabled": BOOL, "vTpmEnabled": BOOL})}),
    "diagnosticsProfile": Obj("DiagnosticsProfile", {
        "bootDiagnostics": Obj("BootDiagnostics", {"enabled": BOOL, "storageUri": STR})}),
    "extensionProfile": ANY, "licenseType": STR,
    "priority": Enum("VirtualMachinePriorityTypes", "Regular", "Low", "Spot"),
    "evictionPolicy": Enum("VirtualMachineEvictionPolicyTypes", "Deallocate", "Delete"),
    "billingProfile": Obj("BillingProfile", {"maxPrice": NUM}), "userData": STR, "capacityReservation": ANY,
    "scheduledEventsProfile": ANY,
}, readonly=("timeCreated",))
VMSS_IDENTITY = Obj("VirtualMachineScaleSetIdentity", {"type": Enum(
    "ResourceIdentityType", "SystemAssigned", "UserAssigned", "SystemAssigned, UserAssigned", "None"),
    "userAssignedIdentities": MapOf(ANY)}, readonly=("principalId", "tenantId"))
VMSS_SKU = Obj("Sku", {"name": STR, "tier": STR, "capacity": INT})
VIRTUAL_MACHINE_SCALE_SET = Obj("VirtualMachineScaleSet", {
    "location": STR, "tags": TAGS, "zones": Arr(STR), "sku": VMSS_SKU, "identity": VMSS_IDENTITY, "plan": ANY,
    "properties": Obj("VirtualMachineScaleSetProperties", {
        "upgradePolicy": Obj("UpgradePolicy", {"mode": Enum("UpgradeMode", "Automatic", "Manual", "Rolling"),
                                               "rollingUpgradePolicy": ANY, "automaticOSUpgradePolicy": ANY}),
        "virtualMachineProfile": VMSS_VM_PROFILE, "overprovision": BOOL,
        "doNotRunExtensionsOnOverprovisionedVMs": BOOL, "singlePlacementGroup": BOOL, "zoneBalance": BOOL,
        "platformFaultDomainCount": INT, "proximityPlacementGroup": REF, "hostGroup": REF,
        "additionalCapabilities": Obj("AdditionalCapabilities", {"ultraSSDEnabled": BOOL, "hibernationEnabled": BOOL}),
        "scaleInPolicy": ANY, "orchestrationMode": Enum("OrchestrationMode", "Uniform", "Flexible"),
        "spotRestorePolicy": ANY, "priorityMixPolicy": ANY, "constrainedMaximumCapacity": BOOL,
        "automaticRepairsPolicy": ANY, "scheduledEventsPolicy": ANY, "resiliencyPolicy": ANY, "skuProfile": ANY,
        "highSpeedInterconnectPlacement": STR,
    }, readonly=("provisioningState", "uniqueId", "timeCreated")),
}, readonly=_TOP_RO + ("etag",))
VIRTUAL_MACHINE_SCALE_SET_UPDATE = Obj("VirtualMachineScaleSetUpdate", {
    "tags": TAGS, "sku": VMSS_SKU, "identity": VMSS_IDENTITY, "properties": ANY}, readonly=_TOP_RO)
INSTANCE_IDS = Obj("VirtualMachineScaleSetVMInstanceIDs", {"instanceIds": Arr(STR)})
PROXIMITY_PLACEMENT_GROUP = Obj("ProximityPlacementGroup", {
    "location": STR, "tags": TAGS, "zones": Arr(STR),
    "properties": Obj("ProximityPlacementGroupProperties", {
        "proximityPlacementGroupType": Enum("ProximityPlacementGroupType", "Standard", "Ultra"),
        "colocationStatus": ANY,
        "intent": Obj("ProximityPlacementGroupPropertiesIntent", {"vmSizes": Arr(STR)})},
        readonly=("virtualMachines", "virtualMachineScaleSets", "availabilitySets")),
}, readonly=_TOP_RO)
