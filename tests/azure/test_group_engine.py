"""The Azure group engine (the scale-set compute step of providers/azure/create.py, compute.py and group.py) through azure-mgmt-compute/-network/-resource against the
ARM emulator's scale sets and proximity placement groups (tests/emulators/arm_vmss.py says what it does not
model: placement itself, IMDS, overprovisioning, instance-id gaps). Every failure must leave no resource group."""

from __future__ import annotations

import json

import pytest

from provisioner.providers.azure import group_request as G
from provisioner.providers.azure.request import names
from provisioner.providers.base import CapacityError, InstanceRecord
from provisioner.provision.failover import provision
from provisioner.render.cluster import parse_node_list
from tests.azure.conftest import named

A100 = "Standard_ND96asr_v4"
T4 = "Standard_NC4as_T4_v3"
VMSS = "/providers/Microsoft.Compute/virtualMachineScaleSets/"


def cluster(spec, nodes, name=None, compact=True):
    return named(spec, name or spec.name, nodes=nodes, compact=compact)


def scale_set_tags(emu, name):
    return emu.resource(f"/subscriptions/{emu.subscription_id}/resourceGroups/{names(name).rg}{VMSS}{name}")["tags"]


@pytest.mark.parametrize("nodes", [2, 4])
def test_creates_n_nodes_in_one_scale_set_and_writes_the_node_list(emu, provider, t4_spec, offers, nodes):
    spec = cluster(t4_spec, nodes)
    record = provider.create(spec, offers[("eastus", A100)])
    assert (record.name, record.cluster, record.rank, record.nodes) == (f"{spec.name}-0", spec.name, 0, nodes)
    assert record.state == "RUNNING" and record.ip and record.instance_type == A100
    put = emu.calls("PUT", VMSS)
    assert len(put) == 1 and put[0].status in (200, 201)
    body = put[0].body
    assert body["sku"] == {"name": A100, "tier": "Standard", "capacity": nodes}
    props = body["properties"]
    assert (props["orchestrationMode"], props["singlePlacementGroup"], props["overprovision"],
            props["platformFaultDomainCount"], props["upgradePolicy"]) == ("Uniform", True, False, 1, {"mode": "Manual"})
    assert props["proximityPlacementGroup"]["id"].endswith(f"/proximityPlacementGroups/{spec.name}-ppg")
    # the PPG was created before the scale set, with one (synchronous) PUT
    order = [r.path for r in emu.requests if r.method == "PUT" and "/providers/" in r.path]
    assert order.index(next(p for p in order if "proximityPlacementGroups" in p)) < order.index(put[0].path)
    nodes_ = provider.cluster_nodes(spec.name)
    assert [(n.name, n.rank, n.nodes, n.cluster) for n in nodes_] == [
        (f"{spec.name}-{k}", k, nodes, spec.name) for k in range(nodes)]
    assert len({n.ip for n in nodes_}) == nodes
    # the node list: private IPs in rank order, in the scale set's tags (what IMDS compute/tags shows a node)
    ips = parse_node_list(scale_set_tags(emu, spec.name))
    assert len(ips) == nodes and len(set(ips)) == nodes and all(ip.startswith("10.0.0.") for ip in ips)
    nics = emu.calls("GET", f"{VMSS}{spec.name}/networkInterfaces")
    assert nics and all(r.status == 200 for r in nics)
    assert scale_set_tags(emu, spec.name)[G.NODES_TAG] == str(nodes)
    assert provider.find(spec.name).rank == 0


def test_without_compact_placement_there_is_no_ppg(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 2, compact=False)
    provider.create(spec, offers[("eastus", T4)])
    assert not emu.calls("PUT", "proximityPlacementGroups")
    assert "proximityPlacementGroup" not in emu.calls("PUT", VMSS)[0].body["properties"]


