"""The emulator fixtures of the CLI-against-emulators tests (tests/e2e/conftest.py), for the bake tests."""

from collections.abc import Iterator

import pytest

from provisioner.bake import records
from tests.e2e.conftest import aws, env  # noqa: F401 - pytest fixtures


@pytest.fixture(autouse=True)
def _no_record_of_bakes_leaks() -> Iterator[None]:
    """``trainvm bake`` writes the local record of bakes in the cache directory (tests/conftest.py: one temporary
    directory per test session); left there, ``plan`` in a later test of the session finds a baked image of the
    example profiles (tests/cli/test_plan_cli.py's goldens of tf-resnet50 then fail). Put it back as it was."""
    path = records.path()
    before = path.read_bytes() if path.exists() else None
    yield
    if before is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(before)


@pytest.fixture
def read_before_release(monkeypatch: pytest.MonkeyPatch):
    """A bake releases its builder's payload from the store as it ends (providers/store.py ``release``, as ``down``
    does); a test that checks what the builder was given reads the object just before that: ``read_before_release(
    read)`` makes bake call ``read(sha256)`` first and returns the list its answers go to."""
    from provisioner.bake import run

    real = run.release

    def install(read):
        seen: list[object] = []

        def reading_first(provider, cloud, region, sha256, mine):
            seen.append(read(sha256))
            return real(provider, cloud, region, sha256, mine)

        monkeypatch.setattr(run, "release", reading_first)
        return seen

    return install
