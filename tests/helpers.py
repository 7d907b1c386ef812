"""Plain helpers shared by test modules (import them: ``from tests.helpers import REPO``). Fixtures stay in
conftest.py, which pytest loads itself; importing conftest as a module would load it twice."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "profiles" / "examples").glob("*.yaml"))
BASES = sorted((REPO / "profiles" / "base").glob("*.yaml"))

STACK = {
    "os": "ubuntu-22.04",
    "driver": "550.127.05",
    "cuda": "12.4",
    "python": "3.11.9",
    "packages": ["torch==2.4.1+cu124"],
}

#: A small valid profile (T4, torch 2.4.1+cu124) as YAML text. tests/profile/test_hash_stability.py pins the
#: hashes of it (and of it with placements added): an edit here is an edit there.
BASE_PROFILE = """\
name: base-stack
stack:
  os: ubuntu-22.04
  driver: "550.127.05"
  cuda: "12.4"
  python: "3.11.9"
  packages: [torch==2.4.1+cu124]
  env: {PYTHONHASHSEED: "0"}
hardware:
  gpu: T4
"""


def make_profile(hardware: dict[str, Any] | None = None, **stack: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": "t", "stack": {**STACK, **stack}}
    if hardware is not None:
        doc["hardware"] = hardware
    return doc


def gce_cli_env(monkeypatch: Any, tmp_path: Path, emulator: Any = None) -> Any:
    """For a fixture to ``yield from``: a GCE emulator that the CLI reaches through the real SDK (endpoint,
    project, an SSH key, no other cloud's credentials, no retry or ready-poll delays) and a GCS emulator for the
    payload store (tests/emulators/gcs.shared); yields the emulator
    (``emulator``: its class, default tests/emulators/gce.GceEmulator; gce_group.GceGroupEmulator for clusters)."""
    from tests.emulators.gce import GceEmulator

    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "0")
    for var in ("AZURE_SUBSCRIPTION_ID", "AWS_ACCESS_KEY_ID"):
        monkeypatch.delenv(var, raising=False)
    key = tmp_path / "id.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGtest e2e\n")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(key))
    payload_stores(monkeypatch)  # `up` stages the payload (GCE: in the shared GCS emulator)
    with (emulator or GceEmulator)() as emu:
        monkeypatch.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        yield emu


def capture_ssh(monkeypatch: Any) -> list[list[str]]:
    """``trainvm ssh`` without a network: port 22 open, every tool on PATH, and the argv it would exec recorded
    (returned list) instead of exec'd."""
    argv: list[list[str]] = []
    monkeypatch.setattr("provisioner.commands.ssh._exec", argv.append)
    monkeypatch.setattr("provisioner.commands.ssh.port_open", lambda host, port=22, timeout=5.0: True)
    monkeypatch.setattr("provisioner.commands.ssh.shutil.which", lambda tool: f"/usr/bin/{tool}")
    return argv


def assert_verify_names_drifting_node(cli: Any, name: str, node: str) -> None:
    """``verify NAME --json`` of a cluster whose ``node`` reports another driver: exit 1, and the nodes.driver row
    names that node."""
    drift = cli("verify", name, "--json")
    assert drift.code == 1
    row = next(f for f in drift.json()["fields"] if f["field"] == "nodes.driver")
    assert node in str(row["observed"])


def load_helper(name: str) -> Any:
    """A fresh module of the on-VM helper (templates/files/trainvm_helper.py) under ``name``, as the VM runs it
    (a file, not part of the provisioner package): each test module that monkeypatches it gets its own copy."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "templates/files/trainvm_helper.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def payload_stores(monkeypatch: Any) -> None:
    """Where `up` stages payloads in the CLI end-to-end tests, through the clouds' own SDKs: GCE's in the shared GCS
    emulator (tests/emulators/gcs.py), AWS's in moto's S3 (TRAINVM_AWS_ENDPOINT, as every AWS call), Azure's through
    the ARM emulator (group, storage account, container, policy, listKeys) and the shared Azurite (the blob; its
    certificate from the CA the ARM emulator uses by default, so one REQUESTS_CA_BUNDLE serves both)."""
    from tests.emulators import azurite_server, gcs

    monkeypatch.setenv("TRAINVM_GCS_ENDPOINT", gcs.shared().url)
    monkeypatch.setenv("TRAINVM_AZURE_BLOB_ENDPOINT", azurite_server.shared().url)


def sigterm_when(created: Any, *, settle: float = 0.3, timeout: float = 120.0) -> Any:
    """A started thread that sends this process SIGTERM once ``created()`` is true (the command under test has sent
    its create call, so it is past installing its SIGTERM handler), then ``settle`` seconds more; never after
    ``timeout``. A fixed timer instead fires too early on a loaded machine (before the handler: pytest dies) or too
    late. ``.cancel()`` stops it if the command ended first."""
    import os
    import signal
    import threading
    import time

    stop = threading.Event()

    def run() -> None:
        end = time.monotonic() + timeout
        while not stop.is_set() and time.monotonic() < end:
            if created():
                if not stop.wait(settle):
                    os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.cancel = stop.set  # type: ignore[attr-defined]
    thread.start()
    return thread


def load_by_path(name: str, path: Path) -> ModuleType:
    """The module at ``path``, registered as ``name`` once (the suite runs with --import-mode=importlib, so test folders
    share helper files by path, not by package import)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def mypy_typo_lines(snippet: str, tmp_path: Path) -> tuple[set[int], set[int], str]:
    """Run mypy (the project's config) on ``snippet``: (lines with an error, lines marked ``# typo``, mypy's output).
    The typed-boundary tests assert the two sets are equal: every typo is caught and nothing else is flagged."""
    import re

    from mypy import api

    path = tmp_path / "caller.py"
    path.write_text(snippet)
    out, err, _ = api.run(["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
                           "--no-error-summary", "--show-error-codes", str(path)])
    assert not err, err
    errors = {int(m.group(1)) for m in re.finditer(rf"{re.escape(str(path))}:(\d+): error:", out)}
    typos = {n for n, line in enumerate(snippet.splitlines(), 1) if line.endswith("# typo")}
    return errors, typos, out
