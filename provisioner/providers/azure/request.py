"""The Azure create requests, as plain ARM JSON (camelCase), built without any cloud SDK.

``AzureProvider.create`` sends these dicts as they are (the azure-mgmt clients accept JSON-shaped
dicts); ``request_preview`` is what ``trainvm render`` / ``plan`` show offline. Importing this module
never imports ``azure.*``. The helpers at the end parse what the VM reports back (Run Command output,
the serial log); they are pure too.

Decisions (SPEC "What `up` creates"):
- One resource group per VM, ``trainvm-<VM name>``, tagged like the VM; ``down`` deletes the group.
  Inside: a VNet ``<name>-vnet`` (10.0.0.0/16, subnet ``default`` 10.0.0.0/24), an NSG ``<name>-nsg``
  (SSH 22/tcp from ``ssh_from`` only; without it no inbound rule at all, and the record's notes carry the
  ``az network nsg rule create`` command), and the VM with a *VM-managed* NIC ``<name>-nic`` and Standard
  static public IP ``<name>-ip`` (``networkInterfaceConfigurations``): that is the only way to get
  ``deleteOption: Delete`` on the public IP as well as on the NIC and the OS disk (cloud-sdks.md 2.1), so a
  Spot eviction (``evictionPolicy: Delete``) leaves only the free VNet/NSG behind.
- ``customData`` = base64 of ``spec.user_data`` (the renderer's cloud-init, gzip'd by it when needed),
  at most 87,380 characters (checked here: the SDK does not, trap A5).
- The resolved profile is stored in the VM's ``userData`` (base64; read back with ``$expand=userData``):
  tag values are limited to 256 characters, user data to 64 KiB. ``customData`` is never readable.
- Image: publisher/offer/sku from compat/data/os.yaml (Gen2 SKUs); a size that only boots Gen1
  (``offer.hyperv_gen == "1"``) takes the Gen1 SKU (providers.registry). ``up`` pins the
  version ("latest" resolved with virtual_machine_images.list, highest version) and records it.
- Security: Gen2 VMs get ``securityType: TrustedLaunch`` with ``secureBootEnabled: false`` and
  ``vTpmEnabled: true``. Secure Boot must be off because the startup script installs DKMS-built NVIDIA
  modules signed with an unenrolled MOK (startup-scripts.md 1.8); it is explicit because recent ARM api-versions
  default Gen2 VMs to Trusted Launch *with* Secure Boot. Gen1 VMs and the sizes we believe Trusted
  Launch does not support (TRUSTED_LAUNCH_UNSUPPORTED, unverified against a live subscription) get no
  ``securityProfile`` (Standard security).
- Disk: standard -> Standard_LRS, balanced -> StandardSSD_LRS, ssd -> Premium_LRS; sizes without
  premium storage (no "s" in the size's suffix) fall back to StandardSSD_LRS, with a note.
- Spot: ``priority: Spot``, ``evictionPolicy: Delete``, ``billingProfile.maxPrice`` =
  ``placement.max_price_per_hour`` (-1 = up to the on-demand price when none).
- Boot diagnostics on (managed storage): the serial log is ``verify``'s fallback for the report.
- Lifecycle (issue 10) and order (issue 36 item 5): every VM carries a user-assigned managed identity trainvm
  creates in the VM's group before the VM (``NAME-identity``; ``identity.type: UserAssigned``, its id also in the
  tag ``trainvm-identity``). When the VM must stop or delete itself (idle shutdown or ``max_run_hours``), ``up``
  gives that identity a role assignment scoped to the VM's own resource group, also before the VM (azure_roles),
  removed with the group by ``down``. The role is the least built-in
  one that can do what ``lifecycle.on_idle`` / ``on_max_run`` ask (Azure has no built-in deallocate-only
  role): stop -> Virtual Machine Contributor (``.../deallocate/action``); delete -> Contributor (deleting
  the resource group, as ``down`` does, so nothing stays: VM Contributor cannot delete the group nor the
  public IP). The on-VM ``trainvm-lifecycle`` gets an IMDS token for that identity and calls ARM: a
  shutdown from inside the guest would leave the VM "Stopped" and still billed. ``max_run_hours`` is a
  systemd timer on the VM (Azure has no run limit of its own).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import uuid
from dataclasses import dataclass, replace

from provisioner.providers.azure import bodies as B
from provisioner.providers.azure.families import azure_disk_types
from provisioner.providers.azure.identity import TAG as IDENTITY_TAG
from provisioner.providers.azure.identity import TAG_MAX, identity_body, user_identity
from provisioner.providers.base import InvalidRequestError, LaunchSpec
from provisioner.providers.offer import Offer
from provisioner.providers.registry import AzureImage, cloud

ADMIN_USER = "trainvm"
CUSTOM_DATA_MAX = 87_380  # base64 characters (65,535 bytes decoded)
USER_DATA_MAX = 87_380
VNET_PREFIX, SUBNET_PREFIX = "10.0.0.0/16", "10.0.0.0/24"
NETWORK_API_VERSION = "2020-11-01"
SSH_RULE, SSH_PRIORITY = "trainvm-ssh", 1000
PREVIEW_VERSION = "latest (pinned at up)"
PREVIEW_SSH_KEY = "<the SSH public key `up` reads: $TRAINVM_SSH_PUBLIC_KEY, ~/.ssh/id_ed25519.pub or ~/.ssh/id_rsa.pub>"
REPORT_PATH = "/var/lib/trainvm/report.json"
#: Run Command keeps only the last 4 KiB of output: the report travels gzip'd and base64'd.
REPORT_SCRIPT = [f'f="{REPORT_PATH}"; if [ -s "$f" ]; then gzip -9c "$f" | base64 -w0; fi']
#: Sizes we believe Trusted Launch does not support (Microsoft's Trusted Launch size list; unverified).
TRUSTED_LAUNCH_UNSUPPORTED = (r"^Standard_ND96a(m)?s(r)?(_A100)?_v4$", r"^Standard_ND40rs_v2$",
                              r"^Standard_NV\d+as_v4$", r"^Standard_N[CV]\d+r?(_Promo)?$")
NET, COMPUTE = "Microsoft.Network", "Microsoft.Compute"
AUTHZ, UAI = "Microsoft.Authorization", "Microsoft.ManagedIdentity/userAssignedIdentities"
IDENTITY_API = "2023-01-31"  # userAssignedIdentities (learn.microsoft.com/rest/api/managedidentity)
#: built-in role definition ids (the same GUID in every subscription and cloud)
ROLES = {"Virtual Machine Contributor": "9980e02c-c2be-4d73-94e8-173b1dc7cf3c",
         "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c"}
LIFECYCLE_ROLE = {"stop": "Virtual Machine Contributor", "delete": "Contributor"}  # the least that can


@dataclass(frozen=True)
class Names:
    """Every resource name derived from the VM name (deterministic: a re-run finds the same ones)."""

    vm: str
    rg: str
    vnet: str
    subnet: str
    nsg: str
    nic: str
    ipconfig: str
    pip: str
    os_disk: str
    identity: str  # the user-assigned identity trainvm creates for the VM (or scale set), in its group


def names(vm_name: str) -> Names:
    return Names(vm=vm_name, rg=f"trainvm-{vm_name}", vnet=f"{vm_name}-vnet", subnet="default", nsg=f"{vm_name}-nsg",
                 nic=f"{vm_name}-nic", ipconfig="ipconfig1", pip=f"{vm_name}-ip", os_disk=f"{vm_name}-osdisk",
                 identity=f"{vm_name}-identity")


def resource_id(subscription_id: str, rg: str, type_: str, name: str) -> str:
    return f"/subscriptions/{subscription_id}/resourceGroups/{rg}/providers/{type_}/{name}"


@dataclass(frozen=True)
class ImageRef:
    publisher: str
    offer: str
    sku: str
    version: str = "latest"

    @property
    def urn(self) -> str:
        return f"{self.publisher}:{self.offer}:{self.sku}:{self.version}"

    def body(self) -> dict[str, str]:
        return {"publisher": self.publisher, "offer": self.offer, "sku": self.sku, "version": self.version}


def gen2(offer: B.SizeFacts) -> bool:
    """Whether the size boots Generation 2 images (unknown -> yes: every current GPU size does)."""
    return not offer.hyperv_gen or "2" in offer.hyperv_gen.split("|")


def image_for(os_name: str, offer: B.SizeFacts) -> ImageRef:
    """The marketplace image (version "latest") of ``stack.os`` for the offer's Hyper-V generation."""
    ref = cloud("azure").os_images.get(os_name)
    if not isinstance(ref, AzureImage):
        raise InvalidRequestError(f"no Azure image is known for OS {os_name!r}", code="ImageUnknown")
    if gen2(offer):
        return ImageRef(ref.publisher, ref.offer, ref.sku)
    if not ref.gen1_sku:
        raise InvalidRequestError(f"{offer.instance_type} boots only Gen1 images and no Gen1 image of {os_name} is known",
                                  code="ImageUnknown")
    return ImageRef(ref.publisher, ref.offer, ref.gen1_sku)


