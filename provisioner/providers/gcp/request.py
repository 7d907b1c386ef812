"""The Compute Engine create request, as plain REST JSON (camelCase), built without any cloud SDK.

``instance_body`` is what ``GcpProvider.create`` sends (turned into ``compute_v1.Instance`` with
``Instance.from_json``, which also rejects unknown field names) and ``request_preview`` is what
``trainvm render`` / ``plan`` show offline. Importing this module never imports ``google.*``.

Decisions (SPEC "What `up` creates"):
- GPUs: ``guestAccelerators`` only on N1 hosts; A2/A3/A4/G2 machine types bundle their GPUs.
- ``scheduling``: ``onHostMaintenance=TERMINATE`` (GPU VMs cannot live-migrate) and
  ``automaticRestart=false`` on every VM; spot -> ``provisioningModel=SPOT``.
  ``lifecycle.max_run_hours`` -> ``maxRunDuration``; ``instanceTerminationAction`` follows
  ``lifecycle.on_max_run`` (stop -> STOP: compute billing ends, the boot disk and its data stay and
  bill; delete -> DELETE: the VM, boot disk and local SSDs are deleted). GCE has one
  ``instanceTerminationAction`` for both maxRunDuration and spot preemption, so on spot VMs a
  preemption does what ``on_max_run`` says too (decision: the default keeps the disk: a reclaimed spot
  VM is stopped, not deleted, and ``trainvm start`` resumes it). Local SSD data is lost either way.
- Boot disk: the profile's ``standard|balanced|ssd`` mapped per machine family
  (``providers/gcp/families.py`` ``gce_disk_type``: pd-*, or hyperdisk-balanced on Hyperdisk-only series), the image
  pinned by name (``projects/P/global/images/NAME``, resolved from the family when ``up`` runs).
- Local NVMe: ``local_nvme_gib`` -> ``ceil(gib / 375)`` SCRATCH NVMe local-ssd disks (rounded up to a
  count the machine type accepts); series that come with fixed Local SSD (A2 Ultra, A3, A4) get none
  added: theirs are attached by GCE.
- Metadata: ``startup-script``, ``enable-guest-attributes=TRUE``, ``trainvm-profile`` (resolved profile
  JSON, read back by ``verify``), ``trainvm-hash`` (full profile hash), ``trainvm-image`` (the pinned image).
- Service account: the project's default one with the smallest scopes that work: logging.write and
  monitoring.write always; devstorage.read_only always (the bootstrap fetches the payload from GCS as this
  account, gcp_store.py; gs:// data sources need it too); cloud-platform instead of it
  when the resolved profile references a ``secret://gcp/...`` secret (``LaunchSpec.secret_refs``: Secret Manager
  has no narrower scope); compute
  when ``lifecycle.on_idle`` is delete (the idle watchdog calls instances.delete on its own VM; the
  service account also needs compute.instances.delete, which the default one has through Editor).
  ``on_idle: stop`` needs no scope: a shutdown from inside the guest leaves the instance TERMINATED.
- Network: the ``default`` network with one ONE_TO_ONE_NAT external address (IPv4 only).
- SSH (SPEC: ``ssh_from`` is the only source allowed to SSH in): on a default network, the project's
  ``default-allow-ssh`` rule (priority 65534) lets tcp:22 in from 0.0.0.0/0 to every instance. With
  ``ssh_from`` the VM gets its own network tag (``ssh_tag``: ``<vm>-ssh``) and two VPC firewall rules
  target that tag (``firewall_bodies``): ``<vm>-ssh-allow`` allows tcp:22 from exactly ``ssh_from`` at
  priority 900, ``<vm>-ssh-deny`` denies tcp:22 from 0.0.0.0/0 at priority 910. Lower numbers win, so
  the allow beats the deny and the deny beats default-allow-ssh (and any other allow rule numbered
  above 910, e.g. one for IAP's 35.235.240.0/20). The deny names IPv4 only: GCE rejects a rule that mixes
  IPv4 and IPv6 ranges, and the VM has no IPv6 address (IPV4_ONLY on the default network), so there is
  no IPv6 path to close. Names longer than 63 characters are cut and made unique with a hash of the VM
  name. Without ``ssh_from`` nothing is created and the project's firewall decides (``ssh_notes`` says so).
- Secure Boot is off explicitly: the startup script installs DKMS-built NVIDIA modules, which an
  unenrolled MOK would make the kernel reject (startup-scripts.md §1.8). vTPM and integrity monitoring stay on.
"""

