"""The ARM emulator (tests/emulators/arm.py) driven by the real azure-mgmt-* SDK clients.

These tests pin down both the emulator and what the SDK does with each answer (exception class,
status_code, error.code), which is what the trainvm Azure provider has to handle.
"""
from __future__ import annotations

import base64
import json
import re
import sys
import time
from pathlib import Path

import pytest
import requests
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute import models as cm
from azure.mgmt.network import models as nm

try:
    from tests.emulators.arm import DEFAULT_SUBSCRIPTION, ArmEmulator, StaticTokenCredential
except ImportError:  # plain `pytest` with --import-mode=importlib does not put the repo root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.emulators.arm import DEFAULT_SUBSCRIPTION, ArmEmulator, StaticTokenCredential

SUB = DEFAULT_SUBSCRIPTION
RG, LOC, SIZE = "trainvm-bert-1a2b3c4d", "eastus", "Standard_NC4as_T4_v3"
JAMMY = {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2",
         "version": "latest"}
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOn8 trainvm"
VM_T = "Microsoft.Compute/virtualMachines"


def rid(type_, name, rg=RG):
    return f"/subscriptions/{SUB}/resourceGroups/{rg}/providers/{type_}/{name}"


SUBNET_ID = rid("Microsoft.Network/virtualNetworks", "vnet") + "/subnets/default"
NIC_ID = rid("Microsoft.Network/networkInterfaces", "nic")


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def server():
    with ArmEmulator() as emu:
        yield emu


@pytest.fixture
def emu(server):
    server.reset()
    server.polls, server.lro_style, server.page_size = 1, "async", 100
    yield server
    server.finish_operations(stuck=True)   # never leave a poller spinning on an lro_never_done operation


@pytest.fixture(scope="module")
def clients(server):
    return server.clients()


@pytest.fixture
def rc(clients):
    return clients[0]


@pytest.fixture
def nc(clients):
    return clients[1]


@pytest.fixture
def cc(clients):
    return clients[2]


