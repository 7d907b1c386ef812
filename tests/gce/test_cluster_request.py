"""The pure bodies of a GCE cluster (providers/gcp/cluster_request.py) and the launch spec's nodes/compact
(provision/launch.py): labels, tags, the intra-cluster firewall rule, ranks read back from names and labels, the
request preview `render` shows, and placement.compact resolved per offer as `plan` resolves it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.providers.gcp.cluster_request import (
    cluster_of,
    cluster_tag,
    internal_rule_body,
    is_internal_rule,
    node_body,
    request_preview,
)
from provisioner.providers.gcp.group import node_names
from tests.contract.clouds_fake import a2_offer, gce_offer
from tests.contract.harness import spec_maker

SPEC = replace(spec_maker("#!/bin/bash\n")(name="trainvm-ddp-0123abcd", ssh_from="203.0.113.7/32"), nodes=4, compact=True)
A2 = a2_offer("us-central1-a")


def test_node_body_carries_the_cluster_labels_and_both_tags() -> None:
    body = node_body(SPEC, A2, "projects/ubuntu-os-cloud/global/images/x", "p")
    assert body["labels"]["trainvm-cluster"] == SPEC.name and body["labels"]["trainvm-nodes"] == "4"
    assert body["tags"]["items"] == ["trainvm-ddp-0123abcd-ssh", "trainvm-ddp-0123abcd-nodes"]
    no_ssh = node_body(replace(SPEC, ssh_from=None), A2, "img", "p")
    assert no_ssh["tags"]["items"] == [cluster_tag(SPEC.name)]


def test_internal_rule_opens_every_port_between_the_nodes_only() -> None:
    rule = internal_rule_body(SPEC, "p")
    assert rule["sourceTags"] == rule["targetTags"] == [cluster_tag(SPEC.name)] and "sourceRanges" not in rule
    assert rule["allowed"] == [{"IPProtocol": "tcp", "ports": ["0-65535"]}, {"IPProtocol": "udp", "ports": ["0-65535"]},
                               {"IPProtocol": "icmp"}]
    assert is_internal_rule(rule, SPEC.name) and not is_internal_rule(rule, "trainvm-other-00000000")
    assert not is_internal_rule({**rule, "description": "someone else's"}, SPEC.name)


def test_rank_is_the_name_suffix_and_single_vms_have_none() -> None:
    labels = {"trainvm-cluster": SPEC.name, "trainvm-nodes": "4"}
    assert [cluster_of(n, labels) for n in node_names(SPEC.name, 4)] == [(SPEC.name, r, 4) for r in range(4)]
    assert cluster_of("stray", labels) == (SPEC.name, None, 4)
    assert cluster_of("stray", {**labels, "trainvm-rank": "2"}) == (SPEC.name, 2, 4)  # the rank label wins
    assert cluster_of(f"{SPEC.name}-1", {**labels, "trainvm-rank": "9"}) == (SPEC.name, 1, 4)  # out of range: the name
    assert cluster_of("vm", {"trainvm-managed": "true"}) == (None, None, 1)
    assert cluster_of(f"{SPEC.name}-0", {**labels, "trainvm-nodes": "x"})[2] == 1


def test_request_preview_in_the_order_up_sends_them() -> None:
    doc = request_preview(SPEC, A2, "family/ubuntu", "p")
    assert list(doc) == ["resourcePolicies.insert", "firewalls.insert", "instances.bulkInsert"]
    bulk = doc["instances.bulkInsert"]
    assert bulk["count"] == bulk["minCount"] == "4" and list(bulk["perInstanceProperties"]) == node_names(SPEC.name, 4)
    assert bulk["instanceProperties"]["resourcePolicies"] == ["projects/p/regions/us-central1/resourcePolicies/"
                                                              "trainvm-ddp-0123abcd-compact"]
    loose = request_preview(replace(SPEC, compact=False), A2, "family/ubuntu", "p")
    assert "resourcePolicies.insert" not in loose and "resourcePolicies" not in loose["instances.bulkInsert"]["instanceProperties"]


@pytest.mark.parametrize(("nodes", "compact", "offer", "expected"), [
    (1, None, A2, False),                          # one VM: never
    (4, None, A2, True),                           # omitted: where the family supports it (A2 does)
    (4, None, gce_offer("us-central1-a"), False),  # omitted, N1 + T4: cannot be placed compactly
    (4, False, A2, False),                         # asked off
    (4, True, A2, True),
])
def test_launch_spec_resolves_compact_per_offer(write_yaml, nodes, compact, offer, expected) -> None:
    from provisioner.profile import load_profile
    from provisioner.provision.launch import launch_spec
    from provisioner.render.script import render_for_offer

    c = "null" if compact is None else str(compact).lower()
    path = write_yaml(f"name: ddp\nextends: base/torch-2.4-cu124\nhardware: {{gpu: A100, nodes: {nodes}}}\n"
                      f"placement: {{clouds: [gcp], compact: {c}}}\n")
    loaded = load_profile(path)
    spec = launch_spec(loaded, offer, rendered=render_for_offer(loaded, offer))
    assert (spec.nodes, spec.compact) == (nodes, expected)
