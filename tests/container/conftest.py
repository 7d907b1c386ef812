"""A real distribution server (and one behind bearer-token auth) per test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.container.registry_server import Registry, TokenServer, start_registry

SERVICE = "trainvm-test-registry"
ISSUER = "trainvm-test-issuer"
USERS = {"ngc-user": "ngc-test-password"}


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    reg = start_registry(tmp_path_factory.mktemp("registry"))
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Registry, TokenServer, Any]]:
    import trustme

    tmp = tmp_path_factory.mktemp("token-registry")
    ca = trustme.CA()
    tokens = TokenServer(tmp, ca, SERVICE, ISSUER, USERS)
    auth = {"token": {"realm": tokens.realm, "service": SERVICE, "issuer": ISSUER, "rootcertbundle": str(tokens.bundle)}}
    reg = start_registry(tmp, auth)
    yield reg, tokens, ca
    reg.stop()
    tokens.close()