def network(rc, nc, rg=RG, public_ip=True):
    """RG + vnet/subnet + NSG + (public IP) + NIC, as raw wire-format dicts; returns the NIC id."""
    rc.resource_groups.create_or_update(rg, {"location": LOC, "tags": {"trainvm-managed": "true"}})
    nc.virtual_networks.begin_create_or_update(rg, "vnet", {"location": LOC, "properties": {
        "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
        "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}}).result()
    nc.network_security_groups.begin_create_or_update(rg, "nsg", {"location": LOC, "properties": {
        "securityRules": []}}).result()
    ipc = {"subnet": {"id": SUBNET_ID.replace(RG, rg)}}
    if public_ip:
        nc.public_ip_addresses.begin_create_or_update(rg, "pip", {
            "location": LOC, "sku": {"name": "Standard"},
            "properties": {"publicIPAllocationMethod": "Static"}}).result()
        ipc["publicIPAddress"] = {"id": rid("Microsoft.Network/publicIPAddresses", "pip", rg)}
    return nc.network_interfaces.begin_create_or_update(rg, "nic", {"location": LOC, "properties": {
        "ipConfigurations": [{"name": "ipconfig1", "properties": ipc}],
        "networkSecurityGroup": {"id": rid("Microsoft.Network/networkSecurityGroups", "nsg", rg)}}}).result().id


def vm_body(nic_id=NIC_ID, *, zones=None, custom_data="I2Nsb3VkLWNvbmZpZwo=", **props):
    body = {"location": LOC, "tags": {"trainvm-managed": "true"}, "properties": {
        "hardwareProfile": {"vmSize": SIZE},
        "storageProfile": {"imageReference": dict(JAMMY), "osDisk": {
            "createOption": "FromImage", "deleteOption": "Delete", "diskSizeGB": 128,
            "managedDisk": {"storageAccountType": "Premium_LRS"}}},
        "osProfile": {"computerName": "trainvm", "adminUsername": "azureuser", "customData": custom_data,
                      "linuxConfiguration": {"disablePasswordAuthentication": True, "ssh": {"publicKeys": [
                          {"path": "/home/azureuser/.ssh/authorized_keys", "keyData": SSH_KEY}]}}},
        "networkProfile": {"networkInterfaces": [{"id": nic_id, "properties": {"deleteOption": "Delete",
                                                                               "primary": True}}]},
        "diagnosticsProfile": {"bootDiagnostics": {"enabled": True}}}}
    body["properties"].update(props)
    if zones:
        body["zones"] = zones
    return body


def create_vm(cc, name="vm1", body=None, rg=RG):
    return cc.virtual_machines.begin_create_or_update(rg, name, body or vm_body()).result()


def raises(fn):
    with pytest.raises(HttpResponseError) as info:
        fn()
    return info.value


# ---------------------------------------------------------------------------------------------- SDK wiring
def test_resource_client_import_path_trap_a6():
    with pytest.raises(ImportError):
        from azure.mgmt.resource import ResourceManagementClient  # noqa: F401
    from azure.mgmt.resource.resources import ResourceManagementClient  # noqa: F401  (the path that works)


def test_full_flow_with_sdk_models(emu, rc, nc, cc):
    """RG, vnet, NSG, public IP, NIC, VM through the SDK's own models, as trainvm's provider will build them."""
    rg = rc.resource_groups.create_or_update(RG, {"location": LOC, "tags": {"trainvm-managed": "true"}})
    assert rg.properties.provisioning_state == "Succeeded" and rc.resource_groups.check_existence(RG) is True
    vnet = nc.virtual_networks.begin_create_or_update(RG, "vnet", nm.VirtualNetwork(
        location=LOC, address_space=nm.AddressSpace(address_prefixes=["10.0.0.0/16"]),
        subnets=[nm.Subnet(name="default", address_prefix="10.0.0.0/24")])).result()
    nsg = nc.network_security_groups.begin_create_or_update(RG, "nsg", nm.NetworkSecurityGroup(
        location=LOC, security_rules=[nm.SecurityRule(
            name="ssh", priority=1000, direction="Inbound", access="Allow", protocol="Tcp",
            source_address_prefix="203.0.113.7/32", source_port_range="*", destination_address_prefix="*",
            destination_port_range="22")])).result()
    pip = nc.public_ip_addresses.begin_create_or_update(RG, "pip", nm.PublicIPAddress(
        location=LOC, sku=nm.PublicIPAddressSku(name="Standard", tier="Regional"),
        public_ip_allocation_method="Static", public_ip_address_version="IPv4")).result()
    nic = nc.network_interfaces.begin_create_or_update(RG, "nic", nm.NetworkInterface(
        location=LOC, network_security_group=nm.NetworkSecurityGroup(id=nsg.id),
        ip_configurations=[nm.NetworkInterfaceIPConfiguration(
            name="ipconfig1", subnet=vnet.subnets[0], public_ip_address=pip,     # whole models, as samples do
            private_ip_allocation_method="Dynamic")])).result()
    assert vnet.subnets[0].id == SUBNET_ID and pip.ip_address and nic.ip_configurations[0].private_ip_address
    custom = base64.b64encode(b"#cloud-config\nruncmd: [echo hi]\n").decode()
    vm = cc.virtual_machines.begin_create_or_update(RG, "vm1", cm.VirtualMachine(
        location=LOC, tags={"trainvm-managed": "true", "trainvm-hash": "0123456789abcdef"},
        hardware_profile=cm.HardwareProfile(vm_size=SIZE),
        storage_profile=cm.StorageProfile(
            image_reference=cm.ImageReference(**JAMMY),
            os_disk=cm.OSDisk(name="vm1-os", create_option="FromImage", caching="ReadWrite", disk_size_gb=200,
                              delete_option="Delete",
                              managed_disk=cm.ManagedDiskParameters(storage_account_type="Premium_LRS"))),
        os_profile=cm.OSProfile(computer_name="vm1", admin_username="azureuser", custom_data=custom,
                                linux_configuration=cm.LinuxConfiguration(
                                    disable_password_authentication=True,
                                    ssh=cm.SshConfiguration(public_keys=[cm.SshPublicKey(
                                        path="/home/azureuser/.ssh/authorized_keys", key_data=SSH_KEY)]))),
        network_profile=cm.NetworkProfile(network_interfaces=[cm.NetworkInterfaceReference(
            id=nic.id, primary=True, delete_option="Delete")]),
        priority="Spot", eviction_policy="Delete", billing_profile=cm.BillingProfile(max_price=-1))).result()
    assert vm.provisioning_state == "Succeeded" and vm.os_profile.custom_data is None   # never returned on GET
    assert vm.storage_profile.image_reference.exact_version == "22.04.202610150"
    assert vm.storage_profile.os_disk.managed_disk.id == rid("Microsoft.Compute/disks", "vm1-os")
    view = cc.virtual_machines.instance_view(RG, "vm1")
    assert [s.code for s in view.statuses] == ["ProvisioningState/succeeded", "PowerState/running"]
    assert nc.network_interfaces.get(RG, "nic").virtual_machine.id == vm.id
    assert nc.public_ip_addresses.get(RG, "pip").ip_configuration.id == nic.id + "/ipConfigurations/ipconfig1"

    # what went over the wire
    put = emu.calls("PUT", "virtualMachines/vm1$")[0]
    assert put.headers["authorization"] == "Bearer fake-arm-token"
    assert put.body["properties"]["osProfile"]["customData"] == custom
    assert put.body["properties"]["priority"] == "Spot" and put.ignored == []
    nic_put = emu.calls("PUT", "networkInterfaces/nic$")[0]
    assert "properties.ipConfigurations[0].properties.subnet.properties" in nic_put.ignored
    seq = [(r.method, re.sub(r".*/", "", r.path)) for r in emu.requests if "vm1" in r.path or "Compute/locations"
           in r.path][:4]
    assert seq[0] == ("PUT", "vm1") and seq[3] == ("GET", "vm1") and seq[1][1] == seq[2][1]   # PUT, op x2, GET
    assert emu.api_versions() == {"Microsoft.Resources": {"2025-04-01"}, "Microsoft.Network": {"2026-03-01"},
                                  "Microsoft.Compute": {"2026-04-01"}}
    assert all(r.status < 400 for r in emu.requests)
    assert rc.resource_groups.get(RG).tags == {"trainvm-managed": "true"}


def test_static_token_credential_scope_and_requests_ca_bundle(emu, monkeypatch):
    cred = StaticTokenCredential("tok-1")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", emu.ca_path)     # instead of connection_verify
    cc = ComputeManagementClient(cred, SUB, base_url=emu.url, polling_interval=0,
                                 credential_scopes=["https://management.azure.com/.default"])
    assert list(cc.virtual_machines.list_all()) == []
    assert cred.scopes == [("https://management.azure.com/.default",)]
    assert emu.requests[-1].headers["authorization"] == "Bearer tok-1"


def test_auth_is_required(emu):
    url = f"{emu.url}/subscriptions/{SUB}/resourcegroups?api-version=2025-04-01"
    r = requests.get(url, verify=emu.ca_path, timeout=5)
    assert r.status_code == 401 and r.json()["error"]["code"] == "AuthenticationFailed"
    assert "WWW-Authenticate" in r.headers
    ok = requests.get(url, verify=emu.ca_path, headers={"Authorization": "Bearer x"}, timeout=5)
    assert ok.status_code == 200 and ok.json() == {"value": []}
    r = requests.get(url.split("?")[0], verify=emu.ca_path, headers={"Authorization": "Bearer x"}, timeout=5)
    assert r.status_code == 400 and r.json()["error"]["code"] == "MissingApiVersionParameter"
    with pytest.raises(requests.exceptions.SSLError):   # the server cert is only trusted through the test CA
        requests.get(url, timeout=5)


def test_fixed_token_rejects_others():
    with ArmEmulator(token="right") as emu:
        rc = emu.clients(credential=StaticTokenCredential("wrong"))[0]
        e = raises(lambda: rc.resource_groups.get("x"))
        assert isinstance(e, ClientAuthenticationError) and e.error.code == "InvalidAuthenticationToken"
        assert emu.clients()[0].resource_groups.check_existence("x") is False


# ---------------------------------------------------------------------------------------------- deletion
def test_delete_resource_group_leaves_nothing(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc)
    emu.inject("allocation_failed_lro")                          # a Failed VM is cleaned up too
    nc.network_interfaces.begin_create_or_update(RG, "nic2", {"location": LOC, "properties": {
        "ipConfigurations": [{"name": "c", "properties": {"subnet": {"id": SUBNET_ID}}}]}}).result()
    with pytest.raises(HttpResponseError):
        create_vm(cc, "vm2", vm_body(rid("Microsoft.Network/networkInterfaces", "nic2")))
    assert len(emu.resources_in(RG)) == 8                        # vnet nsg pip nic nic2 vm1 disk vm2
    poller = rc.resource_groups.begin_delete(RG)
    poller.result()
    assert emu.resources_in(RG) == [] and emu.resource_groups() == []
    assert rc.resource_groups.check_existence(RG) is False
    assert [(r.method, r.status) for r in emu.calls(path="operationresults")] == [("GET", 202), ("GET", 200)]
    delete = emu.calls("DELETE")[0]
    assert delete.status == 202
    e = raises(lambda: rc.resource_groups.begin_delete(RG))      # deleting it again: 404, not a no-op
    assert isinstance(e, ResourceNotFoundError) and e.error.code == "ResourceGroupNotFound"


def test_resource_group_being_deleted_rejects_writes(emu, rc, nc):
    network(rc, nc, public_ip=False)
    emu.inject("lro_never_done", method="DELETE", path="resourcegroups")
    poller = rc.resource_groups.begin_delete(RG)
    assert rc.resource_groups.get(RG).properties.provisioning_state == "Deleting"
    e = raises(lambda: nc.network_security_groups.begin_create_or_update(RG, "nsg2", {"location": LOC}))
    assert isinstance(e, ResourceExistsError) and e.error.code == "ResourceGroupBeingDeleted"
    emu.finish_operations(stuck=True)
    poller.result()
    assert emu.resource_groups() == []


def test_vm_delete_honours_delete_options(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc)
    cc.virtual_machines.begin_delete(RG, "vm1").result()
    left = {i.rsplit("/", 2)[-2] + "/" + i.rsplit("/", 1)[1] for i in emu.resources_in(RG)}
    assert left == {"virtualNetworks/vnet", "networkSecurityGroups/nsg", "publicIPAddresses/pip"}  # NIC+disk gone
    cc.virtual_machines.begin_delete(RG, "vm1").result()         # deleting what is gone: 204, no error
    assert emu.requests[-1].status == 204


def test_vm_managed_nic_and_public_ip(emu, rc, nc, cc):
    """networkInterfaceConfigurations: the VM creates its NIC + public IP and deletes them with itself."""
    network(rc, nc, public_ip=False)
    body = vm_body()
    body["properties"]["networkProfile"] = {"networkApiVersion": "2020-11-01", "networkInterfaceConfigurations": [{
        "name": "vm2-nic", "properties": {"primary": True, "deleteOption": "Delete", "networkSecurityGroup": {
            "id": rid("Microsoft.Network/networkSecurityGroups", "nsg")}, "ipConfigurations": [{
                "name": "ipconfig1", "properties": {"primary": True, "subnet": {"id": SUBNET_ID},
                                                    "publicIPAddressConfiguration": {
                                                        "name": "vm2-pip", "sku": {"name": "Standard"},
                                                        "properties": {"publicIPAllocationMethod": "Static",
                                                                       "deleteOption": "Delete"}}}}]}}]}
    vm = create_vm(cc, "vm2", body)
    assert vm.network_profile.network_interfaces[0].id == rid("Microsoft.Network/networkInterfaces", "vm2-nic")
    assert nc.public_ip_addresses.get(RG, "vm2-pip").ip_address.startswith("198.51.100.")
    cc.virtual_machines.begin_delete(RG, "vm2").result()
    assert sorted(i.rsplit("/", 1)[1] for i in emu.resources_in(RG)) == ["nic", "nsg", "vnet"]


def test_in_use_network_resources_cannot_be_deleted(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc)
    for op, code in ((lambda: nc.network_interfaces.begin_delete(RG, "nic"), "NicInUse"),
                     (lambda: nc.public_ip_addresses.begin_delete(RG, "pip"), "PublicIPAddressCannotBeDeleted"),
                     (lambda: nc.network_security_groups.begin_delete(RG, "nsg"),
                      "InUseNetworkSecurityGroupCannotBeDeleted"),
                     (lambda: nc.virtual_networks.begin_delete(RG, "vnet"), "InUseSubnetCannotBeDeleted")):
        e = raises(op)
        assert (type(e), e.status_code, e.error.code) == (HttpResponseError, 400, code)


# ---------------------------------------------------------------------------------------------- faults
@pytest.mark.parametrize("kind,code,message", [
    ("sku_not_available_409", "SkuNotAvailable", "is currently not available in location 'eastus'"),
    ("quota", "OperationNotAllowed", "exceeding approved standardNCASv3_T4Family Cores quota"),
])
def test_sync_409_faults_surface_as_resource_exists_error(emu, rc, nc, cc, kind, code, message):
    network(rc, nc)
    emu.inject(kind, location=LOC, size=SIZE)
    e = raises(lambda: cc.virtual_machines.begin_create_or_update(RG, "vm1", vm_body()))   # the initial PUT
    assert isinstance(e, ResourceExistsError)                    # trap A3: every 409 is ResourceExistsError
    assert (e.status_code, e.error.code) == (409, code) and message in e.error.message
    assert emu.state.get(RG, VM_T, "vm1") is None                # nothing created
    assert create_vm(cc).provisioning_state == "Succeeded"       # times=1: next attempt succeeds


def test_spot_quota_message(emu, rc, nc, cc):
    network(rc, nc)
    emu.inject("quota")
    e = raises(lambda: create_vm(cc, body=vm_body(priority="Spot", evictionPolicy="Delete")))
    assert "LowPriorityCores quota" in e.error.message and "Additional Required: 4" in e.error.message


@pytest.mark.parametrize("kind,code", [
    ("allocation_failed_lro", "AllocationFailed"),
    ("zonal_allocation_failed_lro", "ZonalAllocationFailed"),
    ("overconstrained_allocation_lro", "OverconstrainedAllocationRequest"),
])
def test_failed_lro_has_status_200_and_leaves_failed_vm(emu, rc, nc, cc, kind, code):
    network(rc, nc)
    emu.inject(kind, zone="1")
    e = raises(lambda: create_vm(cc, body=vm_body(zones=["1"])))
    assert type(e) is HttpResponseError and e.status_code == 200 and e.error.code == code   # trap A4
    vm = cc.virtual_machines.get(RG, "vm1", expand="instanceView")
    assert vm.provisioning_state == "Failed"
    assert vm.instance_view.statuses[0].code == f"ProvisioningState/failed/{code}"
    e = raises(lambda: nc.network_interfaces.begin_delete(RG, "nic"))
    assert e.error.code == "NicInUse"                             # the Failed VM still holds its NIC
    # retrying in another zone under the same name is refused: delete the failed VM first
    e = raises(lambda: create_vm(cc, body=vm_body(zones=["2"])))
    assert isinstance(e, ResourceExistsError) and e.error.code == "PropertyChangeNotAllowed"
    assert e.error.target == "zones"
    assert create_vm(cc, body=vm_body(zones=["1"])).provisioning_state == "Succeeded"  # same zone: retried
    rc.resource_groups.begin_delete(RG).result()
    assert emu.resources_in(RG) == []


def test_allocation_code_override_and_filters(emu, rc, nc, cc):
    network(rc, nc)
    emu.inject("allocation_failed_lro", location="westus2")      # other region: does not fire here
    emu.inject("allocation_failed_lro", size="Standard_NC8as_T4_v3")
    emu.inject("allocation_failed_lro", code="ZonalAllocationFailed", message="no T4 in zone 3")
    e = raises(lambda: create_vm(cc))
    assert (e.error.code, e.error.message) == ("ZonalAllocationFailed", "no T4 in zone 3")
    assert len(emu.faults) == 2


@pytest.mark.parametrize("kind", ["throttle_429", "unavailable_503"])
def test_transient_faults_are_retried_by_the_sdk(emu, rc, nc, cc, kind):
    network(rc, nc)
    emu.inject(kind, path=r"virtualMachines/vm1$", method="PUT")
    assert create_vm(cc).provisioning_state == "Succeeded"
    assert [r.status for r in emu.calls("PUT", "vm1$")] == [int(kind[-3:]), 201]   # RetryPolicy, Retry-After: 0


@pytest.mark.parametrize("kind,status,code", [("throttle_429", 429, "SubscriptionRequestsThrottled"),
                                              ("unavailable_503", 503, "ServiceUnavailable")])
def test_persistent_transient_faults_exhaust_retries(emu, cc, kind, status, code):
    emu.inject(kind, times=None)
    e = raises(lambda: cc.virtual_machines.get(RG, "vm1"))
    assert type(e) is HttpResponseError and (e.status_code, e.error.code) == (status, code)
    assert len(emu.requests) == 3                                # retry_total=2 in client_kwargs()


def test_auth_401_fault(emu, rc, nc, cc):
    network(rc, nc)
    emu.inject("auth_401", size=SIZE)
    e = raises(lambda: create_vm(cc))
    assert isinstance(e, ClientAuthenticationError) and (e.status_code, e.error.code) == (401,
                                                                                        "InvalidAuthenticationToken")
    assert len(emu.calls("PUT", "vm1$")) == 1                     # no retry, no claims challenge


def test_invalid_400_fault(emu, rc):
    emu.inject("invalid_400", method="PUT")
    e = raises(lambda: rc.resource_groups.create_or_update(RG, {"location": LOC}))
    assert type(e) is HttpResponseError and (e.status_code, e.error.code) == (400, "InvalidParameter")


def test_lro_never_done(emu, rc, nc, cc):
    network(rc, nc)
    emu.inject("lro_never_done", size=SIZE)
    poller = cc.virtual_machines.begin_create_or_update(RG, "vm1", vm_body())
    time.sleep(0.1)
    assert poller.done() is False and poller.status() == "InProgress"
    early = poller.result(timeout=0.05)     # trap: no TimeoutError; returns the *operation status* body parsed
    assert early["status"] == "InProgress" and early.provisioning_state is None       # as a VM: check done()
    assert emu.resource(rid(VM_T, "vm1"))["properties"]["provisioningState"] == "Creating"
    assert len(emu.calls("GET", "/operations/")) > 3
    emu.finish_operations(stuck=True)
    assert poller.result(timeout=5).provisioning_state == "Succeeded"


def test_body_style_lro_and_its_failure(rc, nc):
    """lro_style="body": no Azure-AsyncOperation; the SDK polls provisioningState on the resource URL."""
    with ArmEmulator(lro_style="body", polls=2) as emu:
        rc, nc, cc = emu.clients()
        network(rc, nc)
        assert create_vm(cc).provisioning_state == "Succeeded"
        assert [r.method for r in emu.calls(path="vm1$")] == ["PUT", "GET", "GET", "GET"]
        cc.virtual_machines.begin_delete(RG, "vm1").result()
        network(rc, nc)
        emu.inject("allocation_failed_lro")
        e = raises(lambda: create_vm(cc, "vm2"))
        assert e.status_code == 200 and e.error is None           # body polling carries no error code:
        view = cc.virtual_machines.instance_view(RG, "vm2")       # read it from the instance view instead
        assert view.statuses[0].code == "ProvisioningState/failed/AllocationFailed"


# ---------------------------------------------------------------------------------------------- validation
def test_custom_data_limit(emu, rc, nc, cc):
    network(rc, nc)
    at_limit = "A" * 87380
    assert create_vm(cc, "vm1", vm_body(custom_data=at_limit)).provisioning_state == "Succeeded"
    nc.network_interfaces.begin_create_or_update(RG, "nic2", {"location": LOC, "properties": {
        "ipConfigurations": [{"name": "c", "properties": {"subnet": {"id": SUBNET_ID}}}]}}).result()
    nic2 = rid("Microsoft.Network/networkInterfaces", "nic2")
    for bad in ("A" * 87384, "not base64!"):
        e = raises(lambda bad=bad: create_vm(cc, "vm2", vm_body(nic2, custom_data=bad)))
        assert (type(e), e.status_code, e.error.code, e.error.target) == (HttpResponseError, 400,
                                                                          "InvalidParameter", "customData")
        assert "maximum length of 87380 characters" in e.error.message


@pytest.mark.parametrize("mutate,code,needle", [
    (lambda b: b["properties"].update(foo=1), "InvalidRequestContent", "'foo'"),
    (lambda b: b["properties"]["hardwareProfile"].update(vmsize="x"), "InvalidRequestContent",
     "properties.hardwareProfile.vmsize"),
    (lambda b: b["properties"].update(priority="Cheap"), "InvalidRequestContent", "VirtualMachinePriorityTypes"),
    (lambda b: b["properties"]["storageProfile"]["osDisk"].update(diskSizeGB="200GB"), "InvalidRequestContent",
     "osDisk.diskSizeGB"),
    (lambda b: b["properties"]["storageProfile"]["osDisk"].update(deleteOption="Remove"), "InvalidRequestContent",
     "DiskDeleteOptionTypes"),
    (lambda b: b["properties"]["storageProfile"]["osDisk"]["managedDisk"].update(storageAccountType="SSD"),
     "InvalidRequestContent", "StorageAccountTypes"),
    (lambda b: b["properties"].update(evictionPolicy="Delete"), "InvalidParameter", "Spot"),
    (lambda b: b["properties"].update(priority="Low"), "InvalidParameter", "scale sets"),
    (lambda b: b["properties"]["osProfile"].update(adminUsername="admin"), "InvalidParameter", "Admin Username"),
    (lambda b: b["properties"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0].update(
        path="/root/.ssh/authorized_keys"), "InvalidParameter", "publicKeys.path"),
    (lambda b: b["properties"]["hardwareProfile"].pop("vmSize"), "InvalidParameter", "hardwareProfile.vmSize"),
    (lambda b: b.pop("location"), "LocationRequired", "location"),
    (lambda b: b.update(location="moon-1"), "LocationNotAvailableForResourceType", "moon-1"),
    (lambda b: b.update(zones=["4"]), "InvalidParameter", "zones"),
    (lambda b: b.update(tags={"a/b": "x"}), "InvalidTagNameCharacters", "a/b"),
    (lambda b: b["properties"]["networkProfile"]["networkInterfaces"][0].update(
        id=rid("Microsoft.Network/networkInterfaces", "nope")), "InvalidResourceReference", "nope"),
])
def test_vm_body_validation(emu, rc, nc, cc, mutate, code, needle):
    network(rc, nc)
    body = vm_body()
    mutate(body)
    e = raises(lambda: create_vm(cc, body=body))
    assert (e.status_code, e.error.code) == (400, code), e.error.message
    assert needle in e.error.message + (e.error.target or "")
    assert emu.state.get(RG, VM_T, "vm1") is None


def test_premium_disk_needs_premium_capable_size_and_image_must_exist(emu, rc, nc, cc):
    network(rc, nc)
    e = raises(lambda: create_vm(cc, body=vm_body(hardwareProfile={"vmSize": "Standard_NC6"})))
    assert isinstance(e, ResourceExistsError) and e.error.code == "OperationNotAllowed"   # 409, not "exists"
    body = vm_body()
    body["properties"]["storageProfile"]["imageReference"]["sku"] = "22_04-lts-gen3"
    e = raises(lambda: create_vm(cc, body=body))
    assert isinstance(e, ResourceNotFoundError) and e.error.code == "PlatformImageNotFound"
    assert e.error.target == "imageReference"


def test_read_only_fields_are_ignored_and_recorded(emu, rc, nc, cc):
    network(rc, nc)
    body = vm_body()
    body.update(id="/bogus", name="other", type="x", etag="1")
    body["properties"].update(provisioningState="Succeeded", vmId="123", instanceView={"statuses": []})
    assert create_vm(cc, body=body).name == "vm1"
    assert sorted(emu.calls("PUT", "vm1$")[0].ignored) == [
        "etag", "id", "name", "properties.instanceView", "properties.provisioningState", "properties.vmId", "type"]


@pytest.mark.parametrize("call,code", [
    (lambda nc: nc.public_ip_addresses.begin_create_or_update(RG, "p", {"location": LOC, "sku": {"name": "Basic"},
                                                                         "properties": {}}),
     "IPv4BasicSkuPublicIpCountLimitReached"),
    (lambda nc: nc.public_ip_addresses.begin_create_or_update(RG, "p", {
        "location": LOC, "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Dynamic"}}),
     "StandardSkuPublicIPAddressesMustBeStatic"),
    (lambda nc: nc.public_ip_addresses.begin_create_or_update(RG, "p", {
        "location": LOC, "sku": {"name": "Premium"}, "properties": {}}), "InvalidRequestContent"),
    (lambda nc: nc.network_security_groups.begin_create_or_update(RG, "n", {"location": LOC, "properties": {
        "securityRules": [{"name": "ssh", "properties": {
            "priority": 1000, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
            "sourceAddressPrefix": "203.0.113.7/33", "sourcePortRange": "*", "destinationAddressPrefix": "*",
            "destinationPortRange": "22"}}]}}), "SecurityRuleInvalidAddressPrefix"),
    (lambda nc: nc.network_security_groups.begin_create_or_update(RG, "n", {"location": LOC, "properties": {
        "securityRules": [{"name": "ssh", "properties": {"priority": 1000, "access": "Allow", "protocol": "Tcp",
                                                         "direction": "In"}}]}}), "InvalidRequestContent"),
    (lambda nc: nc.virtual_networks.begin_create_or_update(RG, "v", {"location": LOC, "properties": {
        "addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
        "subnets": [{"name": "s", "properties": {"addressPrefix": "10.2.0.0/24"}}]}}), "NetcfgSubnetRangeOutsideVnet"),
    (lambda nc: nc.network_interfaces.begin_create_or_update(RG, "n", {"location": LOC, "properties": {
        "ipConfigurations": [{"name": "c", "properties": {"subnet": {"id": SUBNET_ID + "x"}}}]}}),
     "InvalidResourceReference"),
    (lambda nc: nc.network_interfaces.begin_create_or_update(RG, "n", {"location": "westus2", "properties": {
        "ipConfigurations": [{"name": "c", "properties": {"subnet": {"id": SUBNET_ID}}}]}}),
     "InvalidResourceReference"),
    (lambda nc: nc.network_interfaces.begin_create_or_update(RG, "n", {"location": LOC, "properties": {
        "ipConfigurations": [{"name": "c", "properties": {"subnet": {"id": SUBNET_ID}, "publicIPAddress": {
            "id": rid("Microsoft.Network/publicIPAddresses", "pip")}}}]}}), "PublicIPAddressInUse"),
])
def test_network_validation(emu, rc, nc, call, code):
    network(rc, nc)
    e = raises(lambda: call(nc).result())
    assert (e.status_code, e.error.code) == (400, code), e.error.message


def test_resource_group_rules(emu, rc, nc):
    rc.resource_groups.create_or_update(RG, {"location": LOC})
    e = raises(lambda: rc.resource_groups.create_or_update(RG, {"location": "westus2"}))
    assert isinstance(e, ResourceExistsError) and e.error.code == "InvalidResourceGroupLocation"
    e = raises(lambda: nc.network_security_groups.begin_create_or_update("nope", "n", {"location": LOC}))
    assert isinstance(e, ResourceNotFoundError) and e.error.code == "ResourceGroupNotFound"
    e = raises(lambda: rc.resource_groups.create_or_update("bad name!", {"location": LOC}))
    assert e.status_code == 400


# ---------------------------------------------------------------------------------------------- VM features
def test_run_command_returns_planted_output(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc)
    report = {"gpu": {"name": "Tesla T4", "count": 1}, "driver": "550.127.05", "cuda": "12.4"}
    emu.set_run_command_output(RG, "vm1", json.dumps(report), "warning: x")
    res = cc.virtual_machines.begin_run_command(RG, "vm1", {
        "commandId": "RunShellScript", "script": ["cat /var/lib/trainvm/report.json"]}).result()
    msg = res.value[0].message
    assert res.value[0].code == "ProvisioningState/succeeded"
    assert msg == f"Enable succeeded: \n[stdout]\n{json.dumps(report)}\n[stderr]\nwarning: x\n"
    stdout = re.search(r"\[stdout\]\n(.*)\n\[stderr\]", msg, re.S)[1]
    assert json.loads(stdout) == report
    assert emu.run_commands[-1]["script"] == ["cat /var/lib/trainvm/report.json"]
    emu.set_run_command_output(RG, "vm1", lambda script: "x" * 5000)      # Azure keeps the last 4 KiB
    res = cc.virtual_machines.begin_run_command(RG, "vm1", {"commandId": "RunShellScript", "script": ["big"]})
    assert res.result().value[0].message.count("x") == 4096
    emu.set_power_state(RG, "vm1", "deallocated")
    e = raises(lambda: cc.virtual_machines.begin_run_command(RG, "vm1", {"commandId": "RunShellScript"}))
    assert isinstance(e, ResourceExistsError) and e.error.code == "OperationNotAllowed"


def test_power_actions_and_instance_view(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc)
    cc.virtual_machines.begin_deallocate(RG, "vm1").result()
    assert cc.virtual_machines.instance_view(RG, "vm1").statuses[-1].code == "PowerState/deallocated"
    cc.virtual_machines.begin_start(RG, "vm1").result()
    assert cc.virtual_machines.get(RG, "vm1", expand="instanceView").instance_view.statuses[-1].code == \
        "PowerState/running"


def test_boot_diagnostics_serial_log(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc)
    line = "TRAINVM_REPORT=" + base64.b64encode(b'{"ok": true}').decode()
    emu.set_serial_log(RG, "vm1", f"[  1.0] boot\nTRAINVM_STATUS=done\n{line}\n")
    uris = cc.virtual_machines.retrieve_boot_diagnostics_data(RG, "vm1", sas_uri_expiration_time_in_minutes=60)
    log = requests.get(uris.serial_console_log_blob_uri, verify=emu.ca_path, timeout=5)
    assert log.status_code == 200 and line in log.text


def test_spot_eviction(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc, body=vm_body(priority="Spot", evictionPolicy="Delete", billingProfile={"maxPrice": -1}))
    emu.evict(RG, "vm1")
    with pytest.raises(ResourceNotFoundError):
        cc.virtual_machines.get(RG, "vm1")


def test_image_versions(emu, cc):
    for pub, offer, sku, first in (("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "22.04."),
                                   ("Canonical", "ubuntu-24_04-lts", "server", "24.04."),
                                   ("Debian", "debian-12", "12-gen2", "0.2026")):
        versions = cc.virtual_machine_images.list(LOC, pub, offer, sku)
        assert len(versions) >= 3 and all(v.name.startswith(first) for v in versions)
        assert versions[0].id.startswith(f"/Subscriptions/{SUB}/Providers/Microsoft.Compute/Locations/eastus/")
    newest = cc.virtual_machine_images.list(LOC, "Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2",
                                            top=1, orderby="name desc")
    assert [v.name for v in newest] == ["22.04.202610150"]
    detail = cc.virtual_machine_images.get(LOC, "Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2",
                                           "22.04.202610150")
    assert detail.hyper_v_generation == "V2" and detail.os_disk_image.operating_system == "Linux"
    e = raises(lambda: cc.virtual_machine_images.list(LOC, "Canonical", "UbuntuServer", "nope"))
    assert isinstance(e, ResourceNotFoundError) and e.error.message == "Artifact: VMImage was not found."


def test_lists_filters_and_paging(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc)
    rc.resource_groups.create_or_update("other", {"location": "westus2", "tags": {"team": "x"}})
    emu.page_size = 1
    assert [g.name for g in rc.resource_groups.list()] == [RG, "other"]          # follows nextLink
    assert [g.name for g in rc.resource_groups.list(filter="tagName eq 'trainvm-managed' and tagValue eq "
                                                           "'true'")] == [RG]
    assert [v.name for v in cc.virtual_machines.list_all()] == ["vm1"]
    assert [v.name for v in cc.virtual_machines.list(RG)] == ["vm1"]
    assert [v.name for v in cc.virtual_machines.list_by_location(LOC)] == ["vm1"]
    assert nc.subnets.get(RG, "vnet", "default").ip_configurations[0].id == NIC_ID + "/ipConfigurations/ipconfig1"
    with pytest.raises(ResourceNotFoundError):
        nc.subnets.get(RG, "vnet", "nope")
    vms = list(rc.resources.list(filter="resourceType eq 'Microsoft.Compute/virtualMachines'"))
    assert [(r.name, r.tags) for r in vms] == [("vm1", {"trainvm-managed": "true"})]
    assert len(list(rc.resources.list_by_resource_group(RG))) == 6
    assert any("$skiptoken" in r.query for r in emu.requests)
