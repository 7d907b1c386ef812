"""``verify`` for a cluster (hardware.nodes > 1): every node's stack report judged against the profile
(``compare``), and the nodes judged against each other, so that a cluster whose nodes differ fails
even where the profile leaves a value open (an unpinned cuDNN, a transitive package without a lock).

``compare_cluster(profile, reports)`` is pure: ``reports`` maps each node's name (rank order) to its
report (None: no report yet). Result states, most severe first: ``failed`` (a node's startup script
failed, or a node is missing), ``drift`` (a node differs from the profile or from the other nodes),
``provisioning`` (a node has no report yet, or is still running its script: its status row is *pending*, not
drift, and the result's message names each such node's phase), ``rehearsed`` (a node was rehearsed without a GPU:
its GPU facts not checked, never a match), ``match``. Every row
names its node: ``node[NAME].FIELD`` for a node against the profile, ``nodes.FIELD`` for a value the
nodes disagree on (expected: the value most nodes have; observed: the nodes that differ and theirs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from provisioner.agent.report import REHEARSAL
from provisioner.providers.stack_report import StackReport, validate_report
from provisioner.verify.compare import FieldResult, VerifyResult, compare_records, framework_cuda, report_cudnn
from provisioner.verify.expect import expected_record
from provisioner.verify.records import Expectation

_SEVERITY = {"failed": 4, "drift": 3, "provisioning": 2, "rehearsed": 1, "match": 0}


def identity(report: StackReport) -> dict[str, object]:
    """What must be identical on every node: driver, CUDA, cuDNN, NCCL, Python, OS, GPUs, packages,
    the container image. Missing values are compared as missing (None)."""
    doc = report.as_dict()
    fw = report.framework
    out: dict[str, object] = {
        "driver": report.driver,
        "cuda": framework_cuda(doc),
        "cuda_runtime": report.cuda_runtime,
        "cudnn": report_cudnn(doc),
        "python": report.python,
        "os": "-".join(str(x) for x in (report.os.id, report.os.version) if x) if report.os else None,
        "glibc": report.os.glibc if report.os else None,
        "framework": f"{fw.name} {fw.version}" if fw and fw.name else None,
        "gpus": ", ".join(g.name for g in report.gpus or ()) or None,
        "container": (report.container or {}).get("digest") or (report.container or {}).get("image"),
        "profile_hash": report.profile_hash,
    }
    nccl = {k: v for k, v in report.packages.items() if k.startswith("nvidia-nccl")}
    out["nccl"] = ", ".join(f"{k}=={v}" for k, v in sorted(nccl.items())) or None
    for name, version in report.packages.items():
        if name not in nccl:
            out[f"packages.{name}"] = version
    return out


def _differences(idents: Mapping[str, Mapping[str, object]]) -> list[FieldResult]:
    rows = []
    keys = sorted({k for ident in idents.values() for k in ident})
    names = list(idents)
    for key in keys:
        values = {n: idents[n].get(key) for n in names}
        counts = Counter(values.values())
        if len(counts) == 1:
            continue
        # the value most nodes have; on a tie, the first node's (rank 0)
        top = max(counts.values())
        usual = next(values[n] for n in names if counts[values[n]] == top)
        odd = {n: v for n, v in values.items() if v != usual}
        observed = "; ".join(f"{n}: {'-' if v is None else v}" for n, v in odd.items())
        rows.append(FieldResult(f"nodes.{key}", usual, observed, False))
    return rows


def compare_cluster(profile: Mapping[str, object], reports: Mapping[str, StackReport | Mapping[str, object] | None],
                    expected_nodes: int | None = None) -> VerifyResult:
    """Judge every node against ``profile`` and the nodes against each other (see the module doc)."""
    hardware = profile.get("hardware")
    nodes = hardware.get("nodes") if isinstance(hardware, Mapping) else None
    want = expected_nodes if expected_nodes is not None else int(nodes or 1) if isinstance(nodes, int | float | str) else 1
    fields: list[FieldResult] = []
    status = "match"
    failed_msgs = []
    pending_msgs: list[str] = []  # "NODE: phase P" / "NODE: no report yet", for a cluster still provisioning
    idents: dict[str, dict[str, object]] = {}
    expected: Expectation | None = None  # one typed expectation, built once, every node judged against it
    for name, raw in reports.items():
        report = raw if raw is None or isinstance(raw, StackReport) else validate_report(raw, f"the stack report of node {name}")
        expected = expected or expected_record(profile)
        result = compare_records(expected, report)
        waiting = result.describe() if result.status == "provisioning" else None  # not judged yet: never a DRIFT row
        unseen = REHEARSAL if result.status == "rehearsed" else None  # not checked: never a DRIFT row, never ready
        fields.append(FieldResult(f"node[{name}].status", "ready", result.describe() if result.status != "match" else "ready",
                                  result.status == "match", pending=waiting, not_checked=unseen))
        if waiting:
            pending_msgs.append(f"{name}: " + (f"phase {result.phase}" if result.phase else "no report yet"))
        fields += [FieldResult(f"node[{name}].{f.field}", f.expected, f.observed, f.ok, f.skipped)
                   for f in result.fields if f.drifted and f.field != "status"]
        if _SEVERITY[result.status] > _SEVERITY[status]:
            status = result.status
        if result.status == "failed":
            failed_msgs.append(f"{name}: {result.describe()}")
        if report is not None and report.state != "running":
            idents[name] = identity(report)
    if len(reports) != want:
        fields.insert(0, FieldResult("nodes.count", want, len(reports), False))
        failed_msgs.insert(0, f"{len(reports)} of {want} nodes found")
        status = "failed"
    diffs = _differences(idents) if len(idents) > 1 else []
    if diffs and _SEVERITY[status] < _SEVERITY["drift"]:
        status = "drift"
    fields += diffs
    message = "; ".join(failed_msgs if status != "provisioning" else pending_msgs) or None
    return VerifyResult(status, tuple(fields), message=message)
