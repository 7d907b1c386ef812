"""``status --json`` rows are typed (issue 37: commands/status.py ``VmRow``/``ClusterRow``, no ``dict[str, Any]``); they
start from ``InstanceRecord.to_json()``, typed as ``providers.base.RecordJson``. These check that the document has the
TypedDict's keys in its order, for a single VM and for a cluster's node, and that a row starts with the record's."""

from __future__ import annotations

from provisioner.commands.status import rows_of
from provisioner.providers.base import InstanceRecord, RecordJson

SINGLE = InstanceRecord(name="vm-a", cloud="gcp", region="us-central1", zone="us-central1-a", instance_type="g2-standard-4",
                        state="RUNNING", profile="p", hash="abc", price_hourly=0.5, created="2026-11-22T10:00:00Z")
NODES = [InstanceRecord(name=f"cl-{k}", cloud="gcp", region="us-central1", zone="us-central1-a", instance_type="a2-highgpu-1g",
                        state="TERMINATED", profile="p", hash="abc", price_hourly=1.0, cluster="cl", rank=k, nodes=2,
                        kept_hourly=0.1)
         for k in (1, 0)]


def test_the_records_json_has_the_typed_keys_in_order() -> None:
    declared = list(RecordJson.__annotations__)
    # (RecordJson.__optional_keys__ does not see NotRequired under postponed annotations on Python 3.11)
    assert list(SINGLE.to_json()) == [k for k in declared if k not in ("cluster", "rank", "nodes")]
    for r in NODES:
        assert list(r.to_json()) == declared


def test_a_rows_keys_start_with_the_records_and_a_clusters_members_are_its_nodes_in_rank_order() -> None:
    cluster, single = rows_of([SINGLE, *NODES])  # sorted by cloud and name
    assert list(single)[:len(SINGLE.to_json())] == list(SINGLE.to_json())
    assert "members" not in single
    assert cluster["name"] == "cl" and cluster["nodes_found"] == 2 and cluster["price_hourly"] == 2.0
    assert [m["name"] for m in cluster["members"]] == ["cl-0", "cl-1"]
    assert cluster["stopped_hourly"] == 0.2 and cluster["billing_compute"] is False
