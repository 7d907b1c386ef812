"""The AWS group engine (providers/aws/group.py) through boto3 against moto's server and the fault proxy: what
moto stored is read back through the API (direct, not through the proxy), never from the request trainvm built.

moto has no placement groups: the proxy answers CreatePlacementGroup / DescribePlacementGroups /
DeletePlacementGroup (InUse while a member is not terminated, Unknown for a missing one) and reports members'
``Placement.GroupName`` (tests/emulators/aws_placement.py). Not shown here: colocation and the bandwidth between
nodes, EFA, a cluster group's one-AZ rule, and how EC2 really splits capacity (an ICE is injected: EC2's
MinCount semantics are that nothing is launched then, which the proxy reproduces by not forwarding the call).
"""

from __future__ import annotations

import base64
import json

import pytest

from provisioner.providers.aws import group_request as G
from provisioner.providers.base import CapacityError, ConflictError, InvalidRequestError
from provisioner.provision.failover import provision
from provisioner.render.cluster import parse_node_list
from tests.aws.conftest import t4_offers, t4_spec
from tests.helpers import REPO

REPORT = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())


@pytest.fixture
def provider(aws):
    from provisioner.providers.aws.provider import AwsProvider

    return AwsProvider(op_timeout=5, poll_interval=0)


@pytest.fixture(scope="module")
def offers():
    """us-east-1's offers of the T4 example's instance type, one per AZ (the failover order)."""
    east = t4_offers("us-east-1")
    return [o for o in east if o.instance_type == east[0].instance_type]


def cluster_spec(offer, nodes, compact=True, **kw):
    return t4_spec(offer, nodes=nodes, compact=compact, **kw)


def tags(obj):
    return {t["Key"]: t["Value"] for t in obj.get("Tags") or []}


def nothing_left(aws, region="us-east-1") -> bool:
    return (aws.instances(region) == [] and aws.security_groups(region) == [] and aws.placement_groups(region) == []
            and aws.instance_profiles() == [])


def zone_name(aws, zone_id: str, region: str = "us-east-1") -> str:
    zones = aws.client("ec2", region, direct=True).describe_availability_zones()["AvailabilityZones"]
    return {z["ZoneId"]: z["ZoneName"] for z in zones}[zone_id]


