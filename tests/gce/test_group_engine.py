"""Issue 18, part 4: the GCE group engine (providers/gcp/group.py) through the real google-cloud-compute SDK
against the emulator's group APIs (tests/emulators/gce_group.py): one bulkInsert with count = minCount = N and
per-instance names, a compact placement policy created first and deleted with the cluster, partial success
read from the operation, all or nothing on a stock-out, the node list in every node's metadata, delete leaves
nothing. What the emulator cannot show: placement itself (no racks) and the fabric's performance."""

from __future__ import annotations

import json

import pytest

from provisioner.providers.base import CapacityError
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.group import (
    GceGroup,
    GroupClients,
    bulk_body,
    instance_properties,
    node_names,
    policy_name,
)
from provisioner.providers.gcp.request import request_preview
from provisioner.render.cluster import parse_node_list

PROJECT = "test-proj"
ZONE = "us-central1-a"


@pytest.fixture(scope="module")
def group_emu():
    from tests.emulators.gce_group import GceGroupEmulator

    with GceGroupEmulator(seed=11) as emu:
        yield emu


@pytest.fixture
def emu(group_emu):
    group_emu.reset()
    yield group_emu
    group_emu.reset()


@pytest.fixture
def group(emu) -> GceGroup:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    kw = {"credentials": AnonymousCredentials(), "client_options": {"api_endpoint": emu.url}}
    clients = GroupClients(compute_v1.InstancesClient(**kw), compute_v1.ZoneOperationsClient(**kw),
                           compute_v1.ResourcePoliciesClient(**kw), compute_v1.RegionOperationsClient(**kw))
    api = GceApi(project=PROJECT, credentials=AnonymousCredentials(), endpoint=emu.url, retry_base_delay=0)
    return GceGroup(clients, PROJECT, api=api, op_timeout=5, poll=0.01)


@pytest.fixture
def body(bert_spec, offer) -> dict:
    return request_preview(bert_spec, offer(zone=ZONE, instance_type="g2-standard-8"), PROJECT) | {
        "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
            "sourceImage": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts",
            "diskType": f"zones/{ZONE}/diskTypes/pd-balanced", "diskSizeGb": "150"}}]}


def test_request_bodies_for_four_a100_nodes(bert_spec, offer) -> None:
    """The bodies trainvm sends for 4 nodes: count = minCount = "4" (int64 as strings), names in rank order,
    bare machine/accelerator/disk type names, the policy's self link."""
    inst = request_preview(bert_spec, offer(zone=ZONE, instance_type="a2-highgpu-1g"), PROJECT)
    link = f"projects/{PROJECT}/regions/us-central1/resourcePolicies/{policy_name('ddp')}"
    doc = bulk_body(node_names("ddp", 4), instance_properties(inst, link))
    assert (doc["count"], doc["minCount"]) == ("4", "4")
    assert list(doc["perInstanceProperties"]) == ["ddp-0", "ddp-1", "ddp-2", "ddp-3"]
    props = doc["instanceProperties"]
    assert props["machineType"] == "a2-highgpu-1g" and "name" not in props
    assert all("/" not in (d.get("initializeParams") or {}).get("diskType", "") for d in props["disks"])
    assert props["resourcePolicies"] == [link]
    assert props["scheduling"]["onHostMaintenance"] == "TERMINATE"


@pytest.mark.parametrize("nodes", [1, 4, 16])
def test_create_all_nodes_compact_with_the_node_list(emu, group, body, nodes) -> None:
    made = group.create("ddp", ZONE, body, nodes, compact=True)
    assert [n.name for n in made] == node_names("ddp", nodes)
    [bulk] = emu.calls("instances.bulkInsert")
    assert bulk.body["count"] == bulk.body["minCount"] == str(nodes)
    policy = emu.policies[(PROJECT, "us-central1", policy_name("ddp"))]
    assert policy["groupPlacementPolicy"]["collocation"] == "COLLOCATED"
    ips = [n.network_interfaces[0].network_i_p for n in made]
    assert len(set(ips)) == nodes
    for n in made:
        items = {i.key: i.value for i in n.metadata.items}
        assert parse_node_list(items) == ips  # every node reads the same list, rank order
        assert "startup-script" in items  # the node's own metadata is kept
        assert n.resource_policies and n.resource_policies[0].endswith(f"/resourcePolicies/{policy_name('ddp')}")
    group.delete("ddp", ZONE, nodes, compact=True)
    assert emu.instances == {} and emu.policies == {}