def image_reference(spec: LaunchSpec, image: ImageRef) -> dict[str, str]:
    """The VM's ``imageReference``: the baked gallery image version ``up`` chose (``LaunchSpec.boot_image``, its ARM
    id: providers/azure/bake.py) by ``id``, else the Marketplace image."""
    return {"id": spec.boot_image} if spec.boot_image else image.body()


def disk_type(spec: LaunchSpec, size: str) -> tuple[str, str | None]:
    """(storageAccountType, a note when the profile's type had to be replaced)."""
    wanted = cloud("azure").disk_types.get(spec.boot_disk_type)
    if wanted is None:
        raise InvalidRequestError(f"unknown boot disk type {spec.boot_disk_type!r}", code="InvalidParameter")
    if spec.boot_disk_type not in azure_disk_types(size):
        return "StandardSSD_LRS", (f"{size} does not support Premium SSD; the boot disk is Standard SSD "
                                   f"(StandardSSD_LRS) instead of {wanted}")
    return wanted, None


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def custom_data(spec: LaunchSpec) -> str:
    value = _b64(spec.user_data)
    if len(value) > CUSTOM_DATA_MAX:
        raise InvalidRequestError(
            f"the cloud-init custom data is {len(value)} base64 characters; Azure allows {CUSTOM_DATA_MAX} "
            "(65,535 bytes before base64): shorten the startup script or let the renderer gzip it", code="CustomDataTooLarge")
    return value


