"""The ARM emulator's Compute Gallery (tests/emulators/arm_gallery.py) driven by the real azure-mgmt-compute client:
what it accepts and refuses when a VM is generalized, captured into an image version and booted from it. The error
texts are approximations (see arm_gallery.py); the tests pin the status and the code, which is what trainvm reads.
Not modelled: replication time and status, replica storage billing."""
from __future__ import annotations

import pytest

from tests.azure import test_emulator as base
from tests.azure.test_emulator import LOC, RG, create_vm, network, raises, rid, vm_body

# the ARM emulator fixtures of test_emulator.py (one server per module, reset per test)
server, emu, clients, rc, nc, cc = base.server, base.emu, base.clients, base.rc, base.nc, base.cc

GRP, GALLERY, DEF = "trainvm-gallery-eastus", "trainvm_eastus", "trainvm-bert"
VM_ID = rid("Microsoft.Compute/virtualMachines", "vm1")
TL = {"securityType": "TrustedLaunch", "uefiSettings": {"secureBootEnabled": False, "vTpmEnabled": True}}


def _definition(cc, state="Generalized", features=("TrustedLaunchSupported",), name=DEF, sku=DEF):
    body = {"location": LOC, "properties": {
        "osType": "Linux", "osState": state, "hyperVGeneration": "V2",
        "identifier": {"publisher": "trainvm", "offer": "baked", "sku": sku},
        "features": [{"name": "SecurityType", "value": f} for f in features]}}
    return cc.gallery_images.begin_create_or_update(GRP, GALLERY, name, body).result()


def _version_body(regions=(LOC,), source=VM_ID):
    return {"location": LOC, "tags": {"trainvm-kind": "baked-image"}, "properties": {
        "publishingProfile": {"targetRegions": [{"name": r} for r in regions]},
        "storageProfile": {"source": {"virtualMachineId": source}}}}


@pytest.fixture
def gallery(emu, rc, nc, cc):
    network(rc, nc)
    create_vm(cc, body=vm_body(securityProfile=TL))
    rc.resource_groups.create_or_update(GRP, {"location": LOC})
    cc.galleries.begin_create_or_update(GRP, GALLERY, {"location": LOC}).result()
    _definition(cc)
    return emu


def _west_nic(rc, nc, rg="rg-west", loc="westus2"):
    rc.resource_groups.create_or_update(rg, {"location": loc})
    nc.virtual_networks.begin_create_or_update(rg, "vnet", {"location": loc, "properties": {
        "addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
        "subnets": [{"name": "default", "properties": {"addressPrefix": "10.1.0.0/24"}}]}}).result()
    subnet = rid("Microsoft.Network/virtualNetworks", "vnet", rg) + "/subnets/default"
    return nc.network_interfaces.begin_create_or_update(rg, "nic", {"location": loc, "properties": {
        "ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": subnet}}}]}}).result().id


def _version(cc, name="1.0.0", **kw):
    return cc.gallery_image_versions.begin_create_or_update(GRP, GALLERY, DEF, name, _version_body(**kw)).result()


def test_capture_needs_a_deallocated_generalized_vm(gallery, cc):
    e = raises(lambda: cc.virtual_machines.generalize(RG, "vm1"))
    assert (e.status_code, e.error.code) == (409, "OperationNotAllowed")  # running
    e = raises(lambda: _version(cc))
    assert (e.status_code, e.error.code) == (409, "OperationNotAllowed")  # not deallocated
    cc.virtual_machines.begin_deallocate(RG, "vm1").result()
    e = raises(lambda: _version(cc))
    assert (e.status_code, e.error.code) == (400, "InvalidParameter") and "not generalized" in e.error.message
    cc.virtual_machines.generalize(RG, "vm1")
    v = _version(cc, regions=("East US", "westus2"))
    assert v.properties.provisioning_state == "Succeeded"
    assert v.properties.storage_profile.os_disk_image.size_in_gb == 128
    assert [t.name for t in v.properties.publishing_profile.target_regions] == ["East US", "westus2"]
    assert [x.name for x in cc.gallery_image_versions.list_by_gallery_image(GRP, GALLERY, DEF)] == ["1.0.0"]
    assert [g.name for g in cc.galleries.list()] == [GALLERY]