def test_not_compact_creates_no_policy(emu, group, body) -> None:
    group.create("ddp", ZONE, body, 2, compact=False)
    assert emu.policies == {} and not emu.calls("resourcePolicies.insert")
    assert all(not inst.get("resourcePolicies") for inst in emu.instances.values())


@pytest.mark.parametrize(("capacity", "code"), [(0, "ZONE_RESOURCE_POOL_EXHAUSTED"), (3, "VM_MIN_COUNT_NOT_REACHED")])
def test_stock_out_leaves_nothing(emu, group, body, capacity, code) -> None:
    emu.capacity[ZONE] = capacity
    with pytest.raises(CapacityError) as exc:
        group.create("ddp", ZONE, body, 4, compact=True)
    assert exc.value.code == code
    assert emu.instances == {} and emu.policies == {}
    op = next(o for o in emu.operations.values() if o["operationType"] == "bulkInsert")
    st = op["instancesBulkInsertOperationMetadata"]["perLocationStatus"][f"zones/{ZONE}"]
    assert (st["createdVmCount"], st["deletedVmCount"]) == (0, capacity)


def test_partial_success_is_detected_and_undone(emu, group, body, monkeypatch) -> None:
    """GCE answers DONE without an error when minCount < count was met: a request that (wrongly) asked for
    less than all must still not pass as a cluster; the engine reads perLocationStatus and cleans up."""
    import provisioner.providers.gcp.group as g

    monkeypatch.setattr(g, "bulk_body", lambda names, props: {**bulk_body(names, props), "minCount": "2"})
    emu.capacity[ZONE] = 3
    with pytest.raises(CapacityError, match="created 3 of 4 nodes"):
        group.create("ddp", ZONE, body, 4, compact=True)
    assert emu.instances == {} and emu.policies == {}


def test_policy_in_use_cannot_be_deleted_first(emu, group, body) -> None:
    from google.api_core.exceptions import BadRequest
    from google.cloud import compute_v1

    group.create("ddp", ZONE, body, 2, compact=True)
    with pytest.raises(BadRequest, match="already being used"):
        group.c.resource_policies.delete_unary(project=PROJECT, region="us-central1", resource_policy=policy_name("ddp"))
    group.delete("ddp", ZONE, 2, compact=True)
    group.delete("ddp", ZONE, 2, compact=True)  # again: nothing left, no error
    assert isinstance(group.c.instances, compute_v1.InstancesClient) and emu.instances == {}


def test_emulator_refuses_selflinks_and_unknown_policies(emu, group, body) -> None:
    from google.api_core.exceptions import NotFound, ServiceUnavailable
    from google.cloud import compute_v1

    props = instance_properties(body, None)
    props["machineType"] = f"zones/{ZONE}/machineTypes/g2-standard-8"
    res = compute_v1.BulkInsertInstanceResource.from_json(json.dumps(bulk_body(["a-0"], props)))
    with pytest.raises(ServiceUnavailable):
        group.c.instances.bulk_insert_unary(project=PROJECT, zone=ZONE, bulk_insert_instance_resource_resource=res)
    props = instance_properties(body, f"projects/{PROJECT}/regions/us-central1/resourcePolicies/nope")
    res = compute_v1.BulkInsertInstanceResource.from_json(json.dumps(bulk_body(["a-0"], props)))
    with pytest.raises(NotFound):
        group.c.instances.bulk_insert_unary(project=PROJECT, zone=ZONE, bulk_insert_instance_resource_resource=res)
    assert emu.instances == {}


def test_names_fit_gce_limits() -> None:
    long = "trainvm-" + "a" * 41 + "-0123abcd"  # the longest VM name trainvm makes (58 characters)
    assert all(len(n) <= 63 for n in [*node_names(long, 64), policy_name(long)])
    assert len(set(node_names(long, 64))) == 64
