"""The cross-node all-reduce (``verify NAME --perf`` on a cluster, perfprobe block ``allreduce_nodes``).

What is tested: the process-group arguments as pure functions (env parsing, rank arithmetic, refusal of an
incomplete or inconsistent env), the block's bookkeeping with a stand-in torch and spawn (busbw on rank 0,
"took part" elsewhere), and the command's orchestration on a FakeProvider cluster with ssh replaced by a
local runner: once running the real remote command under bash (the packed probe on stdin, a per-node
TRAINVM_ROOT with its etc/trainvm/env; no torch here, so every node fails and is named), once printing canned
TRAINVM_PERF lines per node (success, baseline comparison, one node failing, one not answering).
What is NOT modelled: NCCL, c10d rendezvous, the real fabric between nodes and any real bandwidth (the
canned figures are made up), ssh itself (keys, firewalls) and nodes started seconds apart.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import provisioner.commands.perf_nodes as pn
from provisioner.perfprobe.gpu import bus_bandwidth
from provisioner.perfprobe.nodes import allreduce_nodes_block, cluster_env, global_rank
from provisioner.perfprobe.runner import run
from provisioner.providers.base import InstanceRecord
from tests.perf.docs import doc, m

ENV = {"MASTER_ADDR": "10.0.0.2", "MASTER_PORT": "29500", "NODE_RANK": "1", "NNODES": "2", "NPROC_PER_NODE": "4",
       "WORLD_SIZE": "8"}


def test_cluster_env_parses_the_node_env() -> None:
    assert cluster_env(ENV) == {"master_addr": "10.0.0.2", "master_port": 29500, "node_rank": 1, "nnodes": 2,
                                "nproc": 4, "world": 8}
    assert cluster_env({}) is None
    assert cluster_env({**ENV, "NNODES": "1", "WORLD_SIZE": "4"}) is None


@pytest.mark.parametrize(("over", "message"), [
    ({"MASTER_ADDR": ""}, "MASTER_ADDR not set"),
    ({"NODE_RANK": None, "MASTER_PORT": None}, "MASTER_PORT, NODE_RANK not set"),
    ({"WORLD_SIZE": "6"}, "WORLD_SIZE=6 is not NNODES * NPROC_PER_NODE = 2 * 4"),
    ({"NODE_RANK": "2"}, "NODE_RANK=2 is outside 0..1"),
    ({"NPROC_PER_NODE": "four"}, "NPROC_PER_NODE='four' is not an integer"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
])
def test_cluster_env_refuses_an_incomplete_env(over: dict[str, Any], message: str) -> None:
    env = {k: v for k, v in {**ENV, **over}.items() if v is not None}
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        cluster_env(env)


def test_global_rank() -> None:
    assert [global_rank(1, 4, r) for r in range(4)] == [4, 5, 6, 7]
    assert global_rank(0, 8, 0) == 0 and global_rank(3, 8, 7) == 31
    with pytest.raises(ValueError, match="outside 0..3"):
        global_rank(1, 4, 4)


def fake_torch(gpus: int = 4) -> Any:
    return SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: True, device_count=lambda: gpus),
                           distributed=SimpleNamespace(is_nccl_available=lambda: True))


def recording_spawn(ms: list[float], calls: list[Any]) -> Any:
    def spawn(fn: Any, args: tuple[Any, ...], nprocs: int) -> None:
        calls.append((fn.__name__, args[0], nprocs))
        Path(args[-1]).write_text(json.dumps(ms))
    return spawn


def test_block_reports_busbw_on_rank_0_and_took_part_elsewhere() -> None:
    calls: list[Any] = []
    ms = [10.0, 11.0, 12.0, 11.0, 11.0]
    blk = allreduce_nodes_block(fake_torch(), 10, env={**ENV, "NODE_RANK": "0"}, spawn=recording_spawn(ms, calls))
    assert calls == [("_nodes_worker", cluster_env({**ENV, "NODE_RANK": "0"}), 4)]
    got = blk["metrics"]["allreduce_nodes_busbw_gbs"]
    assert got["median"] == pytest.approx(bus_bandwidth(256 * 2**20, 11.0, 8), rel=1e-5)
    assert got["world"] == 8 and got["nnodes"] == 2 and got["class"] == "interconnect"
    other = allreduce_nodes_block(fake_torch(), 10, env=ENV, spawn=recording_spawn(ms, calls))
    assert other["status"] == "ok" and other["metrics"] == {} and other["info"]["took_part"] is True


def test_block_refuses_before_spawning() -> None:
    calls: list[Any] = []
    spawn = recording_spawn([1.0], calls)
    bad = allreduce_nodes_block(fake_torch(), 10, env={**ENV, "MASTER_ADDR": ""}, spawn=spawn)
    assert bad["status"] == "error" and "MASTER_ADDR" in bad["reason"]
    few = allreduce_nodes_block(fake_torch(gpus=2), 10, env=ENV, spawn=spawn)
    assert few["status"] == "error" and "NPROC_PER_NODE=4 but torch sees 2" in few["reason"]
    alone = allreduce_nodes_block(fake_torch(), 10, env={}, spawn=spawn)
    assert alone["status"] == "skipped"
    assert calls == []


def test_runner_runs_the_block_only_when_asked() -> None:
    assert "allreduce_nodes" not in run(None, 1.0, ["cpu"], torch=None)["blocks"]
    blk = run(None, 1.0, ["allreduce_nodes"], torch=None)["blocks"]["allreduce_nodes"]
    assert blk["status"] == "skipped" and blk["reason"] == "torch not importable"


# ---- the command, on a FakeProvider cluster ----------------------------------------------------------------

def cluster(n: int = 3) -> Any:
    from tests.fakes import FakeProvider

    fake = FakeProvider("gcp")
    for rank in range(n):
        fake.vms[f"ddp-{rank}"] = InstanceRecord(
            name=f"ddp-{rank}", cloud="gcp", region="us-central1", zone="us-central1-a", instance_type="a2-highgpu-8g",
            state="RUNNING", profile="ddp", hash="abc", ip=f"203.0.113.{10 + rank}", cluster="ddp", rank=rank, nodes=n)
    return fake


@pytest.fixture
def on_fake(install_providers: Any) -> Any:
    fake = cluster()
    install_providers({"gcp": fake})
    return fake


def canned(rank: int, busbw: float | None = None, error: str | None = None) -> str:
    d = doc(**({"allreduce_nodes_busbw_gbs": m(busbw, "interconnect", "GB/s")} if busbw is not None else {}))
    blk = d["blocks"].pop("allreduce", None) or {"status": "ok", "reason": None, "metrics": {}, "info": {}}
    blk["info"] = {"node_rank": rank, "took_part": True}
    if error:
        blk.update(status="error", reason=error)
    d["blocks"] = {"allreduce_nodes": blk}
    return "torch says hello\nTRAINVM_PERF=" + json.dumps(d) + "\n"


def runner(answers: dict[str, Any], seen: list[list[str]]) -> Any:
    """ssh replaced: the node is the address in argv; the answer is (rc, stdout, stderr) or an exception."""
    def run_remote(argv: list[str], stdin: bytes, timeout: float) -> tuple[int, str, str]:
        seen.append(argv)
        assert stdin[:2] == b"\x1f\x8b"  # the packed probe travels on stdin
        answer = answers[argv[1].split("@")[1]]
        if isinstance(answer, BaseException):
            raise answer
        return answer
    return run_remote


def test_cluster_perf_runs_every_node_and_reports_rank_0(cli, on_fake: Any, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    seen: list[list[str]] = []
    ok = {"203.0.113.10": (0, canned(0, 180.0), ""), "203.0.113.11": (0, canned(1), ""), "203.0.113.12": (0, canned(2), "")}
    monkeypatch.setattr(pn, "run_remote", runner(ok, seen))
    r = cli("verify", "ddp", "--perf", "--json", "--budget", "20")
    assert r.code == 0, r.err
    out = r.json()
    assert out["allreduce_nodes_busbw_gbs"] == 180.0 and out["status"] == "ok" and out["metrics"] == []
    assert [n["node"] for n in out["nodes"]] == ["ddp-0", "ddp-1", "ddp-2"]
    assert sorted(a[1] for a in seen) == ["fake@203.0.113.10", "fake@203.0.113.11", "fake@203.0.113.12"]
    assert "--blocks allreduce_nodes --budget 20" in seen[0][-1]
    # a baseline with the cluster figure: compared; one without: reported only
    base = tmp_path / "ddp.perf.json"
    base.write_text(json.dumps(json.loads(canned(0, 400.0).split("=", 1)[1])))
    r = cli("verify", "ddp", "--perf", "--baseline", str(base), "--json")
    assert r.code == 1 and r.json()["metrics"][0]["verdict"] == "worse"
    base.write_text(json.dumps(doc(allreduce_busbw_gbs=m(400.0, "interconnect", "GB/s"))))
    r = cli("verify", "ddp", "--perf", "--baseline", str(base))
    assert r.code == 0 and "reported only" in r.out and "180.0 GB/s over 3 nodes" in r.out


def test_a_failing_or_silent_node_is_named(cli, on_fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    answers: dict[str, Any] = {"203.0.113.10": (0, canned(0, 180.0), ""),
                               "203.0.113.11": (255, "", "ssh: connect to host 203.0.113.11 port 22: Connection refused"),
                               "203.0.113.12": subprocess.TimeoutExpired(["ssh"], 200)}
    monkeypatch.setattr(pn, "run_remote", runner(answers, []))
    r = cli("verify", "ddp", "--perf")
    assert r.code == 3
    assert "node ddp-1 (rank 1): rc 255: ssh: connect to host 203.0.113.11 port 22: Connection refused" in r.err
    assert "node ddp-2 (rank 2): no answer within 300 s" in r.err and "ddp-0" not in r.err
    answers["203.0.113.11"] = (0, canned(1, error="RuntimeError: NCCL timeout"), "")
    answers["203.0.113.12"] = (0, canned(2), "")
    r = cli("verify", "ddp", "--perf", "--json")
    assert r.code == 3 and r.json()["status"] == "failed"
    assert "node ddp-1 (rank 1): allreduce_nodes error: RuntimeError: NCCL timeout" in r.err


def test_the_real_remote_command_under_bash(cli, on_fake: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every node's command runs here under bash with its own TRAINVM_ROOT: the probe unpacks from stdin and
    sources the node's env; no torch here, so each node reports why and the command names them all."""
    for rank in range(3):
        etc = tmp_path / f"n{rank}" / "etc" / "trainvm"
        etc.mkdir(parents=True)
        (etc / "env").write_text("".join(f"{k}={v}\n" for k, v in {**ENV, "NNODES": "3", "NODE_RANK": str(rank),
                                                                   "WORLD_SIZE": "12"}.items()))
    (tmp_path / "n2" / "etc" / "trainvm" / "env").unlink()  # node 2 never ran its cluster phase
    # the env file is root's (0600): a login user reads it with passwordless `sudo -n`, here a stand-in that reads
    # what root sees; node 1's file is out of this user's sight (moved: chmod cannot hide it when tests run as root)
    n1 = tmp_path / "n1" / "etc" / "trainvm" / "env"
    n1.rename(n1.with_suffix(".as-root"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text('#!/bin/bash\n[ "$1" = -n ] && [ "$2" = cat ] || exit 1\nexec cat "${3%/env}/env.as-root"\n')
    (bin_dir / "sudo").chmod(0o755)

    def local(argv: list[str], stdin: bytes, timeout: float) -> tuple[int, str, str]:
        rank = int(argv[1].rsplit(".", 1)[1]) - 10
        done = subprocess.run(["bash", "-c", argv[-1]], input=stdin, capture_output=True, timeout=timeout,
                              env={"PATH": f"{bin_dir}:/usr/bin:/bin", "TRAINVM_ROOT": str(tmp_path / f"n{rank}")},
                              check=False)
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    monkeypatch.setattr(pn, "run_remote", local)
    r = cli("verify", "ddp", "--perf", "--budget", "1")
    assert r.code == 3, r.err
    assert "node ddp-0 (rank 0): allreduce_nodes skipped: torch not importable" in r.err
    assert "node ddp-1 (rank 1): allreduce_nodes skipped: torch not importable" in r.err
    assert "node ddp-2 (rank 2): rc 3: no " in r.err and "etc/trainvm/env on this node" in r.err