from __future__ import annotations

import hashlib
import ipaddress
import uuid

from provisioner.providers.base import InvalidRequestError, LaunchSpec
from provisioner.providers.gcp.families import LOCAL_SSD_DISK_GIB, gce_disk_type, gce_family, local_ssd_count
from provisioner.providers.gcp.rest_types import (
    DiskBody,
    FirewallEntry,
    FirewallRule,
    InstanceBody,
    MetadataBody,
    MetadataEntry,
    SchedulingBody,
)
from provisioner.providers.offer import Offer
from provisioner.providers.registry import GceImage, cloud

#: trainvm GPU name -> GCE accelerator type attachable to N1 hosts.
N1_ACCELERATORS = {"T4": "nvidia-tesla-t4", "V100": "nvidia-tesla-v100", "P100": "nvidia-tesla-p100",
                   "P4": "nvidia-tesla-p4", "K80": "nvidia-tesla-k80"}

SCOPE_LOGGING = "https://www.googleapis.com/auth/logging.write"
SCOPE_MONITORING = "https://www.googleapis.com/auth/monitoring.write"
SCOPE_GCS_READ = "https://www.googleapis.com/auth/devstorage.read_only"
SCOPE_CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
SCOPE_COMPUTE = "https://www.googleapis.com/auth/compute"  # on_idle: delete (the VM deletes itself)
SSH_ALLOW_PRIORITY, SSH_DENY_PRIORITY = 900, 910  # both ahead of default-allow-ssh (65534)
DEFAULT_ALLOW_SSH_PRIORITY = 65534
GCE_NAME_MAX = 63  # names and network tags: [a-z]([-a-z0-9]{0,61}[a-z0-9])?
METADATA_VALUE_MAX = 256 * 1024  # bytes per metadata value
METADATA_TOTAL_MAX = 512 * 1024  # bytes for all keys + values
TERMINATION_ACTION = {"stop": "STOP", "delete": "DELETE"}  # lifecycle.on_max_run -> scheduling.instanceTerminationAction
MAX_RUN_SECONDS = (30, 120 * 86400)  # what GCE accepts for maxRunDuration
REQUEST_ID_NAMESPACE = uuid.UUID("5b0f7d1e-4c1a-5f3e-9a57-7a1f3c0e7d21")


def image_family(os_name: str) -> tuple[str, str]:
    """(image project, image family) of ``stack.os`` on GCE, from the cloud registry."""
    ref = cloud("gcp").os_images.get(os_name)
    if not isinstance(ref, GceImage):
        raise InvalidRequestError(f"no GCE image is known for OS {os_name!r}")
    return ref.project, ref.family


def family_url(os_name: str) -> str:
    project, family = image_family(os_name)
    return f"projects/{project}/global/images/family/{family}"


def request_id(spec: LaunchSpec, offer: Offer, salt: str = "") -> str:
    """The insert's requestId: the same VM on the same offer (zone, machine type, GPU model and count) always
    sends the same one, so a re-run of an interrupted ``up`` (or a retried insert) is de-duplicated by GCE
    instead of creating a second VM; another offer in the same zone (a failover to another machine type) is
    another request, never answered with the earlier offer's operation. ``salt`` (the name of a replayed,
    stale operation) derives the next id when the old one is used up."""
    what = f"{offer.zone}/{offer.instance_type}/{offer.gpu_name}x{offer.gpu_count}"
    return str(uuid.uuid5(REQUEST_ID_NAMESPACE, f"{spec.name}/{spec.profile_hash}/{what}/{salt}"))


#: the ``secret://KIND/`` of Secret Manager, the store a GCE VM reads with its service account (registry secret_kinds)
SECRET_KIND = "gcp"


