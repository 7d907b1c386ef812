"""Issue 37, no explicit ``Any`` in the AWS provider's public methods: boto3's untyped answers sit behind a typed
adapter (aws/instances.py ``Instance``, aws/resources.py ``SecurityGroup``, aws/quota.py ``ServiceQuota``), and the
provider's modules are checked with ``disallow_any_explicit`` (pyproject.toml), so a misspelled field of an instance
that the provider reads is a mypy error, not a KeyError on a live VM."""

from __future__ import annotations

import tomllib

from tests.helpers import REPO, mypy_typo_lines

CHECKED = ["provisioner.providers.aws.provider", "provisioner.providers.aws.instances", "provisioner.providers.aws.power",
           "provisioner.providers.aws.resources", "provisioner.providers.aws.quota"]

SNIPPET = '''\
from provisioner.providers.aws.instances import tags_of
from provisioner.providers.aws.provider import AwsProvider
from provisioner.providers.aws.quota import ServiceQuota
from provisioner.providers.aws.resources import SecurityGroup


def read(provider: AwsProvider, group: SecurityGroup, quota: ServiceQuota) -> None:
    inst = provider.instances.first("vm")
    if inst is not None:
        print(inst["InstanceId"], inst["State"]["Name"], inst["_region"], tags_of(inst), inst.get("PublicIpAddress"))
        print(provider.instances.record(inst).name, provider.power.stop("vm"), provider.api.regions())
        print(inst["InstanceID"])  # typo
        print(inst["State"]["name"])  # typo
        print(inst["Placement"]["AvailabilityZoneName"])  # typo
    print(provider.instances.record(inst))  # typo
    print(group["GroupId"], group.get("IpPermissions"), group["GroupID"])  # typo
    print(quota.get("Value"), quota["value"])  # typo
'''


def test_the_aws_provider_modules_disallow_explicit_any() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict_any = {m for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_any_explicit") for m in o["module"]}
    assert set(CHECKED) <= strict_any


def test_a_misspelled_field_of_an_ec2_answer_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert errors == typos, out
