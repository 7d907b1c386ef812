"""AWS on loopback: moto's real server (``ThreadedMotoServer``, EC2/SSM/IAM over HTTP) behind the fault proxy
of ``aws_faults``. Tests talk to ``url`` (the proxy) through boto3, with the requests unmodified.

What moto cannot be asked for through the API is seeded into its in-process backend (the server runs in a
thread of the test process): the public SSM parameters of Canonical's and Debian's AMIs (AWS reserves
``/aws/...`` names, and moto refuses PutParameter on them as AWS does) pointing to AMIs registered through the
API, with the root device names those publishers use (/dev/sda1 Ubuntu, /dev/xvda Debian; moto's
RegisterImage ignores ``RootDeviceName``).

moto's backends are process-global, so a test process runs one server: ``shared_moto()`` (reset it before use).

Usage::

    aws = shared_moto()
    aws.reset()
        monkeypatch.setenv("TRAINVM_AWS_ENDPOINT", aws.url)   # or: for k, v in aws.env().items(): ...
        aws.faults.fail("RunInstances", "InsufficientInstanceCapacity", times=1)
"""

from __future__ import annotations

import os
import urllib.request
from typing import Any

from tests.emulators.aws_faults import FaultProxy

ACCOUNT = "123456789012"
REGIONS = ("us-east-1", "us-west-2")
AMIS = {  # os -> (image name, root device name)
    "ubuntu-22.04": ("ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-20261101", "/dev/sda1"),
    "ubuntu-24.04": ("ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20261101", "/dev/sda1"),
    "debian-12": ("debian-12-amd64-20261101-1234", "/dev/xvda"),
}
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _scrub_environment() -> None:
    """Keep real AWS credentials and config out of the emulator's clients."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            del os.environ[k]
    os.environ.update(AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
                      AWS_EC2_METADATA_DISABLED="true")


class MotoAws:
    def __init__(self, regions: tuple[str, ...] = REGIONS) -> None:
        _scrub_environment()
        from moto.server import ThreadedMotoServer

        self.regions = regions
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.moto_url = f"http://{host}:{port}"
        self.faults = FaultProxy(self.moto_url).start()
        self.faults.placements.states = self.instance_states
        self.amis: dict[tuple[str, str], str] = {}
        self.seed()

    @property
    def url(self) -> str:
        return self.faults.url

    def env(self) -> dict[str, str]:
        return {"TRAINVM_AWS_ENDPOINT": self.url, "TRAINVM_AWS_REGIONS": ",".join(self.regions)}

    def client(self, service: str, region: str = "us-east-1", *, direct: bool = False) -> Any:
        import boto3

        return boto3.client(service, region_name=region, endpoint_url=self.moto_url if direct else self.url,
                            **CREDENTIALS)

    def seed(self) -> None:
        """Public AMIs and their SSM parameters in every region."""
        import datetime

        from moto.ec2.models import ec2_backends
        from moto.ssm.models import Parameter, ssm_backends

        from provisioner.providers.aws.request import AMI_PARAMETERS

        for region in self.regions:
            ec2 = self.client("ec2", region, direct=True)
            backend = ec2_backends[ACCOUNT][region]
            params = ssm_backends[ACCOUNT][region]._parameters
            for os_name, (name, root) in AMIS.items():
                image_id = ec2.register_image(Name=name, Description=f"{os_name} (trainvm test)")["ImageId"]
                backend.amis[image_id].root_device_name = root
                self.amis[(region, os_name)] = image_id
                params[AMI_PARAMETERS[os_name]].append(Parameter(
                    account_id=ACCOUNT, name=AMI_PARAMETERS[os_name], value=image_id, parameter_type="String",
                    description=None, allowed_pattern=None, keyid=None, version=1, data_type="aws:ec2:image",
                    last_modified_date=datetime.datetime.now(datetime.UTC)))

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.moto_url}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=30).read()
        self.faults.clear()
        self.amis.clear()
        self.seed()

    # ------------------------------------------------------------------ inspection
    def instances(self, region: str = "us-east-1", *, states: tuple[str, ...] = ("pending", "running", "stopping",
                                                                                    "stopped")) -> list[dict[str, Any]]:
        got = self.client("ec2", region, direct=True).describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": list(states)}])
        return [i for r in got["Reservations"] for i in r["Instances"]]

    @staticmethod
    def instance_states(region: str, ids: set[str]) -> dict[str, str]:
        """moto's state name of each instance in ``ids`` (read from its in-process backend)."""
        from moto.ec2.models import ec2_backends

        backend = ec2_backends[ACCOUNT][region]
        return {i.id: i.state for r in backend.reservations.values() for i in r.instances if i.id in ids}

    def placement_groups(self, region: str = "us-east-1") -> list[str]:
        return self.faults.placements.names(region)

    def security_groups(self, region: str = "us-east-1") -> list[dict[str, Any]]:
        got = self.client("ec2", region, direct=True).describe_security_groups()["SecurityGroups"]
        return [g for g in got if g["GroupName"] != "default"]

    def instance_profiles(self) -> list[str]:
        iam = self.client("iam", direct=True)
        return [p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]]

    def roles(self) -> list[str]:
        return [r["RoleName"] for r in self.client("iam", direct=True).list_roles()["Roles"]]

    def close(self) -> None:
        self.faults.stop()
        self.server.stop()

    def __enter__(self) -> MotoAws:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: list[MotoAws] = []


def shared_moto() -> MotoAws:
    """The process's one moto server (started on first use, stopped at exit): two servers in one process
    would share moto's global backends and see each other's instances."""
    if not _SHARED:
        import atexit

        _SHARED.append(MotoAws())
        atexit.register(_SHARED[0].close)
    return _SHARED[0]
