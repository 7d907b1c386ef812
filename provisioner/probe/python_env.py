"""The Python environment probe is the agent's (``provisioner.agent.pyenv``: two stdlib-only scripts run
in the interpreter probed), re-exported here; :func:`user_python` (which interpreter is the user's
training environment) is the workstation's own."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

from provisioner.agent.pyenv import (
    ENV_SCRIPT,
    FRAMEWORK_SCRIPT,
    FRAMEWORKS,
    MARKER,
    PYTORCH_INDEX,
    Distribution,
    PythonEnv,
    ScriptRunner,
    distribution_from_record,
    normalize_cudnn,
    probe_payloads,
    probe_python,
    python_env,
    run_script,
)
from provisioner.errors import InputError

__all__ = ["ENV_SCRIPT", "FRAMEWORKS", "FRAMEWORK_SCRIPT", "MARKER", "PYTORCH_INDEX", "Distribution", "PythonEnv",
           "ScriptRunner", "distribution_from_record", "normalize_cudnn", "probe_payloads", "probe_python", "python_env",
           "run_script", "user_python"]


def user_python(explicit: str | None = None, environ: Mapping[str, str] | None = None,
                own_prefix: str | None = None) -> tuple[str, str]:
    """The interpreter of the user's environment, and where it came from: ``--python``, else
    ``$VIRTUAL_ENV``, else ``$CONDA_PREFIX``, else ``python3`` on PATH. trainvm's own interpreter is
    never chosen silently: that would capture trainvm's dependencies, not the training stack."""

    env = os.environ if environ is None else environ
    if explicit:
        if not os.path.exists(explicit):
            raise InputError(f"--python: {explicit} does not exist")
        return explicit, "--python"
    bindir = "Scripts" if os.name == "nt" else "bin"
    candidates = [(os.path.join(env[var], bindir, "python"), f"${var}={env[var]}")
                  for var in ("VIRTUAL_ENV", "CONDA_PREFIX") if env.get(var)]
    on_path = shutil.which("python3", path=env.get("PATH"))
    if on_path:
        candidates.append((on_path, "python3 on PATH"))
    if not candidates:
        raise InputError("no Python environment found ($VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH)",
                         hint="pass --python /path/to/your/training/python")
    exe, where = candidates[0]
    mine = os.path.realpath(own_prefix or sys.prefix)
    if os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(exe)))) == mine:
        raise InputError(f"the Python environment found ({where}: {exe}) is trainvm's own, not your training environment",
                         hint="pass --python /path/to/your/training/python (or activate that environment)")
    return exe, where
