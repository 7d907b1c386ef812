"""Issue 18, part 1 through the CLI: `plan` prices N nodes, rules out non-compact families when compact
placement is asked, and shows the fabric and whether the OS image can use it; `up` uses only clouds whose
provider creates clusters."""

from __future__ import annotations

import pytest


def _profile(write_yaml, gpu: str, *, nodes: int, compact: str = "null", clouds: str = "[gcp]", count: int = 1,
             hours: int = 10):
    return write_yaml(f"name: ddp\nextends: base/torch-2.4-cu124\nhardware: {{gpu: {gpu}, gpu_count: {count}, nodes: {nodes}}}\n"
                      f"placement: {{clouds: {clouds}, compact: {compact}}}\nlifecycle: {{max_run_hours: {hours}}}\n")


def test_one_node_has_no_cluster_and_same_prices(cli, write_yaml) -> None:
    doc = cli("plan", str(_profile(write_yaml, "T4", nodes=1)), "--json").json()
    assert doc["cluster"] is None
    est = doc["estimate"]
    assert est["nodes"] == 1 and est["cluster_price_hourly"] == est["price_hourly"]
    # a run costs the running price (compute + disks), not the compute price alone
    assert est["running_hourly"] > est["price_hourly"]
    assert est["per_run"] == round(est["running_hourly"] * 10, 2)


def test_n_nodes_price_the_cluster(cli, write_yaml) -> None:
    one = cli("plan", str(_profile(write_yaml, "T4", nodes=1)), "--json").json()
    doc = cli("plan", str(_profile(write_yaml, "T4", nodes=16)), "--json").json()
    assert doc["chosen"] == one["chosen"]  # compact not asked: the same cheapest N1 offer
    c = doc["cluster"]
    assert c["nodes"] == 16 and c["price_hourly_per_node"] == one["estimate"]["price_hourly"]
    assert c["price_hourly"] == pytest.approx(16 * c["price_hourly_per_node"])
    assert c["running_hourly"] == pytest.approx(16 * c["running_hourly_per_node"])
    assert c["stopped_hourly"] == pytest.approx(16 * c["stopped_hourly_per_node"]) and c["stopped_hourly"] > 0
    assert doc["estimate"]["per_run"] == round(16 * c["running_hourly_per_node"] * 10, 2) == c["per_run"]
    assert c["compact"] is False and c["placement"]["compact_supported"] is False  # N1 cannot; not asked
    assert doc["request"]["nodes"] == 16 and doc["request"]["compact_required"] is False


def test_compact_true_rules_out_n1_t4(cli, write_yaml) -> None:
    r = cli("plan", str(_profile(write_yaml, "T4", nodes=4, compact="true")), "--json")
    doc = r.json()
    assert r.code == 1 and doc["chosen"] is None
    assert doc["rejected"]["gcp"]["placement"] > 0
    assert any(s["relax"] == ["placement"] and "placement.compact: false" in s["change"] for s in doc["suggestions"])
    text = cli("plan", str(_profile(write_yaml, "T4", nodes=4, compact="true")))
    assert text.code == 1 and "placement" in text.out and "cannot be placed compactly" in text.out  # the answer, on stdout


def test_compact_true_keeps_l4_and_compact_false_is_honoured(cli, write_yaml) -> None:
    doc = cli("plan", str(_profile(write_yaml, "L4", nodes=4, compact="true")), "--json").json()
    assert doc["chosen"]["instance_type"].startswith("g2-") and doc["cluster"]["compact"] is True
    off = cli("plan", str(_profile(write_yaml, "L4", nodes=4, compact="false")), "--json").json()
    assert off["cluster"]["compact"] is False and off["cluster"]["placement"]["compact_supported"] is True


def test_text_shows_cluster_cost_placement_and_fabric(cli, write_yaml) -> None:
    r = cli("plan", str(_profile(write_yaml, "H100", nodes=2, count=8)))
    assert r.code == 0, r.err
    assert "x2 nodes" in r.out and "(2 nodes x $" in r.out and "$/h per node" in r.out
    assert "placement: 2 identical nodes, compact: a compact resourcePolicies group placement policy" in r.out
    assert "fabric: GPUDirect-TCP" in r.out and "NCCL uses TCP sockets" in r.out and "ubuntu-22.04" in r.out


def test_up_of_a_cluster_never_picks_a_cloud_without_a_group_engine(cli, write_yaml, clouds, monkeypatch) -> None:
    """Before a cloud's provider creates clusters (registry group_engine), `up` does not touch it: the plan
    rejects its offers (reason `cluster`), so nothing is created anywhere."""
    from provisioner.providers import registry

    monkeypatch.setattr(registry, "cluster_clouds", lambda: ())
    monkeypatch.setattr("provisioner.planner.checker.cluster_clouds", lambda: ())  # the request state (planner/checker.py)
    r = cli("up", str(_profile(write_yaml, "T4", nodes=2)), "--yes")
    assert r.code != 0 and "cluster" in r.err
    assert all(not fake.vms for fake in clouds.values())
    assert all(call[0] != "create" for fake in clouds.values() for call in fake.calls)
