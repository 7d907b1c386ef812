"""Issue 18, part 3: `verify` of a cluster fails when any node drifts from the profile or when the nodes
differ from each other (driver, CUDA, cuDNN, NCCL, packages), and names the node."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from provisioner.verify.cluster import compare_cluster, identity
from provisioner.verify.compare import compare
from provisioner.verify.report import StackReport


@pytest.fixture
def cluster_profile(profile: dict[str, Any]) -> dict[str, Any]:
    return {**profile, "hardware": {**profile["hardware"], "nodes": 4}}


def nodes(vm_report: dict[str, Any], n: int = 4) -> dict[str, dict[str, Any]]:
    base = copy.deepcopy(vm_report)
    base["packages"]["nvidia-nccl-cu12"] = "2.20.5"
    return {f"ddp-{i}": copy.deepcopy(base) for i in range(n)}


def rows(result) -> dict[str, tuple[Any, Any, bool]]:
    return {f.field: (f.expected, f.observed, f.ok) for f in result.fields}


def test_identical_matching_nodes_match(cluster_profile, vm_report) -> None:
    assert compare(cluster_profile, vm_report).status == "match"  # the fixture itself matches
    result = compare_cluster(cluster_profile, nodes(vm_report))
    assert result.status == "match", result.rows()
    assert [f.field for f in result.fields] == [f"node[ddp-{i}].status" for i in range(4)]


def test_one_node_drifting_from_the_profile_is_named(cluster_profile, vm_report) -> None:
    reports = nodes(vm_report)
    reports["ddp-2"]["driver"] = "550.90.07"
    result = compare_cluster(cluster_profile, reports)
    assert result.status == "drift"
    r = rows(result)
    assert r["node[ddp-2].stack.driver"] == ("550.127.05", "550.90.07", False)
    assert r["nodes.driver"] == ("550.127.05", "ddp-2: 550.90.07", False)
    assert all(r[f"node[ddp-{i}].status"][2] for i in (0, 1, 3)) and not r["node[ddp-2].status"][2]


@pytest.mark.parametrize(("field", "change", "row", "shown"), [
    ("nccl", lambda rep: rep["packages"].update({"nvidia-nccl-cu12": "2.21.5"}), "nodes.nccl", "nvidia-nccl-cu12==2.21.5"),
    ("numpy", lambda rep: rep["packages"].update({"numpy": "2.0.0"}), "nodes.packages.numpy", "2.0.0"),
    ("cudnn", lambda rep: rep.update({"cudnn": "9.1.1"}) or rep["framework"].update({"cudnn": "90101"}), "nodes.cudnn", "9.1.1"),
    ("cuda runtime", lambda rep: rep.update({"cuda_runtime": "12.4.99"}), "nodes.cuda_runtime", "12.4.99"),
    ("glibc", lambda rep: rep["os"].update({"glibc": "2.36"}), "nodes.glibc", "2.36"),
])
def test_nodes_differing_where_the_profile_is_silent_is_drift(cluster_profile, vm_report, field, change, row, shown) -> None:
    """NCCL and numpy are not pinned by the profile, and each node alone matches it: the cluster does not."""
    reports = nodes(vm_report)
    change(reports["ddp-3"])
    assert compare(cluster_profile, reports["ddp-3"]).status in ("match", "drift")
    result = compare_cluster(cluster_profile, reports)
    assert result.status == "drift", field
    r = rows(result)
    assert r[row][1] == f"ddp-3: {shown}" and r[row][2] is False


def test_majority_value_is_expected_and_ties_follow_rank_zero(cluster_profile, vm_report) -> None:
    reports = nodes(vm_report, 2)
    reports["ddp-1"]["packages"]["numpy"] = "2.0.0"
    r = rows(compare_cluster({**cluster_profile, "hardware": {**cluster_profile["hardware"], "nodes": 2}}, reports))
    assert r["nodes.packages.numpy"] == ("1.26.4", "ddp-1: 2.0.0", False)


def test_a_package_missing_on_one_node(cluster_profile, vm_report) -> None:
    reports = nodes(vm_report)
    del reports["ddp-0"]["packages"]["numpy"]
    r = rows(compare_cluster(cluster_profile, reports))
    assert r["nodes.packages.numpy"] == ("1.26.4", "ddp-0: -", False)


def test_failed_and_provisioning_nodes(cluster_profile, vm_report) -> None:
    reports: dict[str, Any] = nodes(vm_report)
    reports["ddp-1"] = None
    assert compare_cluster(cluster_profile, reports).status == "provisioning"
    reports["ddp-2"] = {**reports["ddp-2"], "status": "failed:cluster:12", "error": "no address of this node is in the node list"}
    result = compare_cluster(cluster_profile, reports)
    assert result.status == "failed"
    assert "ddp-2: failed (phase cluster, line 12: no address of this node is in the node list)" in result.message


def test_a_missing_node_fails(cluster_profile, vm_report) -> None:
    reports = nodes(vm_report, 3)
    result = compare_cluster(cluster_profile, reports)
    assert result.status == "failed" and rows(result)["nodes.count"] == (4, 3, False)
    assert "3 of 4 nodes found" in result.message


def test_identity_covers_what_must_be_identical(vm_report) -> None:
    ident = identity(StackReport.model_validate(vm_report))
    assert {"driver", "cuda", "cudnn", "nccl", "python", "os", "gpus", "packages.torch", "profile_hash"} <= set(ident)
    assert ident["cuda"] == "12.4" and ident["cudnn"] == "9.1.0" and ident["driver"] == "550.127.05"


# ---------------------------------------------------------------------------- verify NAME (CLI)
class ClusterFake:
    """A fake provider whose VM ``name`` is rank 0 of a cluster: read_cluster_reports lists every node."""

    def __init__(self, base, reports: dict[str, Any]) -> None:
        self.base, self.node_reports = base, reports
        self.NAME = base.NAME

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.base, attr)

    def read_cluster_reports(self, name: str) -> dict[str, Any]:
        return self.node_reports


@pytest.fixture
def cluster_vm(cli, monkeypatch, vm_report, cluster_profile, install_providers):
    from tests.fakes import FakeProvider

    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    gcp = FakeProvider("gcp")
    azure = FakeProvider("azure")
    install_providers({"azure": azure, "gcp": gcp})
    name = cli("up", str(__import__("tests.conftest", fromlist=["REPO"]).REPO / "profiles/examples/bert-finetune-t4.yaml"),
               "--yes", "--json").json()["name"]
    gcp.profiles[name] = cluster_profile  # what a cluster's rank 0 would store
    reports = nodes(vm_report)
    fake = ClusterFake(gcp, reports)
    install_providers({"azure": azure, "gcp": fake})
    return name, reports, gcp


def test_verify_name_of_a_cluster_names_the_odd_node(cli, cluster_vm) -> None:
    name, reports, _ = cluster_vm
    r = cli("verify", name, "--json")
    assert r.code == 0 and r.json()["status"] == "match", r.out
    reports["ddp-1"]["packages"]["nvidia-nccl-cu12"] = "2.21.5"
    doc = cli("verify", name, "--json").json()
    assert doc["status"] == "drift"
    assert {f["field"]: f["observed"] for f in doc["fields"] if not f["ok"]} == {"nodes.nccl": "ddp-1: nvidia-nccl-cu12==2.21.5"}
    text = cli("verify", name)
    assert text.code == 1 and "nodes.nccl" in text.out and "ddp-1" in text.out


def test_verify_name_of_a_cluster_without_node_listing_is_a_clear_error(cli, cluster_vm, install_providers) -> None:
    from tests.fakes import FakeProvider

    name, _, gcp = cluster_vm

    class NoNodeListing:  # a provider without read_cluster_reports (a cloud whose group engine is not wired)
        NAME = "gcp"

        def __getattr__(self, attr: str) -> Any:
            if attr == "read_cluster_reports":
                raise AttributeError(attr)
            return getattr(gcp, attr)

    install_providers({"azure": FakeProvider("azure"), "gcp": NoNodeListing()})
    r = cli("verify", name)
    assert r.code == 3 and "4-node cluster" in r.err and "cannot list a cluster's nodes" in r.err


def test_nodes_still_provisioning_are_pending_not_drift(cluster_profile, vm_report) -> None:
    """Issue 36 item 21: a node still running its startup script (or with no report yet) is "pending", named with its
    phase -- not a DRIFT row -- and the cluster says which node is in which phase."""
    reports: dict[str, Any] = nodes(vm_report)
    reports["ddp-1"] = {**reports["ddp-1"], "status": "running:packages"}
    reports["ddp-3"] = None
    result = compare_cluster(cluster_profile, reports)
    assert result.status == "provisioning" and not result.drifted, result.rows()
    verdicts = {field: verdict for field, _, _, verdict in result.rows()}
    assert verdicts == {"node[ddp-0].status": "ok", "node[ddp-1].status": "pending", "node[ddp-2].status": "ok",
                        "node[ddp-3].status": "pending"}
    assert result.describe() == "provisioning (ddp-1: phase packages; ddp-3: no report yet)"
    every = compare_cluster(cluster_profile, {n: {**r, "status": "running:driver"} for n, r in nodes(vm_report).items()})
    assert {v for *_, v in every.rows()} == {"pending"} and "DRIFT" not in str(every.as_dict("ddp"))
