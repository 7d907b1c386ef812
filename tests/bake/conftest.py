"""The emulator fixtures of the CLI-against-emulators tests (tests/e2e/conftest.py), for the bake tests."""

from tests.e2e.conftest import aws, env  # noqa: F401 - pytest fixtures
