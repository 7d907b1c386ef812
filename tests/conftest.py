"""Shared fixtures: writing profiles to disk and running the CLI in-process."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import BASES, EXAMPLES, REPO, STACK, make_profile  # noqa: F401 (re-exported for fixtures)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the parsed-data cache of the test run out of the user's ~/.cache."""
    import os
    import tempfile

    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="trainvm-test-cache-")
    # nor its record of the VMs `up` created (commands/vm_record.py) in ~/.local/state
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="trainvm-test-state-")
    # `capture -o` also locks against PyPI; the suite stays offline (tests/lock turn it back on)
    os.environ["TRAINVM_CAPTURE_LOCK"] = "0"
    # no real AWS credentials or config reach boto3 (the AWS provider is built by `list`, `down`...), and no
    # probe of the EC2 instance metadata service from a test
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        del os.environ[key]
    os.environ.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true")
    # `lock` reads NVIDIA's driver index; the suite stays offline (tests/lock point it at a fixture)
    os.environ["TRAINVM_DRIVER_INDEX_URL"] = "none"
    # nor asks the clouds for the images it pins (tests/lock turn it on against the emulators)
    os.environ["TRAINVM_LOCK_IMAGES"] = "0"
    # a run id that the xdist workers and the emulators they start inherit: the end of the run looks for leftovers
    from tests.emulators.leftovers import mark_run

    mark_run(worker=hasattr(config, "workerinput"))


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        import json

        return json.loads(self.out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """Run ``trainvm ARGS`` through the real entry point (error funnel included)."""
    from provisioner.cli import main

    def run(*args: str) -> CliResult:
        monkeypatch.setattr(sys, "argv", ["trainvm", *args])
        monkeypatch.delenv("TRAINVM_DEBUG", raising=False)  # main() sets it for --debug; never leak it
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


@pytest.fixture
def install_providers(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``install_providers({"gcp": fake, ...})``: the commands' provider registry for this test (and only it) is a
    ``ProviderRegistry`` of those providers, the real ones for any other cloud (or only ``factories``' when given).
    Returns the registry. Installed again, the new one replaces it."""
    from provisioner.hooks import providers as provider_registry
    from provisioner.hooks.providers import ProviderRegistry

    def install(providers: Any, factories: Any = None) -> ProviderRegistry:
        registry = ProviderRegistry(providers, factories)
        monkeypatch.setattr(provider_registry, "DEFAULT", registry)
        return registry

    return install


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[..., Path]:
    from io import StringIO

    from ruamel.yaml import YAML

    def write(doc: dict[str, Any] | str, name: str = "p.yaml", folder: Path | None = None) -> Path:
        path = (folder or tmp_path) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(doc, str):
            path.write_text(doc)
        else:
            buf = StringIO()
            YAML().dump(doc, buf)
            path.write_text(buf.getvalue())
        return path

    return write


@pytest.hookimpl(trylast=True)  # in the xdist controller: after xdist has ended its workers
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the shared emulators of this test process (tests/emulators/gcs.shared, azurite_server.shared); then, in
    the process that ran the session (not an xdist worker), fail the run when an emulator process it started is
    still running (tests/emulators/leftovers.py), naming it, and end it."""
    from tests.emulators import azurite_server, gcs
    from tests.emulators.leftovers import end, leftovers

    gcs.stop_shared()
    azurite_server.stop_shared()
    if hasattr(session.config, "workerinput") or not (left := leftovers()):
        return
    end([pid for pid, _ in left])
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for pid, cmdline in left:
        message = f"left running by this test run (now ended): pid {pid}: {cmdline}"
        if reporter:
            reporter.write_line(message, red=True)
        else:
            print(message, file=sys.stderr)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