def test_version_names_and_target_regions_are_checked(gallery, cc):
    cc.virtual_machines.begin_deallocate(RG, "vm1").result()
    cc.virtual_machines.generalize(RG, "vm1")
    for bad in ("1.0", "1.0.rc1", "1.0.4294967296"):
        assert raises(lambda bad=bad: _version(cc, name=bad)).status_code == 400
    e = raises(lambda: _version(cc, regions=("westus2",)))  # the version's own region is missing
    assert (e.status_code, e.error.code) == (400, "InvalidParameter")
    assert raises(lambda: _version(cc, regions=(LOC, "mars-east"))).status_code == 400
    e = raises(lambda: _version(cc, source=rid("Microsoft.Compute/virtualMachines", "nope")))
    assert e.status_code == 404


def test_nested_resources_block_deletes_and_the_identifier_is_unique(gallery, cc):
    e = raises(lambda: _definition(cc, name="other"))  # same (publisher, offer, sku) under another name
    assert e.status_code == 409
    cc.virtual_machines.begin_deallocate(RG, "vm1").result()
    cc.virtual_machines.generalize(RG, "vm1")
    _version(cc)
    assert raises(lambda: cc.gallery_images.begin_delete(GRP, GALLERY, DEF).result()).status_code == 409
    assert raises(lambda: cc.galleries.begin_delete(GRP, GALLERY).result()).status_code == 409
    cc.gallery_image_versions.begin_delete(GRP, GALLERY, DEF, "1.0.0").result()
    cc.gallery_images.begin_delete(GRP, GALLERY, DEF).result()
    cc.galleries.begin_delete(GRP, GALLERY).result()
    assert list(cc.galleries.list()) == []


def test_a_vm_boots_a_version_only_where_it_has_a_replica_and_trusted_launch_needs_the_feature(gallery, rc, nc, cc):
    cc.virtual_machines.begin_deallocate(RG, "vm1").result()
    cc.virtual_machines.generalize(RG, "vm1")
    version = _version(cc)
    cc.virtual_machines.begin_delete(RG, "vm1").result()  # the version is a copy: the builder can go
    network(rc, nc)  # vm1's NIC went with it (deleteOption Delete)
    body = vm_body(securityProfile=TL)
    body["properties"]["storageProfile"]["imageReference"] = {"id": version.id}
    vm = create_vm(cc, "vm2", body=body)
    assert vm.storage_profile.image_reference.id == version.id
    west = _west_nic(rc, nc)
    elsewhere = vm_body(west, securityProfile=TL)
    elsewhere.update(location="westus2")
    elsewhere["properties"]["storageProfile"]["imageReference"] = {"id": version.id}
    e = raises(lambda: create_vm(cc, "vm3", body=elsewhere, rg="rg-west"))
    assert (e.status_code, e.error.code) == (404, "GalleryImageNotPublished")  # no replica in westus2
    _definition(cc, name="no-tl", sku="no-tl", features=())
    cc.virtual_machines.begin_deallocate(RG, "vm2").result()
    cc.virtual_machines.generalize(RG, "vm2")
    plain = cc.gallery_image_versions.begin_create_or_update(GRP, GALLERY, "no-tl", "1.0.0", _version_body(
        source=rid("Microsoft.Compute/virtualMachines", "vm2"))).result()
    cc.virtual_machines.begin_delete(RG, "vm2").result()
    body["properties"]["storageProfile"]["imageReference"] = {"id": plain.id}
    e = raises(lambda: create_vm(cc, "vm4", body=body))
    assert (e.status_code, e.error.code) == (400, "InvalidParameter") and "Trusted Launch" in e.error.message