def user_data(spec: LaunchSpec) -> str:
    value = _b64(spec.profile_json)
    if len(value) > USER_DATA_MAX:
        raise InvalidRequestError(f"the resolved profile is {len(spec.profile_json.encode())} bytes; the VM's user data "
                                  "that stores it holds at most 64 KiB", code="UserDataTooLarge")
    return value


def tags(spec: LaunchSpec) -> dict[str, str]:
    """The labels; with a user-assigned identity also its id, which the on-VM scripts read from IMDS (azure_identity)."""
    identity = user_identity(spec)
    return {**spec.labels, IDENTITY_TAG: identity} if identity else dict(spec.labels)


def own_identity_id(subscription_id: str, vm_name: str) -> str:
    """The ARM id of the user-assigned identity trainvm creates for ``vm_name`` (``NAME-identity`` in its group)."""
    return resource_id(subscription_id, names(vm_name).rg, UAI, names(vm_name).identity)


def vm_identity(spec: LaunchSpec, subscription_id: str) -> str:
    """The identity the VM (or scale set) carries: the administrator's (placement.identity.azure), else trainvm's own."""
    return user_identity(spec) or own_identity_id(subscription_id, spec.name)


def compute_tags(spec: LaunchSpec, subscription_id: str) -> dict[str, str]:
    """The VM's (or scale set's) tags: ``tags`` and the identity's id, which the on-VM scripts read from IMDS to ask
    for that identity's token (left out when longer than a tag value holds: IMDS then uses the only identity)."""
    identity = vm_identity(spec, subscription_id)
    return {**tags(spec), IDENTITY_TAG: identity} if len(identity) <= TAG_MAX else tags(spec)


