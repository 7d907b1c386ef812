"""Issue 37: no explicit ``Any`` in the AWS provider package. ``Any`` stays only where an SDK returns untyped data,
behind a typed adapter: the boto3 clients trainvm calls are the Protocols of aws/sdk.py (S3, STS, the spot-price EC2
calls, the session and its config), cast where the client is made; the answers it reads TypedDicts (aws/instances.py
``Instance``, resources.py, quota.py, bake.py ``Image``, group.py ``PlacementGroup``); the request parameters
TypedDicts (aws/params.py). Every module but ``NOT_YET`` is under ``disallow_any_explicit`` (pyproject.toml), and a
misspelled field or operation is a mypy error.
"""

from __future__ import annotations

import io
import tokenize
import tomllib

from tests.helpers import REPO, mypy_typo_lines

PACKAGE = REPO / "provisioner" / "providers" / "aws"
#: api.py's client()/ec2() still hand out boto3's untyped clients (EC2, IAM, SSM, Service Quotas: no Protocol yet)
NOT_YET = {"provisioner.providers.aws.api"}


def _modules() -> set[str]:
    return {"provisioner.providers.aws" + ("" if p.stem == "__init__" else f".{p.stem}") for p in PACKAGE.glob("*.py")}


def test_every_aws_module_but_api_is_checked_without_explicit_any() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict_any = {m for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_any_explicit") for m in o["module"]}
    assert _modules() - strict_any == NOT_YET


def test_no_aws_module_names_any() -> None:
    """Not even behind an alias (mypy does not flag a module that uses another module's alias of ``Any``)."""
    named = [f"{p.name}:{tok.start[0]}" for p in sorted(PACKAGE.glob("*.py")) if p.stem != "api"
             for tok in tokenize.generate_tokens(io.StringIO(p.read_text()).readline)
             if tok.type == tokenize.NAME and tok.string == "Any"]
    assert named == []


SNIPPET = '''\
from datetime import datetime

from provisioner.providers.aws import bake, group, sdk
from provisioner.providers.aws import group_request as G
from provisioner.providers.aws import request as R
from provisioner.providers.base import LaunchSpec
from provisioner.providers.offer import Offer


def params(spec: LaunchSpec, offer: Offer) -> None:
    body = R.run_instances_params(spec, offer, R.preview_ami("debian-12"), "us-east-1a", security_group_id="sg",
                                  instance_profile=None)
    print(body["Placement"].get("AvailabilityZone"), body["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"])
    print(body["Placement"]["GroupNam"])  # typo
    print(body["MinCount"] + "1")  # typo
    print(body["TagSpecifications"][0]["Tags"][0]["Key"], body["TagSpecifications"][0]["Tag"])  # typo
    print(R.security_group_params(spec, None)["GroupName"], R.security_group_params(spec, None)["VpcID"])  # typo
    print([p.get("FromPort") for p in R.ssh_ingress("1.2.3.4/32")], R.ssh_ingress("1.2.3.4/32")[0]["CidrIp"])  # typo
    print(G.placement_group_params(spec)["Strategy"], G.member_ingress("sg")[0]["UserIdGroupPair"])  # typo
    print(R.request_token(spec, "z", {"ImageId": "ami-1"}))  # typo


def answers(image: bake.Image, pg: group.PlacementGroup, made: group.Made) -> None:
    print(image.get("State"), image.get("StateReason", {}).get("Message"), pg.get("Tags"), made.get("ids"))
    print(image["Stat"])  # typo
    print(pg["GroupNames"])  # typo
    made["sgs"] = True  # typo


def clients(s3: sdk.S3, sts: sdk.Sts, ec2: sdk.Ec2Prices, now: datetime) -> None:
    head = s3.head_object(Bucket="b", Key="k")
    print(head.get("ContentLength"), sts.get_caller_identity()["Account"])
    print(head.get("LastModified") + 1)  # typo
    print(s3.head_object(Bucket="b", key="k"))  # typo
    print(s3.put_objects(Bucket="b", Key="k"))  # typo
    print(s3.get_paginator("list_object_v2"))  # typo
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="b", Prefix="p"):
        print([o["Key"] for o in page.get("Contents") or []], [o["Size"] for o in page.get("Contents") or []])  # typo
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=["g4dn.xlarge"], ProductDescriptions=["Linux/UNIX"], StartTime=now)
    print([p.get("SpotPrice") for page in pages for p in page.get("SpotPriceHistory", [])])
    print(ec2.describe_availability_zones(AllAvailabilityZone=True))  # typo
    print(ec2.describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"][0]["ZoneID"])  # typo
'''


def test_a_misspelled_field_or_operation_on_the_typed_aws_documents_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert errors == typos, out
