"""``probe --perf``, ``parity``, ``capture --perf`` and ``verify --local --perf``.

The probe runs in the profile's interpreter (``--python``; default: the one running trainvm) as
``python -c 'from provisioner.perfprobe.runner import main; main()'`` with this checkout's
directory first on ``sys.path``; it prints one ``TRAINVM_PERF=`` line. The perf baseline of a
profile ``NAME.yaml`` lives beside it as ``NAME.perf.json`` (``capture --perf`` writes it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

from provisioner.commands.clouds import check_name, locate_one, providers_for
from provisioner.commands.perf_nodes import verify_cluster_perf
from provisioner.commands.verify import not_found
from provisioner.errors import InputError, TrainvmError
from provisioner.output import check_output_file, emit_json, stderr_console, stdout_console, styled, write_output
from provisioner.probe import report as probe_report  # called through the module: tests patch probe_report.probe
from provisioner.verify import perfdoc  # load_perf called through the module: tests patch perfdoc.load_perf
from provisioner.verify.parity import Verdict, any_worse, compare, host_of
from provisioner.verify.perfdoc import validate_doc
from provisioner.verify.perfspec import annotate

if TYPE_CHECKING:
    from provisioner.perfprobe.context import DataFs
    from provisioner.verify.perfdoc import PerfDocument

ROOT = Path(__file__).resolve().parents[2]  # the directory holding the provisioner package
BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from provisioner.perfprobe.runner import main; main()"


class ProbeError(TrainvmError):
    exit_code = 1


def baseline_path(profile: Path) -> Path:
    """``profiles/ws.yaml`` -> ``profiles/ws.perf.json``."""
    return profile.with_name(profile.stem + ".perf.json")


def run_perf_probe(python: str | None, data: str | None, budget: float, blocks: list[str] | None = None) -> PerfDocument:
    exe = python or sys.executable
    if python is not None and not Path(python).exists():
        raise InputError(f"--python: {python} does not exist")
    if data is not None and not Path(data).exists():
        raise InputError(f"--data: {data} does not exist")
    argv = [exe, "-c", BOOT, str(ROOT), "--budget", str(budget)]
    if data:
        argv += ["--data", data]
    if blocks:
        argv += ["--blocks", ",".join(blocks)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=budget * 4 + 120, check=False)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"the perf probe ran past {budget * 4 + 120:.0f} s and was stopped") from None
    except OSError as exc:
        raise InputError(f"cannot run {exe}: {exc.strerror or exc}") from None
    line = next((ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("TRAINVM_PERF=")), None)
    if done.returncode != 0 or line is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ProbeError(f"the perf probe failed under {exe} (rc {done.returncode}): " + " | ".join(tail))
    return annotate(validate_doc(json.loads(line.partition("=")[2]), f"perf probe under {exe}"))


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"


def print_perf(doc: PerfDocument) -> None:
    out = stdout_console()
    ctx = doc["context"]
    host = host_of(doc)
    fs = host.get("data_fs") or cast("DataFs", {})
    out.print(f"perf probe ({doc['schema']}), python {doc['python'].get('version')} at {str(doc['python'].get('executable'))}, "
              f"{doc['elapsed_s']} s of a {doc['budget_s']:g} s budget")
    out.print(f"  CPUs {host.get('cpu_count')} (affinity {host.get('affinity')}, cgroup quota {host.get('cgroup_cpu_quota') or 'none'}), "
              f"governor {','.join(host.get('governors') or []) or 'n/a'}, /dev/shm {host.get('shm_gib')} GiB, "
              f"thread env {host.get('thread_env') or 'none'}")
    out.print(f"  data path {str(fs.get('path'))}: {fs.get('fstype')} at {str(fs.get('mount_point'))}"
              f"{' (network)' if fs.get('network') else ''}")
    for key, part in (("gpu", ctx.get("gpu")), ("torch", ctx.get("torch")), ("blas", ctx.get("blas"))):
        if part and part.get("status") == "skipped":
            out.print(f"  {key}: skipped: {str(part.get('reason'))}")
    for g in (ctx.get("gpu") or {}).get("gpus") or []:
        out.print(f"  GPU {g['index']} {g['name']}: SM {g.get('sm_clock_mhz')}/{g.get('sm_clock_max_mhz')} MHz, "
                  f"power limit {g.get('power_limit_w')} W (default {g.get('power_default_limit_w')}), "
                  f"PCIe gen {g.get('pcie_gen')}/{g.get('pcie_gen_max')} x{g.get('pcie_width')}/x{g.get('pcie_width_max')}, "
                  f"throttle {g.get('throttle_reasons')}, ECC {g.get('ecc')}, MIG {g.get('mig')}, persistence {g.get('persistence')}")
    for lib in (ctx.get("blas") or {}).get("libraries") or []:
        out.print(f"  {lib.get('user_api')}: {lib.get('internal_api')} {lib.get('version')}, {lib.get('num_threads')} threads")
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    for col in ("block", "metric", "median", "unit", "cv", "n", "note"):
        table.add_column(col, justify="right" if col in ("median", "cv", "n") else "left")
    for name, blk in doc["blocks"].items():
        if blk["status"] != "ok":
            table.add_row(name, styled((f"{blk['status']}: {blk.get('reason')}", "dim")), "", "", "", "", "")
            continue
        for m, v in blk["metrics"].items():
            note = []
            eff, spec = v.get("efficiency"), v.get("spec")
            if eff is not None and spec is not None:  # perfspec.annotate adds both
                note.append(f"{eff:.0%} of {spec['figure']:g} ({spec['variant']})")
            for k, detail in (("tool", v.get("tool")), ("workers", v.get("workers")), ("threads", v.get("threads")),
                              ("processes", v.get("processes"))):
                if detail is not None:
                    note.append(f"{k} {detail}")
            table.add_row(name, m, _fmt(v["median"]), v["unit"], f"{v['cv']:.1%}", str(len(v["repeats"])), ", ".join(note))
    out.print(table)
    for name, blk in doc["blocks"].items():
        info = blk.get("info") or {}
        notes = dict(info.get("notes") or {})
        if isinstance(info.get("blas"), str):
            notes["blas"] = info["blas"]
        if isinstance(info.get("data"), str):
            notes["data"] = info["data"]
        for key, text in notes.items():
            out.print(f"  {name} {key}: {text}")


def run_probe(*, perf: bool, python: str | None, data: str | None, json_out: bool, out: Path | None, budget: float) -> int:
    """The stack report (JSON on stdout) or, with ``perf``, the perf document; ``out`` gets the same JSON too
    (checked before probing, so a folder or a missing parent costs no probe run)."""
    if out is not None:
        check_output_file(out, "-o")
    if not perf:
        report = probe_report.probe(python=python, data_path=data or ".")
        if out is not None:
            write_output(out, json.dumps(report, indent=2, default=str) + "\n", "-o")
            stderr_console().print(f"wrote {str(out)}")
        emit_json(report)
        return 0
    doc = run_perf_probe(python, data, budget)
    if out is not None:
        write_output(out, json.dumps(doc, indent=2) + "\n", "-o")
        stderr_console().print(f"wrote {str(out)}")
    if json_out:
        emit_json(doc)
    else:
        print_perf(doc)
    return 0


def print_parity(label_a: str, label_b: str, verdicts: list[Verdict], json_out: bool) -> None:
    if json_out:
        emit_json({"a": label_a, "b": label_b, "worse": any_worse(verdicts), "metrics": [v.as_dict() for v in verdicts]})
        return
    from rich.table import Table

    out = stdout_console()
    table = Table(show_edge=False, pad_edge=False, title=f"A = {label_a}   B = {label_b}")
    for col in ("metric", "A", "B", "B/A", "tol", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    style = {"worse": "red", "better": "green", "match": "", "missing": "dim", "not-comparable": "yellow"}
    for v in verdicts:
        ratio = "-" if v.ratio is None else f"{v.ratio:.2f}" + (" eff" if v.basis == "efficiency" else "")
        s = style[v.verdict]
        table.add_row(v.metric, _fmt(v.a), _fmt(v.b), ratio, f"±{v.tolerance:.0%}", styled((v.verdict, s)))
    out.print(table)
    for v in verdicts:
        if v.note and v.verdict != "missing":
            out.print(f"  {v.metric}: {v.note}")
        for c in v.causes:
            out.print(styled("  ", (v.metric, "red"), f": likely cause: {c.cause}"))
            if c.fix:
                out.print(f"      fix: {c.fix}")
    out.print("B is slower than A" if any_worse(verdicts) else "no metric is worse on B")


def run_parity(a: Path, b: Path, json_out: bool) -> int:
    verdicts = compare(perfdoc.load_perf(a), perfdoc.load_perf(b))
    print_parity(str(a), str(b), verdicts, json_out)
    return 1 if any_worse(verdicts) else 0


def capture_baseline(profile_out: Path | None, python: str | None, data: str | None, budget: float) -> Path:
    if profile_out is None:
        raise InputError("capture --perf: also give -o PROFILE.yaml; the perf baseline is written beside it as PROFILE.perf.json")
    doc = run_perf_probe(python, data, budget)
    path = baseline_path(profile_out)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    stderr_console().print(f"wrote perf baseline {str(path)}")
    return path


def verify_local_perf(profile: Path, python: str | None, data: str | None, json_out: bool, budget: float) -> int:
    base = baseline_path(profile)
    if not base.exists():
        raise InputError(f"verify --perf: no perf baseline {base} (record one with `trainvm capture --perf -o {profile}` "
                         f"or `trainvm probe --perf -o {base}`)")
    verdicts = compare(perfdoc.load_perf(base), run_perf_probe(python, data, budget))
    print_parity(str(base), "this machine", verdicts, json_out)
    return 1 if any_worse(verdicts) else 0


def verify_perf(target: str, *, local: bool, python: str | None, data: str | None, json_out: bool, budget: float,
                baseline: Path | None = None, cloud: str | None = None) -> int:
    if local:
        return verify_local_perf(Path(target), python, data, json_out, budget)
    return verify_vm_perf(target, baseline, json_out, cloud, budget)


def verify_vm_perf(name: str, baseline: Path | None, json_out: bool, cloud: str | None = None, budget: float = 30.0) -> int:
    """The perf result the VM's startup script put in report.json (profile ``perf:``) against
    ``--baseline`` (a PROFILE.yaml, meaning PROFILE.perf.json beside it, or a perf JSON). A cluster runs
    the cross-node all-reduce on every node instead (provisioner/commands/perf_nodes.py)."""
    located = locate_one(check_name(name), providers_for(cloud), "verify --perf")
    if located is None:
        raise not_found(name, cloud)
    record, provider = located
    if record.cluster:
        return verify_cluster_perf(record.cluster, provider, baseline, json_out, budget)
    if baseline is None:
        raise InputError(f"verify {name} --perf: give --baseline PROFILE.yaml (its PROFILE.perf.json) or a perf result "
                         "(JSON) to compare the VM with")
    base = perfdoc.load_perf(baseline if baseline.suffix == ".json" else baseline_path(baseline))
    report, _profile = provider.read_report(name)
    perf = report.perf if report is not None else None
    if perf is None:
        state = "no report yet (still provisioning?)" if report is None else "a report without a perf result"
        raise ProbeError(f"{name}: {state}; the profile needs `perf:` and the probe runs after every phase "
                         "(see /var/log/trainvm/perf.log on the VM)")
    verdicts = compare(base, annotate(validate_doc(perf, f"{name}: report.json perf")))
    print_parity(str(baseline), name, verdicts, json_out)
    return 1 if any_worse(verdicts) else 0