def scopes_for(spec: LaunchSpec) -> list[str]:
    """The VM's service-account scopes (the module docstring says why each). devstorage.read_only is on every VM:
    its bootstrap fetches the payload from the project's GCS bucket with the metadata server's token
    (providers/gcp/store.py), and a token without a storage scope is refused whatever the IAM policy grants;
    cloud-platform, when a ``secret://gcp/`` reference of the resolved profile needs it (``spec.secret_refs``: never
    a search of the profile's text, where any string may contain those characters), covers storage as well."""
    scopes = [SCOPE_LOGGING, SCOPE_MONITORING]
    if any(r.kind == SECRET_KIND for r in spec.secret_refs):
        scopes.append(SCOPE_CLOUD_PLATFORM)
    else:
        scopes.append(SCOPE_GCS_READ)  # the payload, and gs:// data sources
    if spec.on_idle == "delete" and SCOPE_CLOUD_PLATFORM not in scopes:
        scopes.append(SCOPE_COMPUTE)
    return scopes


def network_url(project: str) -> str:
    return f"projects/{project}/global/networks/default"


def fit_name(base: str, suffix: str) -> str:
    """``base + suffix`` when it fits GCE's 63 characters; else base cut short + 8 hex of its sha256 + suffix."""
    if len(base) + len(suffix) <= GCE_NAME_MAX:
        return base + suffix
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    return f"{base[:GCE_NAME_MAX - len(suffix) - 9].rstrip('-')}-{digest}{suffix}"


def ssh_tag(vm: str) -> str:
    """The network tag that the VM's SSH firewall rules target (one per VM)."""
    return fit_name(vm, "-ssh")


def ssh_rule_names(vm: str) -> tuple[str, str]:
    """(allow rule, deny rule) names of a VM: deterministic, so a re-run and ``down`` find them."""
    return fit_name(vm, "-ssh-allow"), fit_name(vm, "-ssh-deny")


def firewall_bodies(spec: LaunchSpec, project: str) -> list[FirewallRule]:
    """The two ``firewalls.insert`` bodies (REST JSON) that make ``ssh_from`` the only SSH source; [] without it."""
    if not spec.ssh_from:
        return []
    allow, deny = ssh_rule_names(spec.name)
    owner = f"VM {spec.name} (profile {spec.profile_name}, sha256 {spec.profile_hash[:16]})"
    network, tags = network_url(project), [ssh_tag(spec.name)]
    ssh: list[FirewallEntry] = [{"IPProtocol": "tcp", "ports": ["22"]}]
    return [
        {"name": allow, "description": f"trainvm: SSH to {owner} only from {spec.ssh_from}", "network": network,
         "direction": "INGRESS", "targetTags": tags, "priority": SSH_ALLOW_PRIORITY, "sourceRanges": [spec.ssh_from],
         "allowed": ssh},
        {"name": deny, "description": f"trainvm: no SSH to {owner} from elsewhere", "network": network,
         "direction": "INGRESS", "targetTags": tags, "priority": SSH_DENY_PRIORITY, "sourceRanges": ["0.0.0.0/0"],
         "denied": ssh},
    ]


def firewall_shape(rule: FirewallRule) -> dict[str, object]:
    """What decides whether a stored rule (REST JSON, as GET returns it) is the one ``firewall_bodies`` wants:
    the fields trainvm sets, with the defaults GCE fills in and the network as a relative path."""
    net = str(rule.get("network") or "global/networks/default")
    net = net[net.index("projects/"):] if "projects/" in net else net

    def entries(listed: list[FirewallEntry] | None) -> list[tuple[str, tuple[str, ...]]]:
        return sorted((str(e.get("IPProtocol", "")).lower(), tuple(e.get("ports") or ())) for e in listed or ())

    others = (("sourceTags", rule.get("sourceTags")), ("sourceServiceAccounts", rule.get("sourceServiceAccounts")),
              ("targetServiceAccounts", rule.get("targetServiceAccounts")),
              ("destinationRanges", rule.get("destinationRanges")))

    return {"name": rule.get("name"), "description": rule.get("description") or "", "network": net,
            "direction": rule.get("direction") or "INGRESS", "priority": int(rule.get("priority", 1000)),
            "sourceRanges": sorted(rule.get("sourceRanges") or ()), "targetTags": sorted(rule.get("targetTags") or ()),
            "allowed": entries(rule.get("allowed")), "denied": entries(rule.get("denied")),
            "disabled": bool(rule.get("disabled")), "other": sorted(k for k, v in others if v)}


def is_trainvm_rule(rule: FirewallRule, vm: str) -> bool:
    """A rule that trainvm created for ``vm`` (so a re-run may update it and ``down`` may delete it)."""
    return (str(rule.get("description") or "").startswith("trainvm:") and f"VM {vm} " in str(rule.get("description"))
            and list(rule.get("targetTags") or ()) == [ssh_tag(vm)])