def test_partial_stock_out_leaves_nothing_and_is_a_capacity_error(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 4)
    emu.inject("partial_capacity_lro", location="eastus", created=3)
    with pytest.raises(CapacityError) as err:
        provider.create(spec, offers[("eastus", A100)])
    assert err.value.code == "AllocationFailed"
    assert "3 of 4 nodes had been allocated" in str(err.value)
    assert err.value.cleanup == "verified"
    assert emu.resource_groups() == []
    # the engine looked at what the failed PUT had left before it deleted the group
    assert emu.calls("GET", f"{VMSS}{spec.name}/virtualMachines")


def test_failover_moves_the_whole_group_to_the_next_region(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 4)
    chain = [offers[(r, A100)] for r in ("eastus", "westus2")]
    emu.inject("partial_capacity_lro", location="eastus", created=2)
    result = provision(chain, lambda o: spec, lambda cloud: provider, [].append)
    assert [(a.region, a.outcome) for a in result.attempts] == [("eastus", "capacity"), ("westus2", "created")]
    nodes = provider.cluster_nodes(spec.name)
    assert [n.region for n in nodes] == ["westus2"] * 4
    assert emu.resource_groups() == [names(spec.name).rg]


def test_delete_leaves_nothing(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 2)
    provider.create(spec, offers[("eastus", A100)])
    assert provider.delete(spec.name) is True
    assert emu.resource_groups() == [] and emu.resources_in(names(spec.name).rg) == []
    assert provider.find(spec.name) is None and provider.cluster_nodes(spec.name) == []


def test_list_shows_every_node_and_stop_start_act_on_all(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 2)
    provider.create(spec, offers[("eastus", T4)])
    listed = [r for r in provider.list() if r.cluster == spec.name]
    assert [r.rank for r in listed] == [0, 1]
    stopped = provider.stop(spec.name)
    assert isinstance(stopped, InstanceRecord)
    assert {n.state for n in provider.cluster_nodes(spec.name)} == {"DEALLOCATED"}
    provider.start(spec.name)
    assert {n.state for n in provider.cluster_nodes(spec.name)} == {"RUNNING"}


def test_read_cluster_reports_in_rank_order(emu, provider, t4_spec, offers):
    import base64
    import gzip

    spec = cluster(t4_spec, 4)
    provider.create(spec, offers[("eastus", A100)])
    rg = names(spec.name).rg
    for k in (0, 1, 3):  # node 2 has no report yet
        report = json.dumps({"schema": 1, "status": "ready", "driver": f"550.127.0{k}"})  # a schema-1 report: one
        # that is not (the old {"schema": 1, "node": k}) is ReportUnreadableError now, not None (issue 37)
        emu.set_run_command_output(rg, f"{spec.name}_{k}", base64.b64encode(gzip.compress(report.encode())).decode())
    reports = provider.read_cluster_reports(spec.name)
    assert list(reports) == [f"{spec.name}-{k}" for k in range(4)]
    assert reports[f"{spec.name}-2"] is None
    assert [r.driver if r else None for r in reports.values()] == ["550.127.00", "550.127.01", None, "550.127.03"]
    ran = sorted(c["vm"] for c in emu.run_commands)
    assert ran == [f"{spec.name}_{k}" for k in range(4)]
    _, profile = provider.read_report(spec.name)
    assert profile == json.loads(spec.profile_json)


def test_a_long_node_list_continues_in_more_tags(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 30)  # 30 addresses of 8-9 characters: more than one 256-character tag value
    provider.create(spec, offers[("eastus", T4)])
    tags = scale_set_tags(emu, spec.name)
    assert "trainvm-cluster-1" in tags and all(len(v) <= 256 for v in tags.values())
    ips = parse_node_list(tags)
    private = {nic["properties"]["virtualMachine"]["id"].rsplit("/", 1)[1]:
               nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
               for nic in emu.state.render_vmss_nics(emu.state.vmss(names(spec.name).rg, spec.name))}
    assert ips == [private[str(k)] for k in range(30)]  # rank order = instance-id order