def identity_resource_body(spec: LaunchSpec, location: str) -> B.Json:
    """The userAssignedIdentities PUT body (learn.microsoft.com/rest/api/managedidentity/user-assigned-identities)."""
    return {"location": location, "tags": tags(spec)}


def group_body(spec: LaunchSpec, location: str) -> B.Tagged:
    return {"location": location, "tags": tags(spec)}


def vnet_body(spec: LaunchSpec, location: str) -> B.Json:
    return {"location": location, "tags": tags(spec), "properties": {
        "addressSpace": {"addressPrefixes": [VNET_PREFIX]},
        "subnets": [{"name": names(spec.name).subnet, "properties": {"addressPrefix": SUBNET_PREFIX}}]}}


def nsg_body(spec: LaunchSpec, location: str) -> B.Json:
    rules = []
    if spec.ssh_from:
        rules.append({"name": SSH_RULE, "properties": {
            "description": "SSH from placement.ssh_from / --ssh-from (trainvm)", "priority": SSH_PRIORITY,
            "direction": "Inbound", "access": "Allow", "protocol": "Tcp", "sourceAddressPrefix": spec.ssh_from,
            "sourcePortRange": "*", "destinationAddressPrefix": "*", "destinationPortRange": "22"}})
    return {"location": location, "tags": tags(spec), "properties": {"securityRules": rules}}


def security_profile(offer: Offer) -> B.Json | None:
    if not gen2(offer) or any(re.match(rx, offer.instance_type) for rx in TRUSTED_LAUNCH_UNSUPPORTED):
        return None
    return {"securityType": "TrustedLaunch", "uefiSettings": {"secureBootEnabled": False, "vTpmEnabled": True}}


def _network_profile(spec: LaunchSpec, sub: str) -> B.NetworkProfile:
    n = names(spec.name)
    subnet = resource_id(sub, n.rg, f"{NET}/virtualNetworks", n.vnet) + f"/subnets/{n.subnet}"
    pip: B.PublicIpConfig = {"name": n.pip, "sku": {"name": "Standard", "tier": "Regional"},
           "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4", "deleteOption": "Delete"}}
    return {"networkApiVersion": NETWORK_API_VERSION, "networkInterfaceConfigurations": [{"name": n.nic, "properties": {
        "primary": True, "deleteOption": "Delete",
        "networkSecurityGroup": {"id": resource_id(sub, n.rg, f"{NET}/networkSecurityGroups", n.nsg)},
        "ipConfigurations": [{"name": n.ipconfig, "properties": {
            "primary": True, "subnet": {"id": subnet}, "publicIPAddressConfiguration": pip}}]}}]}


