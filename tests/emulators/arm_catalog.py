"""What the ARM emulator (tests/emulators/arm.py) knows about Azure itself: the resource types it models,
regions, the platform-image catalogue, VM size families, and ARM resource-id helpers."""
from __future__ import annotations

import datetime
import re

NET, COMP = "Microsoft.Network", "Microsoft.Compute"
TYPES = {t.split("/")[1].lower(): t for t in (
    f"{NET}/virtualNetworks", f"{NET}/networkSecurityGroups", f"{NET}/publicIPAddresses",
    f"{NET}/networkInterfaces", f"{COMP}/virtualMachines", f"{COMP}/disks", f"{COMP}/virtualMachineScaleSets",
    f"{COMP}/proximityPlacementGroups")}
VM_T, NIC_T, PIP_T, NSG_T, VNET_T, DISK_T, VMSS_T, PPG_T = (TYPES[k] for k in (
    "virtualmachines", "networkinterfaces", "publicipaddresses", "networksecuritygroups", "virtualnetworks",
    "disks", "virtualmachinescalesets", "proximityplacementgroups"))

LOCATIONS = set("""eastus eastus2 westus westus2 westus3 centralus northcentralus southcentralus westcentralus
canadacentral canadaeast brazilsouth northeurope westeurope uksouth ukwest francecentral germanywestcentral
swedencentral switzerlandnorth norwayeast polandcentral italynorth spaincentral eastasia southeastasia japaneast
japanwest koreacentral australiaeast australiasoutheast centralindia southindia uaenorth southafricanorth
qatarcentral israelcentral mexicocentral newzealandnorth""".split())

# (publisher, offer, sku) -> (hyperVGeneration, versions, os version)
IMAGES = {
    ("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"):
        ("V2", ["22.04.202609230", "22.04.202610010", "22.04.202610150"], "22.04"),
    ("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts"):
        ("V1", ["22.04.202609230", "22.04.202610010", "22.04.202610150"], "22.04"),
    ("Canonical", "ubuntu-24_04-lts", "server"):
        ("V2", ["24.04.202609230", "24.04.202610010", "24.04.202610150"], "24.04"),
    ("Canonical", "ubuntu-24_04-lts", "server-gen1"):
        ("V1", ["24.04.202609230", "24.04.202610010", "24.04.202610150"], "24.04"),
    ("Debian", "debian-12", "12-gen2"): ("V2", ["0.20260915.2230", "0.20261001.2245", "0.20261015.2260"], "12"),
    ("Debian", "debian-12", "12"): ("V1", ["0.20260915.2230", "0.20261001.2245", "0.20261015.2260"], "12"),
}


def now():
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


def under(child, parent):
    """True when `child` is `parent` or one of its sub-resources (case-insensitive ARM ids)."""
    child, parent = child.lower(), parent.lower()
    return child == parent or child.startswith(parent + "/")


def parse_id(rid):
    """'/subscriptions/s/resourceGroups/rg/providers/NS/type/name[/child/cname]' -> (rg, type, name, child)."""
    m = re.fullmatch(r"/subscriptions/[^/]+/resourcegroups/([^/]+)/providers/([^/]+)/([^/]+)/([^/]+)"
                     r"(?:/([^/]+)/([^/]+))?", rid or "", re.I)
    if not m or m[3].lower() not in TYPES:
        return None
    return m[1], TYPES[m[3].lower()], m[4], (m[6] if m[5] else None)


def vm_family(size):
    known = [(r"NC\d+as_T4_v3", "standardNCASv3_T4Family"), (r"NC\d+ads_A100_v4", "StandardNCADSA100v4Family"),
             (r"NV\d+ads_A10_v5", "StandardNVADSA10v5Family"), (r"NC\d+ads_H100_v5", "standardNCadsH100v5Family"),
             (r"ND96is?r_H100_v5", "standardNDSH100v5Family"), (r"ND96am?sr_A100_v4", "standardNDAMSv4_A100Family")]
    for pat, fam in known:
        if re.search(pat, size, re.I):
            return fam
    m = re.match(r"Standard_([A-Z]+)\d+(?:-\d+)?([a-z]*)(?:_(v\d))?", size)
    return f"standard{m[1]}{m[2].upper()}{m[3] or ''}Family" if m else "standardFamily"


def vcpus(size):
    m = re.match(r"(?:Standard|Basic)_[A-Z]+(\d+)", size)
    return int(m[1]) if m else 1