def test_a_rerun_adopts_the_cluster_and_creates_nothing(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 2)
    provider.create(spec, offers[("eastus", T4)])
    puts = len(emu.calls("PUT", "/providers/Microsoft.(Compute|Network)/|/resourcegroups/[^/]+$"))
    again = provider.create(spec, offers[("eastus", T4)])
    # no resource is written; the lifecycle role is PUT again (idempotent: RoleAssignmentExists), as for one VM,
    # so that a re-run after an `up` killed before its role grant leaves a cluster that can stop itself
    assert puts and again.adopted and again.rank == 0
    assert len(emu.calls("PUT", "/providers/Microsoft.(Compute|Network)/|/resourcegroups/[^/]+$")) == puts


def test_a_failed_leftover_is_deleted_and_created_again(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 2)
    provider.create(spec, offers[("eastus", T4)])
    with emu._lock:  # a killed `up` left a scale set that failed, without its node list
        rec = emu.state.vmss(names(spec.name).rg, spec.name)
        rec["state"] = "Failed"
        rec["body"]["tags"] = {k: v for k, v in rec["body"]["tags"].items() if k != "trainvm-cluster"}
        emu.state.group(names(spec.name).rg)["tags"]["trainvm-lease-until"] = "0"  # its lease ran out
        rec["body"]["tags"]["trainvm-lease-until"] = "0"  # and so did the one on the scale set (its creator)
    record = provider.create(spec, offers[("eastus", T4)])
    assert not record.adopted and emu.calls("DELETE", "/resourcegroups/")
    assert len(parse_node_list(scale_set_tags(emu, spec.name))) == 2


def test_another_version_of_the_profile_is_a_conflict(emu, provider, t4_spec, offers):
    from provisioner.providers.base import ConflictError

    spec = cluster(t4_spec, 2)
    provider.create(spec, offers[("eastus", T4)])
    other = named(spec, spec.name, labels={**spec.labels, "trainvm-hash": "0123456789abcdef"})
    with pytest.raises(ConflictError):
        provider.create(other, offers[("eastus", T4)])
    assert len(provider.cluster_nodes(spec.name)) == 2


def test_the_lifecycle_role_goes_to_the_scale_sets_identity(emu, provider, t4_spec, offers):
    spec = named(cluster(t4_spec, 2), t4_spec.name, idle_shutdown_minutes=30)
    record = provider.create(spec, offers[("eastus", T4)])
    (assignment,) = emu.state.role_assignments.values()
    ident = emu.state.vmss(names(spec.name).rg, spec.name)["body"]["identity"]  # trainvm's own, made first
    (principal,) = [v["principalId"] for v in ident["userAssignedIdentities"].values()]
    assert assignment["principalId"] == principal and assignment["scope"].endswith(f"/resourceGroups/{names(spec.name).rg}")
    assert any("Virtual Machine Contributor" in note for note in record.notes)
    provider.delete(spec.name)
    assert emu.state.role_assignments == {}


def test_an_allocation_failure_polled_through_the_body_is_still_capacity(emu, provider, t4_spec, offers):
    emu.lro_style = "body"  # the failure's code then comes from a failed instance's view
    spec = cluster(t4_spec, 4)
    emu.inject("partial_capacity_lro", location="eastus", created=1)
    with pytest.raises(CapacityError) as err:
        provider.create(spec, offers[("eastus", A100)])
    assert err.value.code == "AllocationFailed" and "1 of 4 nodes" in str(err.value)
    assert emu.resource_groups() == []


def test_console_is_rank_zeros_serial_log(emu, provider, t4_spec, offers):
    spec = cluster(t4_spec, 2)
    provider.create(spec, offers[("eastus", T4)])
    emu.set_serial_log(names(spec.name).rg, f"{spec.name}_0", "boot\nTRAINVM_STATUS=running:apt\n")
    emu.set_serial_log(names(spec.name).rg, f"{spec.name}_1", "other node\n")
    text, offset = provider.console(spec.name)
    assert "TRAINVM_STATUS=running:apt" in text and offset == len(text)
    assert provider.console(spec.name, offset) == ("", offset)
    assert provider.console("trainvm-nothing-here") is None