def vm_body(spec: LaunchSpec, offer: Offer, *, subscription_id: str, image: ImageRef, ssh_public_key: str) -> B.VmBody:
    """The ``virtualMachines`` PUT body (the VM creates its own NIC and public IP)."""
    if offer.cloud != "azure":
        raise InvalidRequestError(f"not an Azure offer: {offer.cloud} {offer.location} {offer.instance_type}")
    n = names(spec.name)
    storage_type, _ = disk_type(spec, offer.instance_type)
    props: B.VmProps = {
        "hardwareProfile": {"vmSize": offer.instance_type},
        "storageProfile": {"imageReference": image_reference(spec, image), "osDisk": {
            "name": n.os_disk, "createOption": "FromImage", "caching": "ReadWrite", "diskSizeGB": spec.boot_disk_gib,
            "deleteOption": "Delete", "managedDisk": {"storageAccountType": storage_type}}},
        "osProfile": {"computerName": spec.name, "adminUsername": ADMIN_USER, "customData": custom_data(spec),
                      "linuxConfiguration": {"disablePasswordAuthentication": True, "provisionVMAgent": True, "ssh": {
                          "publicKeys": [{"path": f"/home/{ADMIN_USER}/.ssh/authorized_keys", "keyData": ssh_public_key}]}}},
        "networkProfile": _network_profile(spec, subscription_id),
        "diagnosticsProfile": {"bootDiagnostics": {"enabled": True}},
        "userData": user_data(spec),
    }
    security = security_profile(offer)
    if security:
        props["securityProfile"] = security
    if spec.spot:
        props["priority"], props["evictionPolicy"] = "Spot", "Delete"
        props["billingProfile"] = {"maxPrice": spec.max_price_per_hour if spec.max_price_per_hour else -1}
    identity = vm_identity(spec, subscription_id)  # the administrator's (placement.identity.azure) or trainvm's own
    return {"location": offer.region, "tags": compute_tags(spec, subscription_id), "identity": identity_body(identity),
            "properties": props}


def lifecycle_role(spec: B.LifecycleFields) -> str | None:
    """The built-in role the VM's identity needs on its resource group, or None when it never acts on itself
    (``spec``: a LaunchSpec, or anything with its four lifecycle fields)."""
    actions = ([spec.on_idle] if spec.idle_shutdown_minutes else []) + ([spec.on_max_run] if spec.max_run_hours else [])
    if not actions:
        return None
    return LIFECYCLE_ROLE["delete" if "delete" in actions else "stop"]


def role_assignment_name(spec: LaunchSpec, role: str) -> str:
    """Deterministic GUID (role assignment names must be GUIDs): a re-run finds the same assignment."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"trainvm:{spec.name}:{names(spec.name).rg}:{ROLES[role]}"))


def role_assignment_scope(subscription_id: str, spec: LaunchSpec) -> str:
    return f"/subscriptions/{subscription_id}/resourceGroups/{names(spec.name).rg}"


def role_assignment_body(subscription_id: str, role: str, principal_id: str, spec: LaunchSpec) -> B.Json:
    """The roleAssignments PUT body. principalType is set: a just-created identity may not have replicated
    yet, and ARM then answers PrincipalNotFound unless it is told the principal's type."""
    return {"properties": {
        "roleDefinitionId": f"/subscriptions/{subscription_id}/providers/{AUTHZ}/roleDefinitions/{ROLES[role]}",
        "principalId": principal_id, "principalType": "ServicePrincipal",
        "description": f"trainvm: lets {spec.name} {'delete' if role == 'Contributor' else 'deallocate'} itself "
                       "(lifecycle.on_idle / on_max_run)"}}


def notes(spec: LaunchSpec, offer: Offer, subscription_id: str | None = None) -> list[str]:
    """What ``up`` prints about the VM (SSH access, substitutions)."""
    n, out = names(spec.name), []
    if not spec.ssh_from:
        out.append(f"the network security group {n.nsg} allows no inbound traffic; " + open_ssh_hint(spec.name, subscription_id))
    _, disk_note = disk_type(spec, offer.instance_type)
    if disk_note:
        out.append(disk_note)
    role = lifecycle_role(spec)
    identity = user_identity(spec)
    if identity:
        out.append(f"the VM uses the user-assigned identity {identity.rsplit('/', 1)[-1]} (placement.identity.azure) "
                   "with the roles an administrator granted it; trainvm created no role assignment")
    elif role:
        out.append(f"the VM's managed identity holds {role} on {n.rg} only, so that its idle watchdog / max-run timer "
                   "can deallocate (or delete) it through Azure Resource Manager")
    return out


