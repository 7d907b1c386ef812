"""Whether this machine is a VM of a given cloud, from its DMI/SMBIOS strings (local files, no network), so that the
SDKs' credential chains ask an instance metadata server only where one can answer.

Off-cloud, each chain's metadata probe is what makes a command without credentials slow: google-auth pings
169.254.169.254 up to 3 times with a 3 s timeout (``google.auth.compute_engine._metadata.ping``), botocore's
``iam-role`` provider asks IMDS (1 s timeout, a token PUT then a GET), azure-identity's ManagedIdentityCredential
probes IMDS (1 s) inside ``DefaultAzureCredential``. Where the packets are dropped (most networks) each probe
waits its whole timeout. The facts read here (world-readable files under ``/sys``):

- GCE: ``/sys/class/dmi/id/product_name`` starts with ``Google`` (``Google Compute Engine``; google-auth's own
  fallback, ``detect_gce_residency_linux``, reads the same file), or ``bios_vendor``/``sys_vendor`` ``Google``.
- Azure: ``chassis_asset_tag`` is ``7783-7084-3265-9085-8269-3286-77``, the tag every Azure VM carries
  (cloud-init's Azure datasource, ``AZURE_CHASSIS_ASSET_TAG``; a Hyper-V VM elsewhere has another tag).
- EC2: ``sys_vendor`` / ``bios_vendor`` ``Amazon EC2`` (Nitro), or ``bios_version`` containing ``amazon`` or
  ``/sys/hypervisor/uuid`` starting with ``ec2`` (Xen) (AWS: "Identify EC2 Linux instances",
  docs.aws.amazon.com/AWSEC2/latest/UserGuide/identify_ec2_instances.html).

``TRAINVM_METADATA_PROBE`` overrides the decision: ``always`` (a VM whose DMI is hidden, e.g. a container without
/sys, Cloud Run, a Windows VM), ``never``, or ``auto`` (the default: probe only the cloud the DMI names).
"""

from __future__ import annotations

from pathlib import Path

from provisioner import settings
from provisioner.errors import InputError

DMI = Path("/sys/class/dmi/id")
HYPERVISOR_UUID = Path("/sys/hypervisor/uuid")
AZURE_CHASSIS_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"
MODES = ("auto", "always", "never")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:  # missing (not Linux, no DMI, a container without /sys), or not readable
        return ""


def host_cloud(dmi: Path | None = None, hypervisor_uuid: Path | None = None) -> str | None:
    """``gcp``/``azure``/``aws`` when the DMI strings say this machine is one of their VMs, else None."""
    dmi = dmi or DMI
    field = {name: _read(dmi / name) for name in
             ("product_name", "sys_vendor", "bios_vendor", "bios_version", "chassis_asset_tag")}
    if any(field[k].startswith("Google") for k in ("product_name", "sys_vendor", "bios_vendor")):
        return "gcp"
    if field["chassis_asset_tag"] == AZURE_CHASSIS_ASSET_TAG:
        return "azure"
    if (any(field[k].startswith("Amazon EC2") for k in ("sys_vendor", "bios_vendor"))
            or "amazon" in field["bios_version"].lower()
            or _read(hypervisor_uuid or HYPERVISOR_UUID).lower().startswith("ec2")):
        return "aws"
    return None


def probe_metadata(cloud: str) -> bool:
    """Whether ``cloud``'s credential chain may ask its instance metadata server (``TRAINVM_METADATA_PROBE``)."""
    mode = settings.text("TRAINVM_METADATA_PROBE", "auto").lower()
    if mode not in MODES:
        raise InputError(f"TRAINVM_METADATA_PROBE={mode!r} is not one of {', '.join(MODES)}")
    if mode != "auto":
        return mode == "always"
    return host_cloud() == cloud
