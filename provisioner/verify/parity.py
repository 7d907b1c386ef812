"""``trainvm parity A B``: per-metric verdicts between two perf documents and, for every "worse",
the likely cause read from B's block 0 (context) and the profile change that addresses it.

Pure functions on the documents ``provisioner.perfprobe`` writes (A = the reference, usually the
workstation; B = the machine under test, usually the VM).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, cast

from provisioner.perfprobe.context import DataFs, GpuState, HostContext
from provisioner.verify.perfspec import METRIC_SPEC, GpuPerfSpec, efficiency, gpu_name, load_specs

# Run-to-run tolerance per metric class (relative). The verdict's tolerance is
# max(this, 3 x the larger coefficient of variation of the two measurements).
if TYPE_CHECKING:
    from provisioner.verify.perfdoc import MetricDoc, PerfContext, PerfDocument

CLASS_TOLERANCE = {"gpu_compute": 0.07, "gpu_memory": 0.07, "host_device": 0.10, "interconnect": 0.10,
                   "disk": 0.20, "loader": 0.15, "cpu": 0.10, "blas": 0.15}


@dataclass(frozen=True)
class Cause:
    cause: str
    fix: str | None


@dataclass(frozen=True)
class Verdict:
    metric: str
    klass: str
    unit: str
    a: float | None
    b: float | None
    ratio: float | None  # b / a (of efficiency when the GPU models differ)
    tolerance: float
    verdict: str  # match | worse | better | missing | not-comparable
    basis: str = "median"  # median | efficiency
    note: str | None = None
    causes: tuple[Cause, ...] = field(default=())

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["class"] = d.pop("klass")
        return d


def metrics_of(doc: PerfDocument) -> dict[str, MetricDoc]:
    out: dict[str, MetricDoc] = {}
    for block in (doc.get("blocks") or {}).values():
        if block.get("status") == "ok":
            out.update(block.get("metrics") or {})
    return out


def tolerance(klass: str, cv_a: float, cv_b: float) -> float:
    return max(CLASS_TOLERANCE.get(klass, 0.10), 3 * max(cv_a, cv_b))


def judge(a: float, b: float, tol: float, higher_is_better: bool = True) -> tuple[str, float]:
    """("match" | "worse" | "better", b/a). The band is a factor, the same both ways: B is worse when it is more than
    ``1 + tol`` times slower than A, better when more than ``1 + tol`` times faster. (A band of +-tol on b/a - 1
    could not say "worse" of a higher-is-better metric once a noisy run made tol >= 1: a machine 100x slower was a
    match, seen on a loaded CI machine.)"""
    if a <= 0:
        return ("match" if b <= 0 else "better"), float("inf")
    ratio = b / a
    gain = ratio if higher_is_better else (1 / ratio if ratio > 0 else float("inf"))
    if gain < 1 / (1 + tol):
        return "worse", ratio
    if gain > 1 + tol:
        return "better", ratio
    return "match", ratio


# ---------------------------------------------------------------------------------------------
# Block 0 readers


def _ctx(doc: PerfDocument) -> PerfContext:
    return doc.get("context") or {}


# The context is read through the producer's own TypedDicts (perfprobe/context.py, via verify/perfdoc.py): a key
# renamed on either side fails mypy, and tests/perf/test_context_to_parity.py runs the producer into these rules.
def host_of(doc: PerfDocument) -> HostContext:
    """``context.host``; {} (read with ``.get``) when the document has none."""
    return _ctx(doc).get("host") or cast(HostContext, {})


def _gpus(doc: PerfDocument, loaded: bool = False) -> list[GpuState]:
    ctx = _ctx(doc)
    under_load = (((doc.get("blocks") or {}).get("gpu_matmul") or {}).get("info") or {}).get("context_under_load") or {}
    if loaded and under_load.get("gpus"):
        return under_load["gpus"]
    return (ctx.get("gpu") or {}).get("gpus") or []


def usable_cpus(doc: PerfDocument) -> float | None:
    host = host_of(doc)
    cpus = host.get("affinity") or host.get("cpu_count")
    quota = host.get("cgroup_cpu_quota")
    if cpus and quota:
        return min(float(cpus), float(quota))
    return float(cpus) if cpus else None


def _threads(doc: PerfDocument) -> dict[str, str]:
    return host_of(doc).get("thread_env") or {}


def blas_vendor(doc: PerfDocument) -> str | None:
    libs = (_ctx(doc).get("blas") or {}).get("libraries") or []
    for lib in libs:
        if lib.get("user_api") == "blas":
            return lib.get("internal_api")
    return None


def gpu_causes(a: PerfDocument, b: PerfDocument) -> list[Cause]:
    out: list[Cause] = []
    for g in _gpus(b, loaded=True):
        reasons = set(g.get("throttle_reasons") or ())
        idx = f"GPU {g.get('index', 0)}"
        if reasons & {"sw_power_cap", "hw_power_brake_slowdown"}:
            out.append(Cause(f"{idx} is power-capped (throttle reasons: {', '.join(sorted(reasons))})",
                             "the instance caps GPU power: choose another offer (placement.regions or hardware.gpu); "
                             "on your own machine reset the limit with `nvidia-smi -pl`"))
        if reasons & {"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"}:
            out.append(Cause(f"{idx} is thermally throttled ({', '.join(sorted(reasons))}, {g.get('temperature_c')} C)",
                             "a host problem of this VM: recreate it (`trainvm down` + `up`) or choose another region"))
        limit, default = g.get("power_limit_w"), g.get("power_default_limit_w")
        if limit and default and limit < 0.95 * default and not reasons & {"sw_power_cap"}:
            out.append(Cause(f"{idx} power limit {limit:.0f} W is below its default {default:.0f} W",
                             "choose an offer without a lowered power limit (placement.regions or hardware.gpu)"))
        clock, top = g.get("sm_clock_mhz"), g.get("sm_clock_max_mhz")
        if clock and top and clock < 0.85 * top and "gpu_idle" not in reasons:
            out.append(Cause(f"{idx} SM clock {clock} MHz under load, max {top} MHz (clocks not at boost)",
                             "application clocks or a clock lock are set on the VM: `nvidia-smi -rgc -rac` in a startup step"))
        if g.get("mig"):
            out.append(Cause(f"{idx} is in MIG mode (a slice of the GPU)", "choose an offer with whole GPUs (hardware.gpu)"))
    return out


def pcie_causes(a: PerfDocument, b: PerfDocument) -> list[Cause]:
    out: list[Cause] = []
    a_width = max((g.get("pcie_width") or 0 for g in _gpus(a)), default=0)
    for g in _gpus(b, loaded=True):
        width, wmax = g.get("pcie_width"), g.get("pcie_width_max")
        gen, gmax = g.get("pcie_gen"), g.get("pcie_gen_max")
        idx = f"GPU {g.get('index', 0)}"
        if width and ((wmax and width < wmax) or (a_width and width < a_width)):
            out.append(Cause(f"{idx} PCIe link x{width} (max x{wmax or '?'}, reference x{a_width or '?'})",
                             "the machine type wires the GPU with fewer lanes: choose another offer (hardware.gpu or a "
                             "different machine family); nothing in the guest widens the link"))
        if gen and gmax and gen < gmax:
            out.append(Cause(f"{idx} PCIe gen {gen} under load (max gen {gmax})",
                             "the link trained below its maximum: recreate the VM or choose another offer"))
    return out


def thread_causes(a: PerfDocument, b: PerfDocument) -> list[Cause]:
    out: list[Cause] = []
    ta, tb = _threads(a), _threads(b)
    cpus = usable_cpus(b)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        vb = tb.get(var)
        if vb is None or not vb.strip().isdigit():
            continue
        va = ta.get(var)
        if (va is None and cpus and int(vb) < cpus) or (va and va.isdigit() and int(vb) < int(va)):
            want = va or str(int(cpus or 1))
            out.append(Cause(f"{var}={vb} set in the environment (reference: {va or 'unset'}, {cpus or '?'} usable CPUs)",
                             f"set `stack.env: {{{var}: \"{want}\"}}` in the profile (or unset it in the launcher)"))
    return out


def blas_causes(a: PerfDocument, b: PerfDocument) -> list[Cause]:
    va, vb = blas_vendor(a), blas_vendor(b)
    if va and vb and va != vb:
        return [Cause(f"BLAS is {vb} here, {va} on the reference",
                      f"pin a numpy/torch build that uses {va} in stack.packages (e.g. the same wheel or conda build)")]
    return []


def cpu_causes(a: PerfDocument, b: PerfDocument) -> list[Cause]:
    out: list[Cause] = []
    hb = host_of(b)
    quota, cpus = hb.get("cgroup_cpu_quota"), hb.get("affinity") or hb.get("cpu_count")
    if quota and cpus and quota < cpus:
        out.append(Cause(f"cgroup CPU quota of {quota} CPUs on {cpus} visible CPUs",
                         "raise the container's CPU limit (docker --cpus / Kubernetes limits) or run outside it"))
    ua, ub = usable_cpus(a), usable_cpus(b)
    if ua and ub and ub < ua:
        out.append(Cause(f"{ub:g} usable CPUs here, {ua:g} on the reference", f"set `hardware.min_vcpus: {int(ua)}` in the profile"))
    govs = hb.get("governors") or []
    if "powersave" in govs:
        out.append(Cause("CPU frequency governor is powersave", "set the governor to performance (cpupower frequency-set -g performance)"))
    return out


def storage_causes(a: PerfDocument, b: PerfDocument) -> list[Cause]:
    fs = host_of(b).get("data_fs") or cast(DataFs, {})
    if fs.get("network"):
        return [Cause(f"the data path {fs.get('path')} is on a network file system ({fs.get('fstype')} at {fs.get('mount_point')})",
                      "stage the data to local disk: `data: [{source: ..., dest: /mnt/data/...}]` with "
                      "`hardware.local_nvme_gib` so dest is on local NVMe")]
    return []


def loader_causes(a: PerfDocument, b: PerfDocument, metric: str) -> list[Cause]:
    out = storage_causes(a, b) if "_data_" in metric else []
    if metric.endswith("_w0_items_s"):
        out.append(Cause("num_workers=0: decoding and augmenting run in the training process, one item at a time",
                         "use DataLoader(num_workers=N) in the training code, with N up to the usable CPUs"))
    else:
        ua, ub = usable_cpus(a), usable_cpus(b)
        if ua and ub and ub < ua:
            out.append(Cause(f"too few vCPUs for loader workers: {ub:g} here, {ua:g} on the reference",
                             f"set `hardware.min_vcpus: {int(ua)}` in the profile"))
        shm = host_of(b).get("shm_gib")
        if shm is not None and shm < 1:
            out.append(Cause(f"/dev/shm is {shm} GiB: worker batches pass through shared memory",
                             "enlarge /dev/shm (docker --shm-size, or a tmpfs mount)"))
    out += cpu_causes(a, b)[:1] if not out else []
    return out


def causes_for(metric: str, klass: str, a: PerfDocument, b: PerfDocument) -> list[Cause]:
    if klass in ("gpu_compute", "gpu_memory"):
        found = gpu_causes(a, b)
    elif klass == "host_device":
        found = pcie_causes(a, b) + gpu_causes(a, b)
    elif klass == "interconnect":
        found = pcie_causes(a, b)
    elif klass == "disk":
        found = storage_causes(a, b) if "_data_" in metric else []
    elif klass == "loader":
        found = loader_causes(a, b, metric)
    elif klass == "blas":
        found = thread_causes(a, b) + blas_causes(a, b) + cpu_causes(a, b)
    else:  # cpu
        found = thread_causes(a, b) + cpu_causes(a, b) if "all" in metric or "scaling" in metric else cpu_causes(a, b)
    return found or [Cause("no cause found in the context (block 0): a slower part of the same kind, or a noisy neighbour", None)]


# ---------------------------------------------------------------------------------------------


def compare(a: PerfDocument, b: PerfDocument, table: dict[str, tuple[GpuPerfSpec, ...]] | None = None) -> list[Verdict]:
    """Every metric of A and B, judged (A is the reference)."""
    table = load_specs() if table is None else table
    ma, mb = metrics_of(a), metrics_of(b)
    name_a, name_b = gpu_name(a)[0], gpu_name(b)[0]
    models_differ = bool(name_a and name_b and name_a != name_b)
    out: list[Verdict] = []
    for metric in sorted(set(ma) | set(mb)):
        ra, rb = ma.get(metric), mb.get(metric)
        ref = ma[metric] if ra is not None else mb[metric]  # the metric is in ma or mb
        klass, unit = ref["class"], ref["unit"]
        if ra is None or rb is None:
            where = "A" if ra is None else "B"
            out.append(Verdict(metric, klass, unit, ra["median"] if ra else None, rb["median"] if rb else None, None,
                               CLASS_TOLERANCE.get(klass, 0.1), "missing", note=f"not measured on {where}"))
            continue
        tol = tolerance(klass, ra.get("cv", 0), rb.get("cv", 0))
        if models_differ and klass in ("gpu_compute", "gpu_memory", "host_device", "interconnect"):
            if metric not in METRIC_SPEC:
                out.append(Verdict(metric, klass, unit, ra["median"], rb["median"], None, tol, "not-comparable",
                                   note=f"GPU models differ ({name_a} vs {name_b}) and this figure has no spec to normalise by"))
                continue
            ea, eb = efficiency(a, metric, table), efficiency(b, metric, table)
            if ea is None or eb is None:
                missing = name_a if ea is None else name_b
                out.append(Verdict(metric, klass, unit, ra["median"], rb["median"], None, tol, "not-comparable",
                                   note=f"GPU models differ and {missing} has no published figure for this metric"))
                continue
            verdict, ratio = judge(ea[0], eb[0], tol)
            key = METRIC_SPEC[metric]
            expected = (eb[1].figure(key) or 0) / (ea[1].figure(key) or 1)
            note: str | None = (f"GPU models differ ({ea[1].variant} vs {eb[1].variant}): efficiency {ea[0]:.0%} vs {eb[0]:.0%} of spec; "
                    f"expected B/A ratio from the spec {expected:.2f}, measured {rb['median'] / ra['median']:.2f}")
            causes = tuple(causes_for(metric, klass, a, b)) if verdict == "worse" else ()
            out.append(Verdict(metric, klass, unit, ra["median"], rb["median"], ratio, tol, verdict, "efficiency", note, causes))
            continue
        verdict, ratio = judge(ra["median"], rb["median"], tol, ref.get("higher_is_better", True))
        note = None
        if ra.get("workers") is not None and rb.get("workers") is not None and ra["workers"] != rb["workers"]:
            note = f"workers {ra['workers']} vs {rb['workers']}"
        causes = tuple(causes_for(metric, klass, a, b)) if verdict == "worse" else ()
        out.append(Verdict(metric, klass, unit, ra["median"], rb["median"], ratio, tol, verdict, "median", note, causes))
    return out


def any_worse(verdicts: list[Verdict]) -> bool:
    return any(v.verdict == "worse" for v in verdicts)
