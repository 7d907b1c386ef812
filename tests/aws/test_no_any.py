"""Issue 37: no explicit ``Any`` in the AWS provider package. ``Any`` stays only where an SDK returns untyped data,
behind a typed adapter: the boto3 clients trainvm calls are the Protocols of aws/sdk.py (S3, STS, the spot-price EC2
calls, the session and its config) and aws/clients.py (EC2, IAM, SSM, Service Quotas), cast in ``AwsApi``'s accessors
where the client is made; the answers it reads TypedDicts named after the botocore shapes (aws/clients.py; with
``_region``: aws/instances.py ``Instance``, bake.py ``Image``); the request parameters TypedDicts (aws/params.py).
Every module is under ``disallow_any_explicit`` (pyproject.toml), and a misspelled field or operation is a mypy error.
"""

from __future__ import annotations

import io
import re
import tokenize
import tomllib

from tests.helpers import REPO, mypy_typo_lines

PACKAGE = REPO / "provisioner" / "providers" / "aws"


def _modules() -> set[str]:
    return {"provisioner.providers.aws" + ("" if p.stem == "__init__" else f".{p.stem}") for p in PACKAGE.glob("*.py")}


def test_every_aws_module_is_checked_without_explicit_any() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict_any = {m for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_any_explicit") for m in o["module"]}
    assert _modules() - strict_any == set()


def test_no_aws_module_names_any() -> None:
    """Not even behind an alias (mypy does not flag a module that uses another module's alias of ``Any``)."""
    named = [f"{p.name}:{tok.start[0]}" for p in sorted(PACKAGE.glob("*.py"))
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


def test_the_aws_modules_take_their_clients_through_the_typed_accessors() -> None:
    """``AwsApi.client`` hands out an untyped client (``object``): every module calls a client through ``ec2``,
    ``iam``, ``ssm``, ``service_quotas``, ``s3`` or ``sts`` (the Protocols), never through ``client(...)`` itself."""
    untyped = [f"{p.name}:{n}" for p in sorted(PACKAGE.glob("*.py")) if p.stem != "api"
               for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\.client\(", line)]
    assert untyped == []


CLIENTS = '''\
from provisioner.providers.aws.api import AwsApi
from provisioner.providers.aws.params import Filter, RunInstancesParams, SecurityGroupParams


def ec2(api: AwsApi, region: str, run: RunInstancesParams, sg: SecurityGroupParams) -> None:
    ec2 = api.ec2(region)
    images = ec2.describe_images(ImageIds=["ami-1"]).get("Images") or []
    print([i.get("RootDeviceName") for i in images], [i["RootDevice"] for i in images])  # typo
    print(ec2.describe_image(ImageIds=["ami-1"]))  # typo
    print(ec2.describe_images(ImageId=["ami-1"]))  # typo
    print(ec2.describe_regions(AllRegions=False)["Regions"][0]["RegionName"])
    print(ec2.describe_regions(AllRegions=False)["Regions"][0]["Region"])  # typo
    pages = ec2.get_paginator("describe_instances").paginate(Filters=[Filter(Name="tag-value", Values=["x"])])
    print([i["State"]["Name"] for p in pages for r in p.get("Reservations") or [] for i in r.get("Instances") or []])
    print([i["Stat"] for p in pages for r in p.get("Reservations") or [] for i in r.get("Instances") or []])  # typo
    print(ec2.get_paginator("describe_instance"))  # typo
    print(ec2.run_instances(**run)["Instances"][0]["InstanceId"], ec2.create_security_group(**sg)["GroupId"])
    print(ec2.run_instances(ImageId="ami-1", InstanceType="t3.micro", MinCount=1, MaxCount=1))  # typo
    print(ec2.create_security_group(GroupName="g", Description="d", TagSpecifications=[], VpcID="v"))  # typo
    print(ec2.create_tags(Resources=["i-1"], Tags=[{"Key": "k", "Valu": "v"}]))  # typo
    print(ec2.terminate_instances(InstanceId="i-1"))  # typo
    print(ec2.describe_instance_types(InstanceTypes=["t3.micro"])["InstanceTypes"][0]["VCpuInfo"]["DefaultVCpus"])
    print(ec2.describe_instance_types(InstanceTypes=["t3.micro"])["InstanceTypes"][0]["VCpuInfo"]["VCpus"])  # typo
    print(ec2.get_console_output(InstanceId="i-1", Latest=True)["Outputs"])  # typo
    print(ec2.describe_security_groups(Filters=[])["SecurityGroups"][0]["GroupID"])  # typo
    api.wait(region, "instance_running", "i-1")
    api.wait(region, "instance_runing", "i-1")  # typo


def others(api: AwsApi, region: str) -> None:
    profile = api.iam().get_instance_profile(InstanceProfileName="p")["InstanceProfile"]
    print([r["RoleName"] for r in profile.get("Roles") or []], [t["Key"] for t in profile.get("Tags") or []])
    print(profile["Role"])  # typo
    print(api.iam().put_role_policy(RoleName="r", PolicyName="p", Policy="{}"))  # typo
    print(api.iam().delete_rol(RoleName="r"))  # typo
    print(api.ssm(region).get_parameter(Name="/aws/x")["Parameter"]["Value"])
    print(api.ssm(region).get_parameter(Name="/aws/x")["Parameter"]["Values"])  # typo
    quota = api.service_quotas(region).get_service_quota(ServiceCode="ec2", QuotaCode="L-1")["Quota"]
    print(quota.get("Value"), quota.get("ErrorReason", {}).get("ErrorCode"))
    print(quota["ErrorReason"]["ErrorCod"])  # typo
    print(api.service_quotas(region).get_aws_default_service_quota(ServiceCode="ec2", Quota="L-1"))  # typo
    print(api.sts().get_caller_identity()["Acount"])  # typo
    print(api.s3(region).head_objects(Bucket="b", Key="k"))  # typo
'''


def test_a_misspelled_operation_or_field_on_the_ec2_iam_ssm_quotas_clients_is_a_mypy_error(tmp_path) -> None:
    """The clients ``AwsApi`` hands out (aws/clients.py, aws/sdk.py): an operation, keyword or answer member that the
    botocore model does not have (or trainvm does not call) is a mypy error."""
    errors, typos, out = mypy_typo_lines(CLIENTS, tmp_path)
    assert errors == typos, out
