"""Issue 18, part 2: the rendered multi-node rendezvous under the stub harness (N = 1, 2, 16). The node
list comes from instance metadata/tags written after create (provisioner/render/cluster.py); each node
finds its rank by its own address and writes MASTER_ADDR/NODE_RANK/... into /etc/trainvm/env."""

from __future__ import annotations

import dataclasses
import gzip
import ipaddress

import pytest
import trainvm_render_support as S
import trainvm_stubharness as H

from provisioner.providers.registry import METADATA_VALUE_LIMIT
from provisioner.render.cluster import META_KEY, node_list_metadata, parse_node_list


def cluster_profile(nodes: int, *, gpu_count: int = 1, env: dict[str, str] | None = None):
    lp = S.loaded(S.GOLDEN_PROFILE)
    hw = lp.profile.hardware.model_copy(update={"nodes": nodes, "gpu_count": gpu_count})
    stack = lp.profile.stack.model_copy(update={"env": {**lp.profile.stack.env, **(env or {})}})
    return dataclasses.replace(lp, profile=lp.profile.model_copy(update={"hardware": hw, "stack": stack}))


def ips(n: int) -> list[str]:
    return [str(ipaddress.IPv4Address("10.128.0.2") + i * 37) for i in range(n)]


def meta(items: dict[str, str]) -> str:
    return ";".join(f"{k}:{v}" for k, v in items.items())


def script_for(nodes: int, cloud: str = "gcp", **kw) -> str:
    lp = S.data_native_to(cluster_profile(nodes, **kw), cloud)  # data the cloud's VM reads natively
    from provisioner.render.context import build_context
    from provisioner.render.script import _render

    return _render(build_context(lp, S.target_for(cloud, lp)))


def parts_for(nodes: int, cloud: str) -> tuple[str]:
    from provisioner.render.context import build_context
    from provisioner.render.script import _render

    lp = cluster_profile(nodes)
    return (_render(build_context(lp, S.target_for(cloud, lp))),)


def test_one_node_renders_no_cluster_block():
    text = script_for(1)
    assert "phase_cluster" not in text and META_KEY not in text and "MASTER_ADDR" not in text


@pytest.mark.parametrize(("cloud", "nodes", "rank", "limit"),
                         [("gcp", 2, 1, None), ("azure", 2, 0, None), ("aws", 16, 15, 64), ("gcp", 16, 7, None)])
def test_rendezvous_env_for_each_rank(make_harness, cloud, nodes, rank, limit):
    addrs = ips(nodes)
    items = node_list_metadata(addrs, limit or METADATA_VALUE_LIMIT[cloud])
    if limit:
        assert len(items) > 1  # the list really spans several tags
    assert parse_node_list(items) == addrs
    h = make_harness(script_for(nodes, cloud, gpu_count=1), cloud=cloud,
                     STUB_CLUSTER_META=meta(items), STUB_LOCAL_IPS=f"docker0=172.17.0.1 ens5={addrs[rank]}")
    run = h.run()
    assert run.rc == 0, run.output[-3000:]
    assert run.status == "ready" and run.report["phases"]["cluster"]["status"] == "done"
    env = H.env_file_values(h)
    want = {"MASTER_ADDR": addrs[0], "MASTER_PORT": "29500", "NODE_RANK": str(rank), "NNODES": str(nodes),
            "NPROC_PER_NODE": "1", "WORLD_SIZE": str(nodes)}
    for key, value in want.items():
        assert env[key] == value and env["TRAINVM_" + key] == value, key
    assert env["TRAINVM_NODE_IPS"] == ",".join(addrs)
    assert env["NCCL_SOCKET_IFNAME"] == "ens5" and env["NCCL_IB_DISABLE"] == "1"
    assert env["TRAINVM_HOSTFILE"] == "/etc/trainvm/hostfile"
    assert h.path("/etc/trainvm/hostfile").read_text() == "".join(f"{a} slots=1\n" for a in addrs)
    assert env["PYTHONHASHSEED"] == "0"  # the profile's own env is still there
    again = h.run()  # a second run changes nothing
    assert again.rc == 0 and again.report["phases"]["cluster"]["status"] == "verified", again.output[-2000:]
    assert H.env_file_values(h) == env


def test_world_size_counts_gpus_and_profile_env_wins(make_harness):
    addrs = ips(2)
    h = make_harness(script_for(2, gpu_count=4, env={"NCCL_SOCKET_IFNAME": "eth9"}),
                     STUB_CLUSTER_META=meta(node_list_metadata(addrs, 1000)), STUB_LOCAL_IPS=f"ens4={addrs[0]}",
                     STUB_GPU_COUNT="4")
    run = h.run()
    assert run.rc == 0, run.output[-3000:]
    env = H.env_file_values(h)
    assert (env["NODE_RANK"], env["NPROC_PER_NODE"], env["WORLD_SIZE"]) == ("0", "4", "8")
    assert env["NCCL_SOCKET_IFNAME"] == "eth9"  # stack.env overrides the detected interface
    assert h.path("/etc/trainvm/hostfile").read_text() == "".join(f"{a} slots=4\n" for a in addrs)


@pytest.mark.parametrize(("items", "local", "why"), [
    ({}, "10.128.0.2", "no complete node list"),
    ({META_KEY: "10.128.0.2"}, "10.128.0.2", "no complete node list"),  # 1 of 2 nodes listed
    ({META_KEY: "10.128.0.2,$(touch /tmp/x)"}, "10.128.0.2", "no complete node list"),  # not addresses
    ({META_KEY: "10.128.0.2,10.128.0.3"}, "10.9.9.9", "no address of this node is in the node list"),
])
def test_missing_or_bad_node_list_fails_the_cluster_phase(make_harness, items, local, why):
    h = make_harness(script_for(2), STUB_CLUSTER_META=meta(items), STUB_LOCAL_IPS=f"ens4={local}")
    run = h.run()
    assert run.rc != 0 and run.status and run.status.startswith("failed:cluster:"), run.output[-2000:]
    assert why in run.output
    assert not h.path("/etc/trainvm/cluster.env").exists()


def test_node_list_metadata_splits_whole_addresses_within_the_limit():
    addrs = ips(64)
    for limit in (256, 40, 15):
        items = node_list_metadata(addrs, limit)
        assert all(len(v) <= limit for v in items.values())
        assert parse_node_list(items) == addrs
        assert list(items)[0] == META_KEY and all(k == f"{META_KEY}-{i}" for i, k in enumerate(items) if i)
    assert len(node_list_metadata(addrs, METADATA_VALUE_LIMIT["gcp"])) == 1
    for bad in ([], ["10.0.0.1", "10.0.0.1"], ["fe80::1"], ["10.0.0.1;x"]):
        with pytest.raises(ValueError):
            node_list_metadata(bad, 256)


@pytest.mark.parametrize("cloud", ["gcp", "azure", "aws"])
def test_cluster_block_is_small(cloud):
    """The block renders only for nodes > 1 (and stays a small part of the script)."""
    one, two = ("".join(parts_for(n, cloud)).encode() for n in (1, 2))
    delta_gz = len(gzip.compress(two, 9, mtime=0)) - len(gzip.compress(one, 9, mtime=0))
    assert 0 < delta_gz < 2000, delta_gz


def test_cluster_scripts_pass_shellcheck(tmp_path):
    if not S.shellcheck_bin():
        pytest.skip("shellcheck not installed")
    paths = []
    for cloud in ("gcp", "azure", "aws"):
        p = tmp_path / f"cluster-{cloud}.sh"
        p.write_text(script_for(2, cloud))
        paths.append(p)
    assert S.shellcheck(paths) == {}