@pytest.mark.parametrize("nodes", [2, 4])
def test_create_launches_every_node_in_one_request_into_a_cluster_placement_group(aws, provider, offers, nodes) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, nodes)
    rec = provider.create(spec, offer)
    [pg_call] = aws.faults.calls("CreatePlacementGroup")
    assert pg_call.params["GroupName"] == spec.name and pg_call.params["Strategy"] == "cluster"
    [run] = aws.faults.calls("RunInstances")
    assert run.params["MinCount"] == run.params["MaxCount"] == str(nodes)
    assert run.params["Placement.GroupName"] == spec.name
    assert run.params["MetadataOptions.InstanceMetadataTags"] == "enabled"
    assert run.params["MetadataOptions.HttpTokens"] == "required"
    # what EC2 (moto + the proxy's placement groups) holds now
    [pg] = aws.client("ec2", direct=False).describe_placement_groups(GroupNames=[spec.name])["PlacementGroups"]
    assert pg["Strategy"] == "cluster" and tags(pg)["trainvm-managed"] == "true"
    insts = sorted(aws.instances(), key=lambda i: i["AmiLaunchIndex"])
    assert len(insts) == nodes
    ec2 = aws.client("ec2", direct=True)
    for inst in insts:
        t = tags(inst)
        assert t["Name"] == f"{spec.name}-{inst['AmiLaunchIndex']}" and t[G.RANK_TAG] == str(inst["AmiLaunchIndex"])
        assert t[G.GROUP_TAG] == spec.name and t[G.NODES_TAG] == str(nodes)
        assert t["trainvm-hash"] == spec.labels["trainvm-hash"]
        assert inst["MetadataOptions"]["InstanceMetadataTags"] == "enabled"
        assert inst["Placement"]["AvailabilityZone"] == rec.zone
        assert inst["InstanceType"] == offer.instance_type and inst["State"]["Name"] == "running"
        data = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")["UserData"]["Value"]
        assert base64.b64decode(data).decode() == spec.user_data  # every node runs the same bootstrap
        # the node list: private IPs in rank order, on every node
        assert parse_node_list(t) == [i["PrivateIpAddress"] for i in insts]
    got = aws.client("ec2").describe_instances(InstanceIds=[insts[0]["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert got["Placement"]["GroupName"] == spec.name  # the proxy reports membership
    assert (rec.name, rec.cluster, rec.rank, rec.nodes) == (f"{spec.name}-0", spec.name, 0, nodes)
    assert rec.cloud_id == insts[0]["InstanceId"]
    # the security group lets the nodes reach each other on every port
    [sg] = aws.security_groups()
    pairs = [(p["IpProtocol"], g["GroupId"]) for p in sg["IpPermissions"] for g in p.get("UserIdGroupPairs") or []]
    assert pairs == [("-1", sg["GroupId"])]
    assert [sg["GroupId"]] == [g["GroupId"] for g in insts[0]["SecurityGroups"]]


def test_ranks_are_stable_and_a_rerun_adopts_the_cluster(aws, provider, offers) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, 4)
    first = provider.create(spec, offer)
    nodes = provider.cluster_nodes(spec.name)
    assert [(n.name, n.rank, n.nodes) for n in nodes] == [(f"{spec.name}-{k}", k, 4) for k in range(4)]
    found = provider.find(spec.name)
    assert found is not None and found.cloud_id == first.cloud_id and found.rank == 0
    again = provider.create(spec, offer)
    assert again.adopted and again.cloud_id == first.cloud_id
    assert len(aws.faults.calls("RunInstances")) == 1  # nothing launched twice
    assert [n.cloud_id for n in provider.cluster_nodes(spec.name)] == [n.cloud_id for n in nodes]
    listed = [r for r in provider.list() if r.cluster == spec.name]
    assert sorted((r.rank, r.cloud_id) for r in listed) == [(n.rank, n.cloud_id) for n in nodes]


def test_node_list_spans_several_tags_when_one_is_too_short(aws, provider) -> None:
    ips = [f"10.100.{i // 200}.{i % 200 + 10}" for i in range(40)]  # 40 addresses: more than 256 characters
    nodes = [{"InstanceId": f"i-{i:017x}", "PrivateIpAddress": ip} for i, ip in enumerate(ips)]
    ec2 = aws.client("ec2", direct=True)
    run = ec2.run_instances(ImageId=aws.amis[("us-east-1", "ubuntu-22.04")], InstanceType="g4dn.xlarge",
                            MinCount=40, MaxCount=40)
    for n, inst in zip(nodes, run["Instances"], strict=True):
        n["InstanceId"] = inst["InstanceId"]
    provider.group.write_node_list("us-east-1", nodes)
    [call] = aws.faults.calls("CreateTags")
    assert call.params["ResourceId.40"] == nodes[-1]["InstanceId"]  # one CreateTags for every node
    for inst in aws.instances():
        t = tags(inst)
        assert parse_node_list(t) == ips and len(t["trainvm-cluster"]) <= 256 and "trainvm-cluster-1" in t


def test_capacity_failure_launches_nothing_and_leaves_nothing(aws, provider, offers) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, 4)
    aws.faults.fail("RunInstances", "InsufficientInstanceCapacity", when={"MinCount": "4"})
    with pytest.raises(CapacityError) as err:
        provider.create(spec, offer)
    assert err.value.code == "InsufficientInstanceCapacity" and err.value.cleanup == "verified"
    assert aws.faults.calls("CreatePlacementGroup") and aws.faults.calls("DeletePlacementGroup")
    assert nothing_left(aws)


def test_a_failure_after_the_launch_terminates_every_node_before_the_placement_group_goes(aws, provider, offers) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, 2)
    aws.faults.hold_next_created()  # the nodes never reach running: the bounded wait gives up
    with pytest.raises(Exception) as err:
        provider.create(spec, offer)
    assert getattr(err.value, "cleanup", None) == "verified"
    actions = [r.action for r in aws.faults.requests]
    assert actions.index("TerminateInstances") < actions.index("DeletePlacementGroup")
    assert [r.status for r in aws.faults.calls("DeletePlacementGroup")][-1] == 200
    assert nothing_left(aws)
    ec2 = aws.client("ec2", direct=True)
    states = [i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert states == ["terminated", "terminated"]


def test_failover_moves_the_whole_group_to_the_next_zone(aws, provider, offers) -> None:
    spec = cluster_spec(offers[0], 4)
    aws.faults.fail("RunInstances", "InsufficientInstanceCapacity",
                    when={"Placement.AvailabilityZone": zone_name(aws, str(offers[0].zone))})
    seen = []
    result = provision(offers[:2], lambda o: spec, {"aws": provider}.__getitem__, seen.append)
    assert [(a.zone, a.outcome) for a in seen] == [(offers[0].zone, "capacity"), (offers[1].zone, "created")]
    insts = aws.instances()
    assert len(insts) == 4 and {i["Placement"]["AvailabilityZone"] for i in insts} == {result.record.zone}
    assert result.record.zone == zone_name(aws, str(offers[1].zone))
    assert aws.placement_groups() == [spec.name] and len(aws.security_groups()) == 1
    tokens = [r.params["ClientToken"] for r in aws.faults.calls("RunInstances")]
    assert len(set(tokens)) == 2  # one token per AZ


def test_a_lost_answer_is_resent_with_the_same_token_and_launches_nothing_more(aws, provider, offers) -> None:
    """EC2 created the nodes but its answer was lost (500): botocore resends the same ClientToken, and EC2 (the
    proxy's token model) answers with the same instances instead of launching N more."""
    offer = offers[0]
    spec = cluster_spec(offer, 4)
    aws.faults.fail("RunInstances", "InternalError", times=1, after=True, when={"MinCount": "4"})
    rec = provider.create(spec, offer)
    calls = aws.faults.calls("RunInstances")
    assert [c.status for c in calls] == [500, 200] and calls[0].params == calls[1].params
    assert len(aws.instances()) == 4 and rec.nodes == 4
    assert [n.rank for n in provider.cluster_nodes(spec.name)] == [0, 1, 2, 3]


def test_a_token_bound_to_terminated_nodes_is_salted(aws, provider, offers) -> None:
    """EC2 answers a known ClientToken with that request's instances even once terminated: after `down --no-wait`
    (the security group stays, so the next request is the same request) the engine sends a token salted with
    the first terminated id and launches new nodes."""
    offer = offers[0]
    spec = cluster_spec(offer, 2)
    first = {n.cloud_id for n in provider.cluster_nodes(provider.create(spec, offer).cluster or "")}
    provider.delete(spec.name, wait=False)
    again = provider.create(spec, offer)
    tokens = [c.params["ClientToken"] for c in aws.faults.calls("RunInstances")]
    assert len(tokens) == 3 and tokens[0] == tokens[1] != tokens[2]
    live = aws.instances()
    assert len(live) == 2 and not {i["InstanceId"] for i in live} & first and again.cloud_id not in first
    assert aws.placement_groups() == [spec.name]


def test_up_after_down_is_another_request(aws, provider, offers) -> None:
    """`down` deletes the security group; the next `up` makes a new one, so its RunInstances differs and gets
    another token (EC2 would refuse the old token with IdempotentParameterMismatch)."""
    offer = offers[0]
    spec = cluster_spec(offer, 2)
    provider.create(spec, offer)
    provider.delete(spec.name)
    provider.create(spec, offer)
    calls = aws.faults.calls("RunInstances")
    assert [c.status for c in calls] == [200, 200] and calls[0].params["ClientToken"] != calls[1].params["ClientToken"]
    assert len(aws.instances()) == 2


def test_delete_leaves_nothing(aws, provider, offers) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, 4)
    provider.create(spec, offer)
    assert provider.delete(spec.name) is True
    assert nothing_left(aws)
    assert provider.find(spec.name) is None and provider.cluster_nodes(spec.name) == []
    assert provider.delete(spec.name) is False