def open_ssh_hint(vm_name: str, subscription_id: str | None = None) -> str:
    """How to allow SSH to the VM from one address (its NSG has no inbound rule unless ssh_from was set)."""
    n, sub = names(vm_name), f" --subscription {subscription_id}" if subscription_id else ""
    return ("allow SSH from your address with:\n"
            f"  az network nsg rule create{sub} --resource-group {n.rg} --nsg-name {n.nsg} --name {SSH_RULE} "
            f"--priority {SSH_PRIORITY} --direction Inbound --access Allow --protocol Tcp "
            f"--source-address-prefixes <your IP>/32 --destination-port-ranges 22\n"
            "  (or set placement.ssh_from / pass --ssh-from CIDR next time)")


def ssh_argv(ip: str, public_key_path: str | None, command: list[str]) -> list[str]:
    """``ssh`` as the admin user with the private half of the key ``up`` installed (when it is there)."""
    argv = ["ssh", "-o", "StrictHostKeyChecking=accept-new"]
    if public_key_path and public_key_path.endswith(".pub"):
        private = os.path.expanduser(public_key_path[:-4])
        if os.path.exists(private):
            argv += ["-i", private, "-o", "IdentitiesOnly=yes"]
    return [*argv, f"{ADMIN_USER}@{ip}", *(["--", *command] if command else [])]


def request_preview(spec: LaunchSpec, offer: Offer, subscription_id: str = "SUBSCRIPTION") -> B.Json:
    """What ``up`` would send, offline, keyed by resource type in the order ``up`` sends it (identity and roles
    before the compute). The image version shows as "latest (pinned at up)": ``up`` pins it and records it."""
    n, loc = names(spec.name), offer.region
    image = replace(image_for(spec.os, offer), version=PREVIEW_VERSION)
    out: B.Json = {
        "Microsoft.Resources/resourceGroups": {"name": n.rg, "body": group_body(spec, loc)},
        f"{NET}/virtualNetworks": {"name": n.vnet, "body": vnet_body(spec, loc)},
        f"{NET}/networkSecurityGroups": {"name": n.nsg, "body": nsg_body(spec, loc)},
    }
    role = lifecycle_role(spec)
    if not user_identity(spec):  # the administrator's identity holds the administrator's grants
        out[UAI] = {"name": n.identity, "body": identity_resource_body(spec, loc)}
        if role:
            out[f"{AUTHZ}/roleAssignments"] = {
                "name": role_assignment_name(spec, role), "scope": role_assignment_scope(subscription_id, spec),
                "body": role_assignment_body(subscription_id, role, f"<principalId of {n.identity}, created first>",
                                             spec)}
    if spec.nodes > 1:  # a cluster: a proximity placement group and one scale set (azure_group_request)
        from provisioner.providers.azure.group_request import preview  # lazy: startup

        out.update(preview(spec, offer, subscription_id, image))
    else:
        out[f"{COMPUTE}/virtualMachines"] = {"name": n.vm, "body": vm_body(
            spec, offer, subscription_id=subscription_id, image=image, ssh_public_key=PREVIEW_SSH_KEY)}
    return out


# ---------------------------------------------------------------------------------------------- reading back
STDOUT_RE = re.compile(r"\[stdout\]\n(.*?)\n?\[stderr\]", re.S)


def run_command_stdout(message: str | None) -> str:
    """The ``[stdout]`` part of a RunShellScript status message ("Enable succeeded: \\n[stdout]\\n...")."""
    m = STDOUT_RE.search(message or "")
    return m.group(1) if m else ""


def decode_user_data(value: str | None) -> B.Json | None:
    if not value:
        return None
    try:
        data = json.loads(base64.b64decode(value))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None
