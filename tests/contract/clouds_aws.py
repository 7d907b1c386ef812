"""AwsProvider against moto's server behind the fault proxy (tests/emulators/aws.py), through boto3."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.catalog.models import Offer
from provisioner.providers.base import InstanceRecord
from tests.contract.harness import CloudHarness, ClusterHarness, b64_json, spec_maker

USER_DATA = "#!/bin/bash\necho TRAINVM_STATUS=start\n"
CIDR = "203.0.113.7/32"
T4 = "g4dn.xlarge"


@pytest.fixture(scope="session")
def contract_moto_server():
    pytest.importorskip("moto.server")
    from tests.emulators.aws import shared_moto

    return shared_moto()


@pytest.fixture
def aws_cloud(contract_moto_server, monkeypatch) -> Any:
    from provisioner.catalog.storage import load_catalog
    from provisioner.providers.aws.provider import AwsProvider

    aws = contract_moto_server
    aws.reset()
    for k, v in aws.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    monkeypatch.delenv("TRAINVM_SSH_PUBLIC_KEY", raising=False)
    offers = {(o.region, o.zone): o for o in load_catalog().offers if o.cloud == "aws" and o.instance_type == T4}

    def make() -> AwsProvider:
        return AwsProvider(op_timeout=3, poll_interval=0)

    base = spec_maker(USER_DATA)

    def spec(**kw: Any):
        kw.setdefault("ssh_from", CIDR)  # every AWS VM gets its security group; with ssh_from it has a rule
        return base(**kw)

    def plant_unmanaged(name: str, offer: Offer) -> None:
        ec2 = aws.client("ec2", offer.region, direct=True)
        ec2.run_instances(ImageId=aws.amis[(offer.region, "ubuntu-22.04")], InstanceType=T4, MinCount=1, MaxCount=1,
                          TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": name},
                                                                                   {"Key": "team", "Value": "research"}]}])

    def zone_name(offer: Offer) -> str:
        zones = aws.client("ec2", offer.region, direct=True).describe_availability_zones()["AvailabilityZones"]
        return {z["ZoneId"]: z["ZoneName"] for z in zones}[str(offer.zone)]

    def fail(offer: Offer) -> None:
        # RunInstances goes through (the security group and the instance exist); the instance never reaches
        # running: the bounded waiter gives up and the cleanup must terminate it and delete the group
        aws.faults.hold_next_created(when={"Placement.AvailabilityZone": zone_name(offer)})

    def stock_out(offer: Offer, room: int) -> None:
        # EC2 with MinCount = N launches nothing when the AZ has room for fewer (the proxy's capacity model)
        aws.faults.set_capacity(zone_name(offer), room)

    def put_report(rec: InstanceRecord, report: dict[str, Any]) -> None:
        aws.faults.set_console(str(rec.cloud_id), f"boot\nTRAINVM_REPORT={b64_json(report)}\n")

    def leftovers() -> list[str]:
        out = []
        for region in aws.regions:
            out += [f"instance {i['InstanceId']} ({region})" for i in aws.instances(region)]
            out += [f"security group {g['GroupName']} ({region})" for g in aws.security_groups(region)]
            out += [f"placement group {g} ({region})" for g in aws.placement_groups(region)]
        return sorted(out + [f"instance profile {p}" for p in aws.instance_profiles()])

    yield CloudHarness(
        name="aws", provider=make(), twin=make, offers=[offers[("us-east-1", "use1-az1")], offers[("us-west-2", "usw2-az1")]],
        spec=spec, plant_unmanaged=plant_unmanaged, fail_after_create_starts=fail, put_report=put_report,
        leftovers=leftovers, stopped_states=("STOPPED",),
        cluster=ClusterHarness(offers=[offers[("us-east-1", "use1-az1")], offers[("us-west-2", "usw2-az1")]],
                               stock_out=stock_out))