def test_delete_without_wait_leaves_the_groups_to_the_next_down(aws, provider, offers) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, 2)
    provider.create(spec, offer)
    provider.delete(spec.name, wait=False)
    assert aws.placement_groups() == [spec.name]  # EC2 refuses InUse until the nodes are terminated
    assert provider.delete(spec.name) is False  # no node left: the leftovers go
    assert nothing_left(aws)


def test_stop_and_start_act_on_every_node(aws, provider, offers) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, 2)
    provider.create(spec, offer)
    stopped = provider.stop(spec.name)
    assert stopped is not None and stopped.rank == 0
    assert {i["State"]["Name"] for i in aws.instances()} == {"stopped"}
    provider.start(spec.name)
    assert {i["State"]["Name"] for i in aws.instances()} == {"running"}


def test_read_cluster_reports_reads_every_node_in_rank_order(aws, provider, offers) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, 2)
    provider.create(spec, offer)
    nodes = provider.cluster_nodes(spec.name)
    packed = base64.b64encode(json.dumps(REPORT).encode()).decode()
    aws.faults.set_console(str(nodes[1].cloud_id), f"boot\nTRAINVM_REPORT={packed}\n")
    reports = provider.read_cluster_reports(spec.name)
    assert list(reports) == [f"{spec.name}-0", f"{spec.name}-1"]
    assert reports[f"{spec.name}-0"] is None and reports[f"{spec.name}-1"] is not None


