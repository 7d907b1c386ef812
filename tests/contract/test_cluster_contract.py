"""The cluster half of the provider contract (providers/base.py, "clusters"; docs/spec.md "Multi-node clusters"):
``create`` with ``LaunchSpec.nodes`` > 1 makes every node on the cloud's group engine, all or nothing; ``find`` of
the cluster is its rank-0 node; ``list`` shows every node; ``cluster_nodes`` / ``read_cluster_reports`` in rank
order; ``delete`` / ``stop`` / ``start`` act on every node, ``delete`` on the placement resources too.

Runs on every cloud whose harness declares ``cluster`` (harness.ClusterHarness); the others are skipped, so a
cloud's group engine opts in with one harness field."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from provisioner.errors import CapacityError
from provisioner.providers.base import InstanceRecord, LaunchSpec
from provisioner.verify.report import decode_report
from tests.contract.harness import REPORT, CloudHarness

N = 3


@pytest.fixture
def group(cloud: CloudHarness) -> CloudHarness:
    if cloud.cluster is None:
        pytest.skip(f"{cloud.name} declares no cluster support (CloudHarness.cluster)")
    return cloud


def cluster_spec(cloud: CloudHarness, nodes: int = N, **kw: Any) -> LaunchSpec:
    spec = cloud.spec(name=kw.pop("name", "trainvm-ddp-0123abcd"), **kw)
    profile = json.loads(spec.profile_json)
    profile["hardware"]["nodes"] = nodes
    return replace(spec, nodes=nodes, compact=True, profile_json=json.dumps(profile, sort_keys=True))


def _ranks(records: list[InstanceRecord], cluster: str) -> list[tuple[str | None, int | None, int]]:
    return sorted((r.cluster, r.rank, r.nodes) for r in records if r.cluster == cluster)


def test_cluster_create_find_list_and_nodes(group: CloudHarness) -> None:
    spec, offer = cluster_spec(group), group.cluster.offers[0]  # type: ignore[union-attr]
    assert group.provider.find(spec.name) is None and group.provider.cluster_nodes(spec.name) == []
    rec = group.provider.create(spec, offer)
    assert (rec.cluster, rec.rank, rec.nodes, rec.state) == (spec.name, 0, N, "RUNNING")
    assert (rec.cloud, rec.region, rec.instance_type) == (offer.cloud, offer.region, offer.instance_type)
    found = group.twin().find(spec.name)
    assert found is not None and (found.name, found.cluster, found.rank, found.nodes) == (rec.name, spec.name, 0, N)
    nodes = group.twin().cluster_nodes(spec.name)
    assert [n.rank for n in nodes] == list(range(N)) and nodes[0].name == rec.name
    assert len({n.name for n in nodes}) == N and len({n.ip for n in nodes}) == N
    assert all((n.cluster, n.nodes, n.state, n.zone, n.instance_type, n.hash) ==
               (spec.name, N, "RUNNING", rec.zone, rec.instance_type, rec.hash) for n in nodes)
    assert _ranks(group.twin().list(), spec.name) == [(spec.name, i, N) for i in range(N)]
    again = group.twin().create(spec, offer)  # a re-run of `up` adopts the cluster
    assert again.adopted and (again.cluster, again.rank) == (spec.name, 0)
    assert len(group.provider.cluster_nodes(spec.name)) == N


def test_partial_stock_out_leaves_nothing_and_failover_moves_the_whole_group(group: CloudHarness) -> None:
    from provisioner.provision.failover import provision

    spec = cluster_spec(group)
    short, roomy = group.cluster.offers[:2]  # type: ignore[union-attr]
    group.cluster.stock_out(short, N - 1)  # type: ignore[union-attr]  # room for all but one node
    with pytest.raises(CapacityError) as err:
        group.provider.create(spec, short)
    assert err.value.cleanup == "verified" and err.value.left_behind == ()
    assert group.leftovers() == [] and group.provider.find(spec.name) is None

    between: list[list[str]] = []

    def on_attempt(attempt: Any) -> None:
        if attempt.outcome != "created":
            between.append(group.leftovers())

    result = provision([short, roomy], lambda o: spec, lambda c: group.provider, on_attempt)
    assert [a.outcome for a in result.attempts][-1] == "created" and between == [[]]
    assert result.offer == roomy and result.record.cluster == spec.name
    nodes = group.twin().cluster_nodes(spec.name)
    assert len(nodes) == N and {n.region for n in nodes} == {roomy.region}


def test_cluster_delete_leaves_nothing(group: CloudHarness) -> None:
    spec = cluster_spec(group)
    group.provider.create(spec, group.cluster.offers[0])  # type: ignore[union-attr]
    assert len(group.leftovers()) > N  # the nodes and at least one placement resource
    assert group.provider.delete(spec.name) is True
    assert group.leftovers() == [] and group.provider.find(spec.name) is None
    assert group.twin().cluster_nodes(spec.name) == [] and group.twin().list() == []
    assert group.twin().delete(spec.name) is False


def test_cluster_reports_in_rank_order(group: CloudHarness) -> None:
    spec = cluster_spec(group)
    group.provider.create(spec, group.cluster.offers[0])  # type: ignore[union-attr]
    nodes = group.provider.cluster_nodes(spec.name)
    reports = group.twin().read_cluster_reports(spec.name)
    assert list(reports) == [n.name for n in nodes] and all(r is None for r in reports.values())
    group.put_report(nodes[1], REPORT)
    reports = group.twin().read_cluster_reports(spec.name)
    assert list(reports) == [n.name for n in nodes]
    assert reports[nodes[1].name] == decode_report(REPORT) and reports[nodes[0].name] is None
    _, profile = group.provider.read_report(spec.name)
    assert profile == json.loads(spec.profile_json)  # the cluster's stored profile (hardware.nodes = N)
    assert group.provider.read_cluster_reports("trainvm-nope-00000000") == {}


def test_cluster_stop_then_start_acts_on_every_node(group: CloudHarness) -> None:
    spec = cluster_spec(group)
    group.provider.create(spec, group.cluster.offers[0])  # type: ignore[union-attr]
    stopped = group.provider.stop(spec.name)
    assert stopped is not None and stopped.cluster == spec.name
    assert {n.state for n in group.twin().cluster_nodes(spec.name)} <= set(group.stopped_states)
    started = group.provider.start(spec.name)
    assert started is not None and started.state == "RUNNING"
    assert {n.state for n in group.twin().cluster_nodes(spec.name)} == {"RUNNING"}


def test_one_drifting_node_makes_verify_fail_through_the_cli(group: CloudHarness, cli: Any, install_providers: Any) -> None:
    from provisioner.providers.registry import provisionable_clouds
    from tests.fakes import FakeProvider

    spec, offer = cluster_spec(group), group.cluster.offers[0]  # type: ignore[union-attr]
    group.provider.create(spec, offer)
    nodes = group.provider.cluster_nodes(spec.name)
    for node in nodes:
        group.put_report(node, REPORT)
    install_providers({other: group.provider if other == offer.cloud else FakeProvider(other)
                       for other in provisionable_clouds()})
    same = cli("verify", spec.name, "--json").json()
    assert not [f for f in same["fields"] if f["field"].startswith("nodes.")], same  # identical nodes
    group.put_report(nodes[2], {**REPORT, "driver": "550.90.07"})
    r = cli("verify", spec.name, "--json")
    doc = r.json()
    assert r.code == 1 and doc["status"] in ("drift", "failed")
    row = next(f for f in doc["fields"] if f["field"] == "nodes.driver")
    assert row["ok"] is False and nodes[2].name in str(row["observed"]) and "550.90.07" in str(row["observed"])