def ssh_notes(spec: LaunchSpec, tagged: bool | None = None) -> list[str]:
    """What `up` prints about SSH access. ``tagged``: whether the VM carries its SSH tag (default: a new VM
    carries it exactly when ``ssh_from`` is set); an adopted VM created otherwise gets its own note."""
    tagged = bool(spec.ssh_from) if tagged is None else tagged
    allow, deny = ssh_rule_names(spec.name)
    if tagged and spec.ssh_from:
        note = (f"SSH (tcp:22) is allowed only from {spec.ssh_from}: firewall rules {allow} (allow, priority "
                f"{SSH_ALLOW_PRIORITY}) and {deny} (deny from 0.0.0.0/0, priority {SSH_DENY_PRIORITY}) target the "
                f"VM's network tag {ssh_tag(spec.name)} ahead of default-allow-ssh ({DEFAULT_ALLOW_SSH_PRIORITY}); "
                f"`trainvm down {spec.name}` deletes them")
        if ipaddress.ip_network(spec.ssh_from, strict=False).version == 6:
            note += "; the VM has only an IPv4 address, so SSH from an IPv6 range cannot reach it"
        return [note]
    if tagged:
        return [f"SSH to this VM is restricted by the firewall rules {allow} and {deny} created with it "
                f"(`trainvm down {spec.name}` deletes them)"]
    if spec.ssh_from:
        return [f"{spec.name} already existed without trainvm's SSH firewall rules, so ssh_from {spec.ssh_from} is "
                "not applied: the project's firewall governs SSH (default-allow-ssh allows 0.0.0.0/0 on the default "
                f"network); run `trainvm down {spec.name}` and `up` again to restrict it"]
    return ["SSH is governed by the project's firewall: on the default network, default-allow-ssh allows tcp:22 "
            "from any address (0.0.0.0/0). To allow only your address, pass --ssh-from CIDR (e.g. 203.0.113.7/32) "
            "or set placement.ssh_from"]


def ssh_argv(name: str, zone: str, project: str, command: list[str]) -> list[str]:
    """GCE VMs get no SSH key from trainvm: ``gcloud compute ssh`` installs yours (metadata or OS Login)
    and then runs ``ssh`` with it."""
    return ["gcloud", "compute", "ssh", name, "--zone", zone, "--project", project, *(["--", *command] if command else [])]


def open_ssh_hint(name: str, project: str) -> str:
    allow, _ = ssh_rule_names(name)
    return (f"if the VM was created with --ssh-from, your address must be inside that range (firewall rule {allow}); "
            "otherwise the project's firewall must allow tcp:22, e.g.\n"
            f"  gcloud compute firewall-rules create allow-ssh-{name} --project {project} --network default "
            f"--allow tcp:22 --source-ranges <your IP>/32 --target-tags {ssh_tag(name)}\n"
            "  (or `trainvm down` and `up --ssh-from CIDR` again)")


def _metadata(spec: LaunchSpec, image: str) -> MetadataBody:
    # GCE's startup-script is text (registry: gce-metadata, "plain"); launch_spec hands every cloud the text
    assert isinstance(spec.user_data, str), "a GCE startup script is text"
    items: list[MetadataEntry] = [
        {"key": "startup-script", "value": spec.user_data},
        {"key": "enable-guest-attributes", "value": "TRUE"},
        {"key": "trainvm-profile", "value": spec.profile_json},
        {"key": "trainvm-hash", "value": spec.profile_hash},
        {"key": "trainvm-image", "value": image},
    ]
    total = 0
    for item in items:
        size = len(item["value"].encode())
        total += size + len(item["key"])
        if size > METADATA_VALUE_MAX:
            what = "the startup script" if item["key"] == "startup-script" else f"metadata {item['key']}"
            raise InvalidRequestError(f"{what} is {size} bytes; GCE allows {METADATA_VALUE_MAX} bytes per metadata value",
                                      code="METADATA_TOO_LARGE")
    if total > METADATA_TOTAL_MAX:
        raise InvalidRequestError(f"instance metadata totals {total} bytes; GCE allows {METADATA_TOTAL_MAX}",
                                  code="METADATA_TOO_LARGE")
    return {"items": items}


