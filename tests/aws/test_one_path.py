"""One create path for 1..N nodes (providers/aws/group.py): a single VM is a group of one, and still looks to the
user as it did when it had a path of its own.

The CLI and boto3 against moto's server behind the fault proxy. The "legacy" instance is launched directly through
moto with the tags, security group and key pair the two-path code (before the merge) wrote for a single VM, spelled
out here on purpose (not built by today's request builder), so that a change of the builder cannot hide a VM made
by an earlier trainvm from `status`, `stop`, `start` or `down`."""

from __future__ import annotations

import base64
import gzip

import pytest

from tests.aws.conftest import t4_offers, t4_spec
from tests.e2e.conftest import (
    env,  # noqa: F401 - the CLI tests' environment (no GCE/Azure credentials)
    ssh_key,
)


def _tags(obj) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in obj.get("Tags") or []}


def _legacy_single_vm(aws, tmp_path) -> tuple[str, str]:
    """An instance as the two-path trainvm created a single VM: labels, ``Name`` = the VM's name (no rank suffix,
    no ``trainvm-group``/``trainvm-nodes``/``trainvm-rank``), ``trainvm-image``, the profile in
    ``trainvm-profile.N`` chunks; its ``<name>-sg`` security group and ``<name>`` key pair, both tagged."""
    offer = t4_offers("us-east-1")[0]
    spec = t4_spec(offer)
    name = spec.name
    ec2 = aws.client("ec2", direct=True)
    zones = {z["ZoneId"]: z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    packed = base64.b64encode(gzip.compress(spec.profile_json.encode(), mtime=0)).decode()
    labels = [{"Key": k, "Value": v} for k, v in sorted(spec.labels.items())]
    tags = labels + [{"Key": "Name", "Value": name}, {"Key": "trainvm-image", "Value": "ami-12c6146b"}]
    tags += [{"Key": f"trainvm-profile.{i}", "Value": packed[o:o + 256]} for i, o in enumerate(range(0, len(packed), 256))]
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    sg = ec2.create_security_group(GroupName=f"{name}-sg", Description=f"trainvm {name}: no inbound traffic", VpcId=vpc,
                                   TagSpecifications=[{"ResourceType": "security-group",
                                                       "Tags": labels + [{"Key": "Name", "Value": name}]}])["GroupId"]
    key = ssh_key(tmp_path)
    ec2.import_key_pair(KeyName=name, PublicKeyMaterial=key.read_bytes(),
                        TagSpecifications=[{"ResourceType": "key-pair", "Tags": labels}])
    inst = ec2.run_instances(ImageId="ami-12c6146b", InstanceType=offer.instance_type, MinCount=1, MaxCount=1,
                             Placement={"AvailabilityZone": zones[str(offer.zone)]}, SecurityGroupIds=[sg], KeyName=name,
                             TagSpecifications=[{"ResourceType": "instance", "Tags": tags},
                                                {"ResourceType": "volume", "Tags": tags[:len(labels) + 2]}],
                             ClientToken=f"{name[:23]}-legacy")["Instances"][0]
    return name, inst["InstanceId"]


def test_a_single_vm_made_by_the_two_path_code_is_found_stopped_started_and_deleted(cli, aws, env, tmp_path) -> None:  # noqa: F811
    name, iid = _legacy_single_vm(aws, tmp_path)
    status = cli("status", name, "--json")
    assert status.code == 0, status.err
    [row] = status.json()["vms"]
    assert row["name"] == name and row["state"] == "RUNNING" and row["cloud"] == "aws"
    assert not {"members", "nodes_found", "cluster", "rank"} & {k for k, v in row.items() if v is not None}
    listed = cli("list", "--json").json()["vms"]
    assert [v["name"] for v in listed] == [name] and listed[0].get("members") is None

    stopped = cli("stop", name, "--yes", "--json")
    assert stopped.code == 0, stopped.err
    assert stopped.json()["state"] == "STOPPED" and aws.instances()[0]["State"]["Name"] == "stopped"
    started = cli("start", name, "--json")
    assert started.code == 0 and started.json()["state"] == "RUNNING", started.err

    gone = cli("down", name, "--yes", "--json")
    assert gone.code == 0 and gone.json()["deleted"] is True, gone.err
    ec2 = aws.client("ec2", direct=True)
    [inst] = [i for r in ec2.describe_instances(InstanceIds=[iid])["Reservations"] for i in r["Instances"]]
    assert inst["State"]["Name"] == "terminated"
    assert aws.security_groups() == [] and ec2.describe_key_pairs()["KeyPairs"] == []


@pytest.fixture
def provider(aws):
    from provisioner.providers.aws.provider import AwsProvider

    return AwsProvider(op_timeout=5, poll_interval=0)


def test_a_single_vm_is_a_group_of_one_with_the_tags_it_always_had(aws, provider, tmp_path) -> None:
    """The one path launches one instance whose tag keys are those the two-path code wrote (no ``-0`` suffix, no
    cluster tags), and whose record has no cluster fields; no placement group, no rank tagging afterwards."""
    offer = t4_offers("us-east-1")[0]
    spec = t4_spec(offer, compact=True)
    rec = provider.create(spec, offer)
    [inst] = aws.instances()
    tags = _tags(inst)
    chunks = {k for k in tags if k.startswith("trainvm-profile.")}
    assert set(tags) == set(spec.labels) | {"Name", "trainvm-image"} | chunks
    assert tags["Name"] == spec.name and rec.name == spec.name
    assert (rec.cluster, rec.rank, rec.nodes) == (None, None, 1)
    [run] = aws.faults.calls("RunInstances")
    assert run.params["MinCount"] == run.params["MaxCount"] == "1"
    assert aws.faults.calls("CreateTags") == [] and aws.faults.calls("CreatePlacementGroup") == []
    assert aws.placement_groups() == []


def test_a_cluster_of_that_name_blocks_the_single_vm(aws, provider) -> None:
    from provisioner.providers.base import ConflictError

    offer = t4_offers("us-east-1")[0]
    cluster = t4_spec(offer, nodes=2, compact=False)
    provider.create(cluster, offer)
    with pytest.raises(ConflictError, match="a cluster named"):
        provider.create(t4_spec(offer, name=cluster.name), offer)
    assert len(aws.instances()) == 2 and len(aws.faults.calls("RunInstances")) == 1
