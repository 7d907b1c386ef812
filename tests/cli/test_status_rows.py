"""``status --json`` rows are typed (issue 37: commands/status.py ``VmRow``/``ClusterRow``, no ``dict[str, Any]``); they
start from ``record_json``, the typed copy of ``InstanceRecord.to_json()``. These check that the copy has the same keys
in the same order, for a single VM and for a cluster's node, so the JSON ``status`` prints is the record's as before."""

from __future__ import annotations

from provisioner.commands.status import record_json, rows_of
from provisioner.providers.base import InstanceRecord

SINGLE = InstanceRecord(name="vm-a", cloud="gcp", region="us-central1", zone="us-central1-a", instance_type="g2-standard-4",
                        state="RUNNING", profile="p", hash="abc", price_hourly=0.5, created="2026-11-22T10:00:00Z")
NODES = [InstanceRecord(name=f"cl-{k}", cloud="gcp", region="us-central1", zone="us-central1-a", instance_type="a2-highgpu-1g",
                        state="TERMINATED", profile="p", hash="abc", price_hourly=1.0, cluster="cl", rank=k, nodes=2,
                        kept_hourly=0.1)
         for k in (1, 0)]


def test_record_json_is_the_records_json_key_for_key_in_order() -> None:
    for r in (SINGLE, *NODES):
        assert list(record_json(r).items()) == list(r.to_json().items())


def test_a_rows_keys_start_with_the_records_and_a_clusters_members_are_its_nodes_in_rank_order() -> None:
    cluster, single = rows_of([SINGLE, *NODES])  # sorted by cloud and name
    assert list(single)[:len(SINGLE.to_json())] == list(SINGLE.to_json())
    assert "members" not in single
    assert cluster["name"] == "cl" and cluster["nodes_found"] == 2 and cluster["price_hourly"] == 2.0
    assert [m["name"] for m in cluster["members"]] == ["cl-0", "cl-1"]
    assert cluster["stopped_hourly"] == 0.2 and cluster["billing_compute"] is False
