"""Probe a Python interpreter (default: the running one) by running two small scripts in it.

The first lists the interpreter's version and installed distributions (importlib.metadata; PEP 610
direct_url.json; INSTALLER; conda-meta), the second imports the framework (torch, then tensorflow,
then jax) and numpy. A framework that crashes on import (broken CUDA libraries) therefore never costs
us the package list, and the agent never shares a ``sys.path`` with the stack it judges.

The scripts' raw answers (``payloads``) are what ``stack-probe`` prints inside a container and what
``stack-check`` saves as stack.json; :func:`python_env` turns them into a :class:`PythonEnv`.

Part of the agent: standard library only (no ``packaging``), CPython >= 3.8, so that ``python3 -m
provisioner.agent stack-probe`` runs in any image that has a python3.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from provisioner.agent.gpu import CommandResult, run_command

MARKER = "TRAINVM_PROBE="

# Runs inside the target interpreter (any CPython >= 3.8): keep it stdlib-only and old-syntax.
ENV_SCRIPT = r'''
import glob, json, os, platform, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
out = {"python": platform.python_version(), "implementation": platform.python_implementation().lower(),
       "executable": sys.executable, "prefix": sys.prefix, "dists": [], "conda": None}
conda_meta = os.path.join(sys.prefix, "conda-meta")
conda_dists = {}
if os.path.isdir(conda_meta):
    pkgs = {}
    for path in sorted(glob.glob(os.path.join(conda_meta, "*.json"))):
        try:
            with open(path) as f:
                rec = json.load(f)
        except Exception:
            continue
        name, files = rec.get("name"), rec.get("files") or []
        if not name:
            continue
        pkgs[name] = {"version": rec.get("version"), "channel": rec.get("channel") or rec.get("schannel")}
        for fn in files:
            part = fn.replace("\\", "/").split("/")
            for seg in part:
                if seg.endswith(".dist-info") or seg.endswith(".egg-info"):
                    stem = seg[: -len(".dist-info")] if seg.endswith(".dist-info") else seg[: -len(".egg-info")]
                    key = stem.split("-", 1)[0].lower().replace(".", "_")
                    conda_dists[key] = name
    out["conda"] = {"packages": pkgs}
seen = set()
if metadata is not None:
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name or name.lower() in seen:
            continue
        seen.add(name.lower())
        rec = {"name": name, "version": dist.version, "installer": None, "direct_url": None, "path": None}
        try:
            rec["installer"] = (dist.read_text("INSTALLER") or "").strip() or None
        except Exception:
            pass
        try:
            text = dist.read_text("direct_url.json")
            rec["direct_url"] = json.loads(text) if text else None
        except Exception:
            pass
        path = getattr(dist, "_path", None)
        if path is not None:
            rec["path"] = str(path)
        key = name.lower().replace("-", "_").replace(".", "_")
        if key in conda_dists:
            rec["conda_package"] = conda_dists[key]
        out["dists"].append(rec)
print("TRAINVM_PROBE=" + json.dumps(out))
'''

FRAMEWORK_SCRIPT = r'''
import json, sys
wanted = sys.argv[1:]
out = {"framework": None, "errors": [], "blas": None}
def attempt(name):
    if name == "torch":
        import torch
        cudnn = None
        try:
            if torch.backends.cudnn.is_available():
                cudnn = torch.backends.cudnn.version()
        except Exception:
            pass
        return {"name": "torch", "version": torch.__version__, "cuda": torch.version.cuda,
                "cudnn": None if cudnn is None else str(cudnn), "cuda_available": bool(torch.cuda.is_available()),
                "hip": getattr(torch.version, "hip", None)}
    if name == "tensorflow":
        import tensorflow as tf
        info = dict(tf.sysconfig.get_build_info())
        gpus = tf.config.list_physical_devices("GPU")
        return {"name": "tensorflow", "version": tf.__version__, "cuda": info.get("cuda_version"),
                "cudnn": info.get("cudnn_version"), "cuda_available": bool(gpus)}
    if name == "jax":
        import jax
        cuda = cudnn = None
        try:
            from jax._src.lib import cuda_versions
            if cuda_versions is not None:
                v = cuda_versions.cuda_runtime_get_version()
                cuda = "%d.%d" % (v // 1000, (v % 1000) // 10)
                cudnn = str(cuda_versions.cudnn_get_version())
        except Exception:
            pass
        try:
            available = jax.default_backend() in ("gpu", "cuda")
        except Exception:
            available = False
        return {"name": "jax", "version": jax.__version__, "cuda": cuda, "cudnn": cudnn, "cuda_available": available}
for name in wanted:
    if name == "numpy":
        continue
    try:
        out["framework"] = attempt(name)
        break
    except BaseException as exc:
        out["errors"].append("%s: %s: %s" % (name, type(exc).__name__, exc))
if "numpy" in wanted:
    try:
        import numpy
        blas = None
        try:
            cfg = numpy.show_config(mode="dicts")
            dep = cfg.get("Build Dependencies", {}).get("blas", {})
            if dep.get("name"):
                blas = {"name": dep.get("name"), "version": dep.get("version")}
        except Exception:
            pass
        if blas is None:
            try:
                info = numpy.__config__.get_info("blas_opt") or numpy.__config__.get_info("blas_opt_info")
                libs = info.get("libraries") or []
                if libs:
                    blas = {"name": libs[0], "version": None}
            except Exception:
                pass
        out["blas"] = blas
    except BaseException as exc:
        out["errors"].append("numpy: %s: %s" % (type(exc).__name__, exc))
print("TRAINVM_PROBE=" + json.dumps(out))
'''

FRAMEWORKS = ("torch", "tensorflow", "jax")
PYTORCH_INDEX = "https://download.pytorch.org/whl/"

ScriptRunner = Callable[[Sequence[str], float], CommandResult]


def canonicalize_name(name: str) -> str:
    """PEP 503 normalised name (what ``packaging.utils.canonicalize_name`` returns)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Distribution:
    name: str  # canonical (PEP 503) name
    version: str
    installer: str | None = None
    editable: bool = False
    url: str | None = None  # PEP 610 url (direct installs)
    vcs: str | None = None
    index: str | None = None
    index_inferred: bool = False
    conda_package: str | None = None  # installed by conda (package name) when known

    @property
    def notable(self) -> bool:
        """Worth recording in the report's package_sources (anything beyond a plain index install)."""
        return bool(self.editable or self.url or self.index or self.conda_package
                    or (self.installer not in (None, "pip", "uv", "poetry", "pdm")))

    def source_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"installer": self.installer, "editable": self.editable}
        for key in ("url", "vcs", "index", "conda_package"):
            if getattr(self, key):
                info[key] = getattr(self, key)
        if self.index_inferred:
            info["index_inferred"] = True
        return info


