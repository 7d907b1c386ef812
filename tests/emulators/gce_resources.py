"""What the Compute Engine emulator answers: the Operation / Instance / Image resources it stores, pagination
and aggregatedList scopes. Pure functions, no state."""
from __future__ import annotations

import base64
import copy
import re
import time
import zlib
from datetime import datetime, timedelta, timezone

from .gce_validate import relative

API = "https://www.googleapis.com/compute/v1/"


def now() -> str:
    return datetime.now(timezone(timedelta(hours=-8))).isoformat(timespec="milliseconds")


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def instance_resource(body: dict, project: str, zone: str, inst_id: str, rng) -> dict:
    """The Instance as instances.get returns it right after insert (status PROVISIONING, no natIP yet)."""
    zurl, name = f"{API}projects/{project}/zones/{zone}", body["name"]
    inst, disks, nics = copy.deepcopy(body), [], []
    for i, d in enumerate(body.get("disks") or []):
        init = d.get("initializeParams") or {}
        dname = init.get("diskName") or (name if d.get("boot") else f"{name}-{i}")
        disks.append({"kind": "compute#attachedDisk", "type": d.get("type", "PERSISTENT"), "mode": d.get("mode", "READ_WRITE"),
                      "source": d.get("source") or f"{zurl}/disks/{dname}", "deviceName": d.get("deviceName", dname),
                      "index": i, "boot": bool(d.get("boot")), "autoDelete": bool(d.get("autoDelete")),
                      "interface": d.get("interface", "SCSI"), "diskSizeGb": str(init.get("diskSizeGb", "10")),
                      "architecture": "X86_64"})
    for i, n in enumerate(body.get("networkInterfaces") or []):
        net = relative(n.get("network") or "global/networks/default").split("/")[-1]
        nics.append({"kind": "compute#networkInterface", "name": f"nic{i}", "stackType": "IPV4_ONLY",
                     "network": f"{API}projects/{project}/global/networks/{net}",
                     "subnetwork": f"{API}projects/{project}/regions/{region_of(zone)}/subnetworks/{net}",
                     "networkIP": f"10.128.0.{rng.randrange(2, 254)}", "fingerprint": "aGVsbG8xMjM=",
                     "accessConfigs": [{"kind": "compute#accessConfig", "type": a.get("type", "ONE_TO_ONE_NAT"),
                                        "name": a.get("name", "External NAT"), "networkTier": a.get("networkTier", "PREMIUM")}
                                       for a in n.get("accessConfigs") or []]})
    spot = (body.get("scheduling") or {}).get("provisioningModel") == "SPOT"
    sched = {"onHostMaintenance": "TERMINATE" if spot else "MIGRATE", "automaticRestart": not spot,
             "preemptible": False, "provisioningModel": "STANDARD", **(body.get("scheduling") or {})}
    for acc in inst.get("guestAccelerators") or []:
        acc["acceleratorType"] = f"{zurl}/acceleratorTypes/{acc['acceleratorType'].rsplit('/', 1)[1]}"
    inst.update(kind="compute#instance", id=inst_id, creationTimestamp=now(), status="PROVISIONING", zone=zurl,
                machineType=f"{zurl}/machineTypes/{body['machineType'].rsplit('/', 1)[1]}",
                selfLink=f"{zurl}/instances/{name}", disks=disks, networkInterfaces=nics, scheduling=sched,
                metadata={"kind": "compute#metadata", "fingerprint": "ZmluZ2VycHJpbnQ=",
                          "items": (body.get("metadata") or {}).get("items") or []},
                labels=dict(body.get("labels") or {}), labelFingerprint="bGFiZWxz", fingerprint="aW5zdGFuY2U=",
                cpuPlatform="Unknown CPU Platform", startRestricted=False, satisfiesPzi=False,
                deletionProtection=bool(body.get("deletionProtection")), canIpForward=bool(body.get("canIpForward")),
                tags={"fingerprint": "dGFncw==", **(body.get("tags") or {})})
    return inst


def image_known(path: str, images: dict) -> bool:
    """projects/P/global/images/family/F of a known family, or an image name in a known family's series."""
    m = re.fullmatch(r"projects/([^/]+)/global/images/(family/)?([^/]+)", path)
    if not m:
        return False
    project, is_family, name = m.groups()
    if is_family:
        return (project, name) in images
    return any(p == project and (name == n or re.fullmatch(re.escape(n.rsplit("-v", 1)[0]) + r"-v\d{8}", name))
               for (p, _), n in images.items())


def image_resource(project: str, name: str, family: str) -> dict:
    return {"kind": "compute#image", "id": str(zlib.crc32(f"{project}/{name}".encode()) * 1000003), "name": name,
            "family": family, "status": "READY", "architecture": "X86_64", "diskSizeGb": "10", "sourceType": "RAW",
            "selfLink": f"{API}projects/{project}/global/images/{name}", "creationTimestamp": "2026-10-15T09:00:00.000-07:00"}


def operation_resource(project: str, zone: str, op_type: str, name: str, target_id: str, status: str, rng) -> dict:
    op_name = (f"operation-{int(time.time() * 1000)}-{rng.getrandbits(52):013x}-"
               f"{rng.getrandbits(32):08x}-{rng.getrandbits(32):08x}")
    zurl = f"{API}projects/{project}/zones/{zone}"
    return {"kind": "compute#operation", "id": str(rng.getrandbits(63)), "name": op_name, "zone": zurl,
            "operationType": op_type, "targetLink": f"{zurl}/instances/{name}", "targetId": target_id,
            "status": status, "user": "emulator@example.iam.gserviceaccount.com", "progress": 0,
            "insertTime": now(), "startTime": now(), "selfLink": f"{zurl}/operations/{op_name}"}


def paginate(items: list, token: str | None, max_results: int) -> tuple[list, str | None]:
    """One page and the next pageToken (opaque offset); ValueError for a token this emulator did not issue."""
    start = int(base64.urlsafe_b64decode(token.encode()).decode()) if token else 0
    size = max_results or 500
    nxt = base64.urlsafe_b64encode(str(start + size).encode()).decode() if start + size < len(items) else None
    return items[start:start + size], nxt


def scoped_items(zones, page: list, unreachable=()) -> dict:
    """aggregatedList `items`: every zone scope, with its instances or a NO_RESULTS_ON_PAGE / UNREACHABLE warning."""
    items = {}
    for zone in zones:
        scope = f"zones/{zone}"
        insts = [i for i in page if i["zone"].endswith("/" + scope)]
        if zone in unreachable:
            items[scope] = {"warning": {"code": "UNREACHABLE", "message": f"Scope '{scope}' is unreachable.",
                                        "data": [{"key": "scope", "value": scope}]}}
        elif insts:
            items[scope] = {"instances": insts}
        else:
            items[scope] = {"warning": {"code": "NO_RESULTS_ON_PAGE", "data": [{"key": "scope", "value": scope}],
                                        "message": f"There are no results for scope '{scope}' on this page."}}
    return items