def _scheduling(spec: LaunchSpec, offer: Offer) -> SchedulingBody:
    sched: SchedulingBody = {"automaticRestart": False, "provisioningModel": "SPOT" if spec.spot else "STANDARD"}
    if offer.gpu_count > 0:
        sched["onHostMaintenance"] = "TERMINATE"
    if spec.spot or spec.max_run_hours:  # one field serves both preemption and maxRunDuration
        sched["instanceTerminationAction"] = TERMINATION_ACTION[spec.on_max_run]
    if spec.max_run_hours:
        lo, hi = MAX_RUN_SECONDS
        seconds = min(hi, max(lo, round(spec.max_run_hours * 3600)))
        sched["maxRunDuration"] = {"seconds": str(seconds)}
    return sched


def _disks(spec: LaunchSpec, offer: Offer, zone: str, image: str) -> list[DiskBody]:
    family = gce_family(offer.instance_type)
    disk_type = gce_disk_type(family, spec.boot_disk_type)
    if disk_type is None:
        raise InvalidRequestError(f"boot disk type {spec.boot_disk_type!r} is not available on {offer.instance_type}",
                                  code="DISK_TYPE")
    disks: list[DiskBody] = [{
        "boot": True, "autoDelete": True, "type": "PERSISTENT", "deviceName": "boot",
        "initializeParams": {"sourceImage": image, "diskType": f"zones/{zone}/diskTypes/{disk_type}",
                             "diskSizeGb": str(spec.boot_disk_gib), "labels": dict(spec.labels)},
    }]
    for _ in range(local_ssd_count(offer.instance_type, spec.local_nvme_gib)):
        disks.append({"type": "SCRATCH", "interface": "NVME", "autoDelete": True,
                      "initializeParams": {"diskType": f"zones/{zone}/diskTypes/local-ssd",
                                           "diskSizeGb": str(LOCAL_SSD_DISK_GIB)}})
    return disks


def instance_body(spec: LaunchSpec, offer: Offer, image: str, project: str) -> InstanceBody:
    """The ``instances.insert`` body (REST JSON; int64 values as strings, as the SDK sends them)."""
    if offer.cloud != "gcp" or not offer.zone:
        raise InvalidRequestError(f"not a zonal GCE offer: {offer.cloud} {offer.location} {offer.instance_type}")
    zone = offer.zone
    body: InstanceBody = {
        "name": spec.name,
        "description": f"trainvm: profile {spec.profile_name} (sha256 {spec.profile_hash[:16]})",
        "machineType": f"zones/{zone}/machineTypes/{offer.instance_type}",
    }
    if gce_family(offer.instance_type) == "n1" and offer.gpu_count > 0:
        accel = N1_ACCELERATORS.get(offer.gpu_name)
        if accel is None:
            raise InvalidRequestError(f"GPU {offer.gpu_name} cannot be attached to an N1 host", code="ACCELERATOR")
        body["guestAccelerators"] = [{"acceleratorType": f"zones/{zone}/acceleratorTypes/{accel}",
                                      "acceleratorCount": offer.gpu_count}]
    body["scheduling"] = _scheduling(spec, offer)
    body["disks"] = _disks(spec, offer, zone, image)
    body["networkInterfaces"] = [{"network": network_url(project),
                                  "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]}]
    body["serviceAccounts"] = [{"email": "default", "scopes": scopes_for(spec)}]
    body["metadata"] = _metadata(spec, image)
    body["labels"] = dict(spec.labels)
    if spec.ssh_from:
        body["tags"] = {"items": [ssh_tag(spec.name)]}
    body["shieldedInstanceConfig"] = {"enableSecureBoot": False, "enableVtpm": True, "enableIntegrityMonitoring": True}
    return body


def request_preview(spec: LaunchSpec, offer: Offer, project: str = "PROJECT") -> dict[str, object]:
    """The body ``up`` would send, offline: the image is shown as its family URL (``up`` pins the image
    name the family points to when it runs, and records it in the ``trainvm-image`` metadata). A cluster
    (``spec.nodes`` > 1): every body ``up`` sends for it, by method (gcp_cluster_request.request_preview)."""
    if spec.nodes > 1:
        from provisioner.providers.gcp.cluster_request import request_preview as cluster_preview  # lazy: startup

        return cluster_preview(spec, offer, family_url(spec.os), project)
    return dict(instance_body(spec, offer, family_url(spec.os), project))
