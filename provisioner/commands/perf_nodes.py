"""``trainvm verify NAME --perf`` on a cluster: the cross-node all-reduce (perf probe block
``allreduce_nodes``, provisioner/perfprobe/nodes.py) started on every node at once.

Each node gets this checkout's probe package on stdin over the provider's ``ssh_argv`` (a thread per node),
unpacks it in a temporary folder, sources ``/etc/trainvm/env`` (``MASTER_ADDR``, ``NODE_RANK``, ...) and runs
the block with the trainvm venv's Python (``python3`` when there is none). Every node must print its
``TRAINVM_PERF=`` line with the block ``ok`` within ``budget * 4 + 180`` s; a node that does not (no answer,
ssh failure, the block's error) fails the command with exit 3, naming the node. Rank 0's busbw is the
cluster's figure; with ``--baseline`` it is compared with the baseline's ``allreduce_nodes_busbw_gbs``
(a baseline without that figure: reported only).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner import perfprobe  # perfprobe.bundle(): `bundle` is also a parameter name in this module
from provisioner.errors import CloudError, InputError
from provisioner.output import emit_json, stderr_console, stdout_console, styled
from provisioner.verify import perfdoc  # load_perf called through the module: tests patch perfdoc.load_perf
from provisioner.verify.parity import Verdict, any_worse, compare
from provisioner.verify.perfdoc import validate_doc

if TYPE_CHECKING:
    from provisioner.providers.base import Provider
    from provisioner.verify.perfdoc import PerfDocument

BLOCK, METRIC = "allreduce_nodes", "allreduce_nodes_busbw_gbs"
BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from provisioner.perfprobe.runner import main; main()"


class NodePerfError(CloudError):
    """A node did not answer or its block failed (exit 3)."""


@dataclass
class NodeResult:
    node: str
    rank: int
    doc: PerfDocument | None = None
    error: str | None = None

    @property
    def busbw(self) -> float | None:
        if self.doc is None:
            return None
        m = (self.doc.get("blocks", {}).get(BLOCK) or {}).get("metrics", {}).get(METRIC)
        return None if m is None else float(m["median"])

    def as_dict(self) -> dict[str, object]:
        return {"node": self.node, "rank": self.rank, "status": "failed" if self.error else "ok",
                "reason": self.error, "busbw_gbs": self.busbw}


def remote_command(budget: float) -> str:
    """The shell command each node runs; the probe package (tar.gz) arrives on stdin. Paths honour
    ``TRAINVM_ROOT`` the way the startup script does. The env file is root's (0600): the login user reads it with
    ``sudo -n`` (the clouds' login users have passwordless sudo)."""
    return ("set -e; root=\"${TRAINVM_ROOT:-}\"; d=$(mktemp -d); trap 'rm -rf \"$d\"' EXIT; tar -xz -C \"$d\"; "
            "f=\"$root/etc/trainvm/env\"; if [ -r \"$f\" ]; then env=$(cat \"$f\"); "
            "elif ! env=$(sudo -n cat \"$f\" 2>/dev/null); then echo \"no $f on this node (or not readable with sudo -n)\" >&2; exit 3; fi; "
            "set -a; eval \"$env\"; set +a; py=\"$root/opt/trainvm/venv/bin/python\"; "
            "[ -x \"$py\" ] || py=python3; "
            f"\"$py\" -c {shlex.quote(BOOT)} \"$d\" --blocks {BLOCK} --budget {budget:g} --compact")


def run_remote(argv: list[str], stdin: bytes, timeout: float) -> tuple[int, str, str]:
    """Run one node's command (replaced in tests by a local runner)."""
    done = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, check=False)
    return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


