"""AWS: the RunInstances request trainvm would send (preview only; no AWS provider yet).
Pure: no boto3 import.

The preview is the EC2 *wire* request, like the GCE and Azure bodies: ``UserData`` is base64 there.
boto3 base64-encodes ``UserData`` itself, so a provider must pass the raw bytes to
``run_instances`` (tests/aws checks both against moto's server)."""

from __future__ import annotations

import base64
from typing import Any

from provisioner.catalog.models import Offer
from provisioner.providers.base import LaunchSpec

# Canonical/Debian publish the current AMI ids as public SSM parameters; resolved at `up` time.
AMI_PARAMETERS = {
    "ubuntu-22.04": "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
    "ubuntu-24.04": "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
    "debian-12": "/aws/service/debian/release/bookworm/latest/amd64",
}
VOLUME_TYPES = {"standard": "st1", "balanced": "gp3", "ssd": "io2"}
#: lifecycle.on_idle -> InstanceInitiatedShutdownBehavior: what a shutdown from inside the VM does
#: (the idle watchdog; the max-run timer calls the EC2 API for on_max_run and falls back to a shutdown).
SHUTDOWN_BEHAVIOR = {"stop": "stop", "delete": "terminate"}


def request_preview(spec: LaunchSpec, offer: Offer) -> dict[str, Any]:
    tags = [{"Key": k, "Value": v} for k, v in sorted(spec.labels.items())] + [{"Key": "Name", "Value": spec.name}]
    body: dict[str, Any] = {
        "ImageId": f"resolve:ssm:{AMI_PARAMETERS[spec.os]}",
        "InstanceType": offer.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "Placement": {"AvailabilityZoneId": offer.zone} if offer.zone else {},
        "UserData": base64.b64encode(spec.user_data if isinstance(spec.user_data, bytes) else spec.user_data.encode()).decode(),
        "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": spec.boot_disk_gib, "VolumeType": VOLUME_TYPES[spec.boot_disk_type], "DeleteOnTermination": True}}],
        "InstanceInitiatedShutdownBehavior": SHUTDOWN_BEHAVIOR[spec.on_idle],
        "MetadataOptions": {"HttpTokens": "required"},
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}, {"ResourceType": "volume", "Tags": tags}],
        "ClientToken": spec.name + "-" + spec.profile_hash[:16],
    }
    if spec.spot:
        market: dict[str, Any] = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
        if spec.max_price_per_hour:
            market["MaxPrice"] = f"{spec.max_price_per_hour:.4f}"
        body["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": market}
    return body
