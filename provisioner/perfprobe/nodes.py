"""The cross-node all-reduce block (``allreduce_nodes``): on a cluster node (``/etc/trainvm/env`` sourced:
``NNODES`` > 1, ``NODE_RANK``, ``NPROC_PER_NODE``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) every
local GPU joins one NCCL process group over all nodes (``init_method="env://"``, global rank
``NODE_RANK * NPROC_PER_NODE + local rank``). Global rank 0 reports NCCL-tests' busbw over the whole world
(``allreduce_nodes_busbw_gbs``); the other nodes report that they took part. Every node of the cluster must
run it at the same time (``trainvm verify NAME --perf`` starts it on all of them); it is never in the
default block list, since a node alone would wait for its peers until the timeout.

Stdlib only, like the rest of the package (see ``provisioner/perfprobe/__init__.py``).
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
import time
from typing import Any, Callable, Dict, Mapping, Optional

from provisioner.perfprobe.gpu import bus_bandwidth, gpu_unavailable, time_allreduce
from provisioner.perfprobe.stats import block, metric, skipped

KEYS = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES", "NPROC_PER_NODE", "WORLD_SIZE")


def _int(env: Mapping[str, str], key: str) -> int:
    raw = env[key].strip()
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not an integer") from None


def cluster_env(env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    """The process-group settings of this node, None when it is no cluster node (NNODES unset or 1).
    Raises ValueError (the message says which variable) when NNODES > 1 and the rest is missing or
    inconsistent."""
    if not (env.get("NNODES") or "").strip():
        return None
    nnodes = _int(env, "NNODES")
    if nnodes <= 1:
        return None
    missing = [k for k in KEYS if not (env.get(k) or "").strip()]
    if missing:
        raise ValueError(f"NNODES={nnodes} but {', '.join(missing)} not set (is /etc/trainvm/env sourced?)")
    rank, nproc, world, port = (_int(env, k) for k in ("NODE_RANK", "NPROC_PER_NODE", "WORLD_SIZE", "MASTER_PORT"))
    if nproc < 1:
        raise ValueError(f"NPROC_PER_NODE={nproc}: needs at least 1")
    if world != nnodes * nproc:
        raise ValueError(f"WORLD_SIZE={world} is not NNODES * NPROC_PER_NODE = {nnodes} * {nproc}")
    if not 0 <= rank < nnodes:
        raise ValueError(f"NODE_RANK={rank} is outside 0..{nnodes - 1}")
    if not 0 < port < 65536:
        raise ValueError(f"MASTER_PORT={port} is not a TCP port")
    return {"master_addr": env["MASTER_ADDR"].strip(), "master_port": port, "node_rank": rank, "nnodes": nnodes,
            "nproc": nproc, "world": world}


def global_rank(node_rank: int, nproc: int, local_rank: int) -> int:
    if not 0 <= local_rank < nproc:
        raise ValueError(f"local rank {local_rank} is outside 0..{nproc - 1}")
    return node_rank * nproc + local_rank


def _nodes_worker(local_rank: int, cfg: Dict[str, Any], mib: int, iters: int, timeout_s: float,
                  out_path: str) -> None:  # pragma: no cover - needs GPUs on several nodes
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = cfg["master_addr"], str(cfg["master_port"])
    rank = global_rank(cfg["node_rank"], cfg["nproc"], local_rank)
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=cfg["world"],
                            timeout=datetime.timedelta(seconds=timeout_s))
    time_allreduce(torch, dist, mib, iters, out_path if local_rank == 0 else None)


def allreduce_nodes_block(torch: Any, budget_s: float, env: Optional[Mapping[str, str]] = None, mib: int = 256,
                          iters: int = 5, spawn: Optional[Callable[..., Any]] = None) -> Dict[str, Any]:
    try:
        cfg = cluster_env(os.environ if env is None else env)
    except ValueError as exc:
        return block("error", reason=f"cluster environment: {exc}")
    if cfg is None:
        return skipped("NNODES unset or 1: not a cluster node")
    why = gpu_unavailable(torch)
    if why:
        return block("error", reason=why)
    have = int(torch.cuda.device_count())
    if have < cfg["nproc"]:
        return block("error", reason=f"NPROC_PER_NODE={cfg['nproc']} but torch sees {have} GPU(s)")
    try:
        if not torch.distributed.is_nccl_available():
            return block("error", reason="torch built without NCCL")
    except Exception as exc:  # noqa: BLE001
        return block("error", reason=f"torch.distributed unusable: {exc}")
    t0 = time.perf_counter()
    timeout_s = max(60.0, 2 * budget_s)
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "ms.json")
        (spawn or torch.multiprocessing.spawn)(_nodes_worker, args=(cfg, mib, iters, timeout_s, out_path), nprocs=cfg["nproc"])
        with open(out_path) as fh:
            ms = json.load(fh)
    nbytes = mib * 2**20
    info = {"node_rank": cfg["node_rank"], "nnodes": cfg["nnodes"], "world": cfg["world"], "took_part": True}
    if cfg["node_rank"] != 0:
        return block("ok", info=info, seconds=time.perf_counter() - t0)
    busbw = [bus_bandwidth(nbytes, m, cfg["world"]) for m in ms]
    return block("ok", metrics={"allreduce_nodes_busbw_gbs": metric(busbw, "GB/s", "interconnect", extra={
        "raw_ms": ms, "bytes": nbytes, "world": cfg["world"], "nnodes": cfg["nnodes"]})},
        info=info, seconds=time.perf_counter() - t0)