@dataclass(frozen=True)
class PythonEnv:
    python: str | None
    executable: str | None = None
    distributions: tuple[Distribution, ...] = ()
    conda_packages: dict[str, str | None] = field(default_factory=dict)  # conda-meta name -> version
    is_conda: bool = False
    framework: dict[str, Any] | None = None
    blas: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()

    def packages(self) -> dict[str, str]:
        return {d.name: d.version for d in self.distributions}

    def dist(self, name: str) -> Distribution | None:
        key = canonicalize_name(name)
        return next((d for d in self.distributions if d.name == key), None)


def run_script(argv: Sequence[str], timeout: float) -> CommandResult:
    """Run the probe interpreter quietly (frameworks log on import), from / so the cwd shadows nothing."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    # the agent's own folder (its provisioner, its packaging) must not shadow the probed environment's
    own = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != own]
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    else:
        env.pop("PYTHONPATH", None)
    return run_command(argv, timeout, cwd="/", env=env)


def _payload(done: CommandResult) -> dict[str, Any] | None:
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                value = json.loads(line[len(MARKER):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _failure(what: str, done: CommandResult) -> str:
    tail = (done.stderr or done.stdout).strip().splitlines()
    return f"{what} failed (rc {done.returncode}){': ' + tail[-1] if tail else ''}"


def distribution_from_record(rec: dict[str, Any]) -> Distribution:
    """One ENV_SCRIPT record -> Distribution, with PEP 610 and index inference applied."""
    name = str(canonicalize_name(str(rec["name"])))
    version = str(rec.get("version") or "")
    direct = rec.get("direct_url") or {}
    url = direct.get("url") if isinstance(direct, dict) else None
    editable = bool(isinstance(direct, dict) and (direct.get("dir_info") or {}).get("editable"))
    vcs = (direct.get("vcs_info") or {}).get("vcs") if isinstance(direct, dict) else None
    path = rec.get("path") or ""
    if path.endswith(".egg-info") and "site-packages" not in path and "dist-packages" not in path:
        editable = True  # legacy `setup.py develop` / egg-link install
        url = url or "file://" + os.path.dirname(path)
    index: str | None = None
    inferred = False
    if url and url.startswith(("http://", "https://")) and url.endswith((".whl", ".tar.gz", ".zip")):
        index = url.rsplit("/", 1)[0] + "/"
    elif "+" in version and name in ("torch", "torchvision", "torchaudio"):
        label = version.split("+", 1)[1]
        if label.startswith(("cu", "rocm", "cpu", "xpu")):
            index, inferred = PYTORCH_INDEX + label, True
    installer = rec.get("installer")
    conda_package = rec.get("conda_package") or (name if installer == "conda" else None)
    return Distribution(name, version, installer, editable, url, vcs, index, inferred, conda_package)


def probe_payloads(python: str | None = None, runner: ScriptRunner = run_script,
                   framework_timeout: float = 180.0) -> dict[str, Any]:
    """Run both scripts in ``python`` (default: the running interpreter): ``{"executable", "env",
    "framework", "notes"}``, the raw answers (None where a script printed none). Never raises."""
    exe = python or sys.executable
    done = runner([exe, "-c", ENV_SCRIPT], 60.0)
    env = _payload(done)
    out: dict[str, Any] = {"executable": exe, "env": env, "framework": None, "notes": []}
    if env is None:
        out["notes"].append(_failure(f"probing {exe}", done))
        return out
    names = {canonicalize_name(str(r.get("name"))) for r in env.get("dists", [])}
    wanted = [f for f in FRAMEWORKS if f in names] + (["numpy"] if "numpy" in names else [])
    if wanted:
        fdone = runner([exe, "-c", FRAMEWORK_SCRIPT, *wanted], framework_timeout)
        out["framework"] = _payload(fdone)
        if out["framework"] is None:
            out["notes"].append(_failure(f"importing {', '.join(wanted)}", fdone))
    return out


def python_env(payloads: dict[str, Any]) -> PythonEnv:
    """The :class:`PythonEnv` of :func:`probe_payloads`' answers."""
    exe = payloads.get("executable")
    env = payloads.get("env")
    notes = [str(n) for n in payloads.get("notes") or []]
    if not isinstance(env, dict):
        return PythonEnv(None, exe, notes=tuple(notes))
    dists = sorted((distribution_from_record(r) for r in env.get("dists", [])), key=lambda d: d.name)
    conda = env.get("conda")
    conda_packages = {str(k): (v or {}).get("version") for k, v in (conda or {}).get("packages", {}).items()}
    fout = payloads.get("framework") or {}
    notes.extend(str(e) for e in fout.get("errors", []))
    return PythonEnv(env.get("python"), env.get("executable") or exe, tuple(dists), conda_packages,
                     conda is not None, fout.get("framework"), fout.get("blas"), tuple(notes))


def probe_python(python: str | None = None, runner: ScriptRunner = run_script,
                 framework_timeout: float = 180.0) -> PythonEnv:
    """Probe ``python`` (an interpreter path; default: the running one). Never raises."""
    return python_env(probe_payloads(python, runner, framework_timeout))


def normalize_cudnn(value: object) -> str | None:
    """cuDNN as "major.minor.patch": 90100 -> "9.1.0", 8902 -> "8.9.2", "9" -> "9", "9.1.0.70" kept."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    if text.isdigit() and len(text) >= 4:
        v = int(text)
        if v >= 10000:  # cuDNN >= 9: major*10000 + minor*100 + patch
            return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
        return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"  # cuDNN <= 8: major*1000 + minor*100 + patch
    return text
