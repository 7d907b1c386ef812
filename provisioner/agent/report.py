"""probe(): this machine as a stack report (schema 1 of /var/lib/trainvm/report.json).

The one probe: ``trainvm verify --local``, ``capture`` and ``probe`` call :func:`probe` on the
workstation (``source: "local"``); the VM's ``python3 -m provisioner.agent report STATUS`` calls it
too (``source: "vm"``, with the startup script's phases, data and error added by ``__main__``).
Keys beyond the VM's historical contract (``cuda_runtime``, ``blas``, ``package_sources``,
``python_env``, ``notes``) are part of both.

Part of the agent: standard library only, CPython >= 3.8.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from provisioner.agent.gpu import GpuProbe, Runner, probe_gpus, run_command
from provisioner.agent.pyenv import PythonEnv, ScriptRunner, normalize_cudnn, probe_python, run_script
from provisioner.agent.system import (
    cpu_info,
    data_status,
    disk_info,
    glibc_version,
    memory_gib,
    nvcc_version,
    os_release,
    system_cudnn,
)

SCHEMA = 1
#: a rehearsal (status ``rehearsed``: the machine has no GPU) does not report these GPU facts as absent or false: they
#: are ``null`` and listed under ``not_checked`` with this reason
REHEARSAL = "rehearsal: no GPU"
GPU_FACTS = ("gpus", "driver", "cuda_driver_max", "framework.cuda_available")
CUDNN_WHEEL = re.compile(r"nvidia-cudnn(-cu\d+)?")


def major_minor(version: str | None) -> str | None:
    """"12.4.131" -> "12.4"; None stays None."""
    if not version:
        return None
    m = re.match(r"(\d+)(?:\.(\d+))?", str(version))
    if not m:
        return None
    return "%s.%s" % (m.group(1), m.group(2) or 0)


def _release(text: str) -> list[str]:
    m = re.match(r"\d+(?:\.\d+)*", text.strip())
    return m.group(0).split(".") if m else []


def refine_cudnn(framework: object, libraries: Iterable[str | None]) -> str | None:
    """The cuDNN in use, as precisely as the evidence goes. The framework's own answer (torch:
    90100 -> "9.1.0"; tensorflow: "9") says what is loaded; a cuDNN library installed beside it (the
    nvidia-cudnn-cuXX wheel "9.1.0.70", the system package) that agrees with it as far as the
    framework's answer goes refines it. Without a framework answer, the first library."""
    fw = normalize_cudnn(framework)
    libs = [str(v) for v in libraries if v]
    if fw is None:
        return libs[0] if libs else None
    want = _release(fw)
    agreeing = [v for v in libs if want and _release(v)[: len(want)] == want]
    return max(agreeing + [fw], key=lambda v: len(_release(v)))


def cudnn_wheel(packages: dict[str, str]) -> str | None:
    """The version of the pip cuDNN wheel (nvidia-cudnn-cu12 ...) among ``packages``, or None."""
    return next((v for k, v in sorted(packages.items()) if CUDNN_WHEEL.fullmatch(re.sub(r"[-_.]+", "-", k).lower())), None)


def cuda_runtime(env: PythonEnv) -> str | None:
    """CUDA the framework uses; without a framework, the pip CUDA runtime wheel (major.minor)."""
    if env.framework and env.framework.get("cuda"):
        return major_minor(str(env.framework["cuda"]))
    runtime = next((d.version for d in env.distributions if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", d.name)), None)
    return major_minor(runtime)


def build_report(gpu: GpuProbe, env: PythonEnv, *, os_info: dict[str, Any], cpu: dict[str, Any],
                 memory: float | None, disk: dict[str, Any], toolkit: str | None, system_cudnn: str | None,
                 data: Sequence[dict[str, str]] = (), source: str = "local", status: str = "ready") -> dict[str, Any]:
    """Assemble the report dict from probe parts (pure; tests build reports with this)."""
    framework = None
    if env.framework:
        fw = env.framework
        framework = {"name": fw.get("name"), "version": fw.get("version"),
                     "cuda": major_minor(fw.get("cuda")) if fw.get("cuda") else None,
                     "cudnn": None if fw.get("cudnn") is None else str(fw.get("cudnn")),
                     "cuda_available": bool(fw.get("cuda_available"))}
    packages = env.packages()
    sources = {d.name: d.source_info() for d in env.distributions if d.notable}
    if status == "rehearsed":
        return _rehearsed(build_report(gpu, env, os_info=os_info, cpu=cpu, memory=memory, disk=disk, toolkit=toolkit,
                                       system_cudnn=system_cudnn, data=data, source=source, status="ready"))
    return {
        "schema": SCHEMA,
        "source": source,
        "status": status,
        "gpus": [g.as_report() for g in gpu.gpus],
        "driver": gpu.driver,
        "cuda_driver_max": gpu.cuda_driver_max,
        "framework": framework,
        "cuda_runtime": cuda_runtime(env),
        "cuda_toolkit": toolkit,
        "cudnn": refine_cudnn(framework and framework["cudnn"], [cudnn_wheel(packages), system_cudnn]),
        "python": env.python,
        "packages": packages,
        "package_sources": sources,
        "python_env": {"executable": env.executable, "conda": env.is_conda,
                       "conda_packages": dict(env.conda_packages)},
        "os": os_info,
        "cpu": cpu,
        "memory_gib": memory,
        "disk": disk,
        "blas": env.blas,
        "data": list(data),
        "phases": {},
        "notes": [*gpu.notes, *env.notes],
    }


def _rehearsed(doc: dict[str, Any]) -> dict[str, Any]:
    """A rehearsal's report: the GPU facts ``null`` and named under ``not_checked`` (never an empty GPU list or a
    false ``cuda_available`` that reads as an observation)."""
    framework = dict(doc["framework"], cuda_available=None) if doc["framework"] else None
    return dict(doc, status="rehearsed", gpus=None, driver=None, cuda_driver_max=None, framework=framework,
                not_checked={k: REHEARSAL for k in GPU_FACTS if k != "framework.cuda_available" or framework})


def probe(python: str | None = None, data_path: str = ".", data_dests: Sequence[str] = (), *,
          runner: Runner = run_command, script_runner: ScriptRunner = run_script,
          root: Path = Path("/"), env: PythonEnv | None = None, source: str = "local",
          status: str = "ready") -> dict[str, Any]:
    """Probe this machine. ``python``: interpreter to inspect (default: the running one), or ``env``
    already probed; ``data_path``: where training data lives (its disk is reported); ``data_dests``:
    data destinations to report as staged/empty/missing; ``root``: where the machine's files are
    (the VM's $TRAINVM_ROOT). Never raises for missing GPU/tools."""
    gpu = probe_gpus(runner, "" if root == Path("/") else str(root))
    if env is None:
        env = probe_python(python, script_runner)
    os_info = {**os_release(root), "glibc": glibc_version()}
    disk = disk_info(data_path, root)
    return build_report(
        gpu, env,
        os_info=os_info,
        cpu=cpu_info(root),
        memory=memory_gib(root),
        disk={"path": disk.path, "kind": disk.kind, "free_gib": disk.free_gib},
        toolkit=nvcc_version(runner, root),
        system_cudnn=system_cudnn(root, runner),
        data=[{"dest": d, "status": data_status(d, root)} for d in data_dests],
        source=source,
        status=status,
    )