def probe_node(node: str, rank: int, argv: list[str], bundle: bytes, timeout: float) -> NodeResult:
    out = NodeResult(node, rank)
    try:
        rc, stdout, stderr = run_remote(argv, bundle, timeout)
    except subprocess.TimeoutExpired:
        out.error = f"no answer within {timeout:.0f} s"
        return out
    except OSError as exc:
        out.error = f"cannot run {argv[0]}: {exc.strerror or exc}"
        return out
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("TRAINVM_PERF=")), None)
    if rc != 0 or line is None:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        out.error = f"rc {rc}: " + (" | ".join(tail) or "no TRAINVM_PERF line")
        return out
    try:
        doc = validate_doc(json.loads(line.partition("=")[2]), f"{node}: perf result")
    except (ValueError, InputError) as exc:
        out.error = str(exc)
        return out
    blk = doc["blocks"].get(BLOCK) or {}
    if blk.get("status") != "ok":
        out.error = f"{BLOCK} {blk.get('status', 'missing')}: {blk.get('reason')}"
    elif rank == 0 and METRIC not in blk.get("metrics", {}):
        out.error = f"rank 0 reported no {METRIC}"
    out.doc = doc
    return out


def verify_cluster_perf(cluster: str, provider: Provider, baseline: Path | None, json_out: bool, budget: float) -> int:
    base = None
    if baseline is not None:
        from provisioner.commands.perf import baseline_path  # lazy: cycle (commands/perf.py imports this module)

        base = perfdoc.load_perf(baseline if baseline.suffix == ".json" else baseline_path(baseline))
    nodes = provider.cluster_nodes(cluster)
    expected = max((n.nodes or 0 for n in nodes), default=0)
    if not nodes or len(nodes) < expected:
        raise NodePerfError(f"{cluster}: {len(nodes)} of {expected} nodes found; the all-reduce needs all of them",
                            hint=f"`trainvm status {cluster}` shows the nodes")
    no_ip = [n.name for n in nodes if not n.ip]
    if no_ip:
        raise NodePerfError(f"{cluster}: node {', '.join(no_ip)} has no address (stopped or starting?)")
    packed, cmd, timeout = perfprobe.bundle(), remote_command(budget), budget * 4 + 180
    if not json_out:
        stderr_console().print(f"running the all-reduce on {len(nodes)} nodes of {cluster} (up to {timeout:.0f} s)")
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futures = [pool.submit(probe_node, n.name, n.rank or 0, provider.ssh_argv(n, [cmd]), packed, timeout)
                   for n in nodes]
        results = [f.result() for f in futures]
    failed = [r for r in results if r.error]
    figure = None if failed else results[0].busbw
    verdicts: list[Verdict] = []
    note = None
    if base is not None and figure is not None and results[0].doc is not None:
        verdicts = [v for v in compare(base, results[0].doc) if v.metric == METRIC]
        if not verdicts or verdicts[0].verdict == "missing":
            verdicts, note = [], f"the baseline has no {METRIC}; reported only"
    if json_out:
        emit_json({"name": cluster, "status": "failed" if failed else "ok", METRIC: figure,
                   "nodes": [r.as_dict() for r in results], "metrics": [v.as_dict() for v in verdicts], "note": note})
    else:
        _print(cluster, results, figure, verdicts, note)
    if failed:
        message = "; ".join(f"node {r.node} (rank {r.rank}): {r.error}" for r in failed)
        if json_out:  # one JSON document on stdout (it carries every node's reason); the summary on stderr
            stderr_console().print(f"error: {message}", markup=False)
            return NodePerfError.exit_code
        raise NodePerfError(message, hint=f"`trainvm ssh {cluster} --node K` and run the probe there by hand; NCCL and c10d "
                                          "need all TCP open between the nodes")
    return 1 if any_worse(verdicts) else 0


def _print(cluster: str, results: list[NodeResult], figure: float | None, verdicts: list[Verdict], note: str | None) -> None:
    from rich.table import Table

    out = stdout_console()
    table = Table(show_edge=False, pad_edge=False)
    for col in ("node", "rank", "status", "busbw GB/s"):
        table.add_column(col, justify="right" if col in ("rank", "busbw GB/s") else "left")
    for r in results:
        status = styled((f"failed: {r.error}", "red")) if r.error else "took part"
        table.add_row(r.node, str(r.rank), status, "-" if r.busbw is None else f"{r.busbw:,.1f}")
    out.print(table)
    if figure is not None:
        out.print(f"{cluster}: cross-node all-reduce busbw {figure:,.1f} GB/s over {len(results)} nodes")
    for v in verdicts:
        out.print(f"  baseline {v.a:,.1f} GB/s, this cluster {v.b:,.1f} GB/s: {v.verdict} (tolerance ±{v.tolerance:.0%})")
    if note:
        out.print(f"  {note}")
