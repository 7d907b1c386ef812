"""Clusters (hardware.nodes > 1) through the CLI on the fake providers (tests/fakes.py): `up` shows N nodes and
the cluster's price, creates the whole group and reports its nodes; `status`/`list` show one entry with its nodes
(JSON too); `ssh --node K`; `down` deletes every node and the placement group and says how many. The same
commands against the GCE emulator through the real SDK: tests/e2e/test_cluster_gce_cli.py."""

from __future__ import annotations

import pytest

from tests.helpers import capture_ssh


def _profile(write_yaml, *, nodes: int = 3, hours: int = 10):
    return write_yaml(f"name: ddp\nextends: base/torch-2.4-cu124\nhardware: {{gpu: A100, gpu_count: 1, nodes: {nodes}}}\n"
                      f"placement: {{clouds: [gcp], compact: true}}\nlifecycle: {{max_run_hours: {hours}}}\n")


@pytest.fixture
def up(cli, write_yaml, clouds):
    def run(nodes: int = 3):
        r = cli("up", str(_profile(write_yaml, nodes=nodes)), "--yes", "--json")
        assert r.code == 0, r.err
        return r.json()
    return run


def test_up_creates_the_whole_cluster_and_reports_it(up, clouds) -> None:
    doc = up(3)
    fake = clouds["gcp"]
    name = doc["name"]
    assert sorted(fake.vms) == [f"{name}-{i}" for i in range(3)] and fake.placements == {name}
    c = doc["cluster"]
    assert c["nodes"] == 3 and [m["rank"] for m in c["members"]] == [0, 1, 2]
    assert c["price_hourly"] == pytest.approx(3 * c["price_hourly_per_node"])
    s = doc["summary"]
    assert s["nodes"] == 3 and s["cluster_price_hourly"] == pytest.approx(3 * s["price_hourly"])
    # a run costs every node's running price (compute + its disks); a stopped cluster keeps every node's disks
    assert s["cluster_running_hourly"] == pytest.approx(3 * s["running_hourly"]) and s["running_hourly"] > s["price_hourly"]
    assert s["cluster_stopped_hourly"] == pytest.approx(3 * s["stopped_hourly"]) and s["stopped_hourly"] > 0
    assert s["run_cost"] == round(3 * s["running_hourly"] * 10, 2)
    assert "for 3 nodes" in s["cost_line"]


def test_up_refuses_without_yes_naming_the_nodes_and_the_cluster_price(cli, write_yaml, clouds) -> None:
    r = cli("up", str(_profile(write_yaml, nodes=4)))
    assert r.code == 2 and "4 nodes of a2-highgpu-1g" in r.err and "/h in all" in r.err
    assert not clouds["gcp"].vms


def test_up_text_lists_the_nodes(cli, write_yaml, clouds) -> None:
    r = cli("up", str(_profile(write_yaml, nodes=2)), "--yes")
    assert r.code == 0, r.err
    assert "2 x a2-highgpu-1g" in r.out and "per node" in r.out and "for the cluster" in r.out
    assert "node 0:" in r.out and "node 1:" in r.out and "--node K (K = 0..1)" in r.out


def test_status_and_list_show_one_entry_with_its_nodes(up, cli, clouds) -> None:
    name = up(3)["name"]
    for args in (("status", "--json"), ("list", "--json"), ("status", name, "--json")):
        doc = cli(*args).json()
        assert [v["name"] for v in doc["vms"]] == [name], args
        entry = doc["vms"][0]
        assert entry["nodes"] == 3 and entry["nodes_found"] == 3 and entry["state"] == "RUNNING"
        assert [m["name"] for m in entry["members"]] == [f"{name}-{i}" for i in range(3)]
        assert entry["price_hourly"] == pytest.approx(3 * entry["price_hourly_per_node"])
    text = cli("status")
    assert f"{name} (3/3 nodes)" in text.out and f"node 2: {name}-2" in text.out
    clouds["gcp"].stop(f"{name}-1")
    assert cli("status", "--json").json()["vms"][0]["state"] == "MIXED"


def test_ssh_node_k_and_out_of_range(up, cli, monkeypatch) -> None:
    name = up(3)["name"]
    seen = capture_ssh(monkeypatch)
    assert cli("ssh", name).code == 0 and cli("ssh", name, "--node", "2", "--", "hostname").code == 0
    assert seen == [["ssh", "fake@203.0.113.10"], ["ssh", "fake@203.0.113.12", "--", "hostname"]]
    bad = cli("ssh", name, "--node", "3")
    assert bad.code == 2 and "has 3 nodes (--node 0 to 2)" in bad.err and len(seen) == 2


def test_down_deletes_every_node_and_the_placement_group(up, cli, clouds) -> None:
    name = up(3)["name"]
    refused = cli("down", f"{name}-1", "--yes")
    assert refused.code == 2 and f"trainvm down {name}" in refused.err and len(clouds["gcp"].vms) == 3
    r = cli("down", name, "--yes", "--json")
    assert r.code == 0 and r.json()["nodes"] == 3 and r.json()["deleted"] is True
    assert clouds["gcp"].vms == {} and clouds["gcp"].placements == set()
    assert "already gone" in cli("down", name, "--yes").out


def test_up_wait_ready_waits_for_every_node_and_verifies_the_cluster(cli, write_yaml, clouds) -> None:
    from tests.contract.harness import REPORT

    fake = clouds["gcp"]
    for i in range(3):
        fake.reports[f"ddp-run-{i}"] = {**REPORT, "driver": "550.90.07" if i == 2 else REPORT["driver"]}
    r = cli("up", str(_profile(write_yaml, nodes=3)), "--name", "ddp-run", "--yes", "--wait-ready",
            "--ready-timeout", "5", "--json")
    doc = r.json()
    assert r.code == 1 and doc["verify"]["target"] == "ddp-run" and doc["timed_out"] is False
    fields = {f["field"]: f for f in doc["verify"]["fields"]}
    assert {f"node[ddp-run-{i}].status" for i in range(3)} <= set(fields)
    assert "ddp-run-2" in str(fields["nodes.driver"]["observed"])
    again = cli(  # a re-run finds the cluster (its rank-0 node) and creates nothing
        "up", str(_profile(write_yaml, nodes=3)), "--name", "ddp-run", "--yes", "--json")
    assert again.code == 0 and again.json()["existing"] is True and again.json()["cluster"]["nodes"] == 3


def test_the_prompts_summary_names_both_prices() -> None:
    from provisioner.commands.up_summary import summary_lines

    s = {"cloud": "gcp", "instance_type": "a2-highgpu-1g", "gpu": "1x A100", "location": "us-central1-a", "spot": False,
         "price_hourly": 3.5, "nodes": 4, "cluster_price_hourly": 14.0, "failover_bound_hourly": 4.0,
         "worst_case_price_hourly": 3.9, "run_cost": 140.0, "worst_case_run_cost": 156.0,
         "lifecycle": {"idle_shutdown_minutes": None, "max_run_hours": 10}, "ssh": "open", "data_sources": []}
    lines = summary_lines(s)
    assert lines[0] == "gcp 4 nodes x a2-highgpu-1g (1x A100 each) in us-central1-a at $3.500/h per node = $14.000/h for the cluster"
    assert "the whole cluster" in lines[1] and "max_run_hours=10 -> $140.00" in lines[2]
    assert "$336.00 per 24 h" in summary_lines({**s, "lifecycle": {"idle_shutdown_minutes": None, "max_run_hours": None}})[2]
