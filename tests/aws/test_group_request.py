"""The pure cluster requests (providers/aws/group_request.py): what moto does not check (MinCount = MaxCount, the
tags EC2 puts on every instance of one request, the tag budget, the instance role's condition) is asserted on
the builder's output."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.providers.aws import group_request as G
from provisioner.providers.aws import request as R
from provisioner.providers.base import InvalidRequestError
from tests.aws.conftest import t4_offers, t4_spec

UBUNTU = R.Ami("ami-0123456789abcdef0", "/dev/sda1")


@pytest.fixture(scope="module")
def offer():
    return t4_offers()[0]


@pytest.fixture(scope="module")
def spec(offer):
    return replace(t4_spec(offer), nodes=4, compact=True)


def single(spec, offer):
    return R.run_instances_params(spec, offer, UBUNTU, "us-east-1b", security_group_id="sg-1", instance_profile=None)


def test_one_request_for_all_nodes_into_the_placement_group(spec, offer) -> None:
    one = single(spec, offer)
    body = G.cluster_params(one, spec, "pg")
    assert body["MinCount"] == body["MaxCount"] == 4
    assert body["Placement"] == {"AvailabilityZone": "us-east-1b", "GroupName": "pg"}
    assert body["MetadataOptions"]["InstanceMetadataTags"] == "enabled"
    assert body["MetadataOptions"]["HttpTokens"] == "required"
    for ts in body["TagSpecifications"]:  # the same tags on every node: no Name (tagged per node afterwards)
        keys = {t["Key"]: t["Value"] for t in ts["Tags"]}
        assert "Name" not in keys and keys[G.GROUP_TAG] == spec.name and keys[G.NODES_TAG] == "4"
    assert one["MinCount"] == 1 and "GroupName" not in one["Placement"]  # the single body is not changed
    assert body["UserData"] == one["UserData"] and body["ClientToken"] != one["ClientToken"]
    assert "GroupName" not in G.cluster_params(one, spec, None)["Placement"]


def test_one_node_is_not_a_cluster(spec, offer) -> None:
    with pytest.raises(InvalidRequestError):
        G.cluster_params(single(spec, offer), replace(spec, nodes=1), "pg")


def test_node_list_tags_are_budgeted() -> None:
    from provisioner.providers.registry import METADATA_VALUE_LIMIT
    from provisioner.render.cluster import node_list_metadata

    for n in (2, 16, 17, 64, 100):
        worst = [f"100.{i // 250 + 100}.{i % 250 + 100}.{i % 250 + 100}" for i in range(n)]  # 15 characters each
        assert len(node_list_metadata(worst, METADATA_VALUE_LIMIT["aws"])) <= G.node_list_tag_count(n)


def test_placement_group_and_member_rule(spec) -> None:
    pg = G.placement_group_params(spec)
    assert pg["GroupName"] == spec.name and pg["Strategy"] == "cluster"
    tags = {t["Key"]: t["Value"] for t in pg["TagSpecifications"][0]["Tags"]}
    assert pg["TagSpecifications"][0]["ResourceType"] == "placement-group" and tags["trainvm-managed"] == "true"
    [rule] = G.member_ingress("sg-9")
    assert rule["IpProtocol"] == "-1" and [p["GroupId"] for p in rule["UserIdGroupPairs"]] == ["sg-9"]
    assert G.node_tags("c", 3) == [{"Key": "Name", "Value": "c-3"}, {"Key": G.RANK_TAG, "Value": "3"}]


def test_the_role_of_a_node_may_stop_only_its_cluster(spec) -> None:
    s = replace(spec, idle_shutdown_minutes=30, on_idle="delete", max_run_hours=2, on_max_run="stop")  # mixed: EC2 call
    [stmt] = [st for st in R.role_policy(s, "us-east-1")["Statement"] if "ec2:TerminateInstances" in st["Action"]]
    profile = {"ec2:InstanceProfile": f"arn:aws:iam::*:instance-profile/{spec.name}"}  # the nodes share it
    assert stmt["Condition"] == {"StringEquals": {f"aws:ResourceTag/{G.GROUP_TAG}": spec.name}, "ArnLike": profile}
    [one] = [st for st in R.role_policy(replace(s, nodes=1), "us-east-1")["Statement"] if "ec2:TerminateInstances" in st["Action"]]
    assert one["Condition"] == {"StringEquals": {"aws:ResourceTag/Name": spec.name}, "ArnLike": profile}


def test_preview_shows_the_placement_group_and_the_group_launch(spec, offer) -> None:
    body = R.request_preview(spec, offer)
    assert list(body)[:3] == ["CreatePlacementGroup", "RunInstances", "AuthorizeSecurityGroupIngress"]
    assert body["RunInstances"]["MinCount"] == 4 and body["RunInstances"]["Placement"]["GroupName"] == spec.name
    assert body["RunInstances"]["Placement"]["AvailabilityZoneId"] == offer.zone
    assert "CreatePlacementGroup" not in R.request_preview(replace(spec, compact=False), offer)
    assert "CreatePlacementGroup" not in R.request_preview(replace(spec, nodes=1), offer)


def test_tag_keys_are_allowed_in_instance_metadata(spec, offer) -> None:
    """With InstanceMetadataTags enabled, EC2 refuses instance tag keys outside letters, digits and + - = . , _ : @
    ("Work with instance tags in instance metadata"); moto does not check it."""
    import re

    body = G.cluster_params(single(spec, offer), spec, "pg")
    keys = [t["Key"] for t in body["TagSpecifications"][0]["Tags"]] + [t["Key"] for t in G.node_tags("c", 0)]
    keys += ["trainvm-cluster", "trainvm-cluster-1"]
    assert all(re.fullmatch(r"[A-Za-z0-9+\-=.,_:@]+", k) and k not in (".", "..", "_index") for k in keys)


def test_security_group_description_says_the_nodes_reach_each_other(spec) -> None:
    import re

    desc = R.security_group_params(spec, None)["Description"]
    assert "all traffic between the nodes" in desc and len(desc) <= 255
    assert re.fullmatch(r"[A-Za-z0-9 ._\-:/()#,@\[\]+=&;{}!$*]+", desc)  # EC2's allowed characters (VPC)
    assert "between" not in R.security_group_params(replace(spec, nodes=1), None)["Description"]