def test_not_compact_launches_without_a_placement_group(aws, provider, offers) -> None:
    offer = offers[0]
    spec = cluster_spec(offer, 2, compact=False)
    provider.create(spec, offer)
    assert aws.faults.calls("CreatePlacementGroup") == [] and "Placement.GroupName" not in aws.faults.calls("RunInstances")[0].params
    assert len(aws.instances()) == 2 and aws.placement_groups() == []


def test_a_single_vm_of_that_name_blocks_the_cluster(aws, provider, offers) -> None:
    offer = offers[0]
    single = t4_spec(offer)
    provider.create(single, offer)
    with pytest.raises(ConflictError):
        provider.create(cluster_spec(offer, 2, name=single.name), offer)
    assert len(aws.instances()) == 1 and aws.faults.calls("CreatePlacementGroup") == []


def test_too_many_tags_fail_before_anything_exists(aws, provider, offers) -> None:
    import hashlib

    from provisioner.providers.aws import request as R

    offer = offers[0]
    base = cluster_spec(offer, 2)
    room = R.MAX_TAGS - len(R.tags(base, R.preview_ami(base.os)))  # profile chunks one VM could still carry
    noise = b"".join(hashlib.sha256(bytes([i, j])).digest() for i in range(256) for j in range(4)).hex()
    size = next(n for n in range(0, len(noise), 64)
                if len(R.profile_tags(json.dumps({"pad": noise[:n]}))) == room)
    spec = cluster_spec(offer, 2, profile_json=json.dumps({"pad": noise[:size]}))
    R.instance_tags(spec, R.preview_ami(spec.os))  # fits one VM...
    with pytest.raises(InvalidRequestError, match="tags"):  # ...not a node (rank, cluster, node list)
        provider.create(spec, offer)
    assert nothing_left(aws) and aws.faults.calls("RunInstances") == []
