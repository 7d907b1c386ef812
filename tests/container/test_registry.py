"""The registry client against the real CNCF distribution server on 127.0.0.1 (conftest)."""

from __future__ import annotations

import http.server
import ssl
import threading
from typing import Any

import pytest

from provisioner.container.registry import ImageNotFoundError, RegistryClient, RegistryError, resolve_image
from tests.container.conftest import USERS
from tests.container.registry_server import NGC_ENV, push_image


def client(**kw: Any) -> RegistryClient:
    return RegistryClient(scheme="http", timeout=5, deadline=20, **kw)


def test_tag_resolves_to_index_digest_and_amd64_facts(registry):
    pushed = push_image(registry, "nvidia/pytorch", "24.08-py3", NGC_ENV, seed="ngc")
    facts = client().resolve(f"{registry.host}/nvidia/pytorch:24.08-py3")
    assert facts.digest == pushed.digest  # what `docker pull` pins: the index
    assert facts.manifest_digest == pushed.manifest_digest != pushed.digest
    assert facts.config_digest == pushed.config_digest
    assert facts.image == f"{registry.host}/nvidia/pytorch:24.08-py3@{pushed.digest}"
    assert (facts.os, facts.architecture) == ("linux", "amd64")
    assert facts.compressed_size == pushed.compressed_size > 0
    assert facts.env["CUDA_VERSION"] == "12.6.0.022" and facts.cuda == "12.6"
    assert facts.env["CUDA_DRIVER_VERSION"] == "560.35.03"
    assert facts.env["CUDNN_VERSION"] == "9.3.0.75"
    assert facts.env["NCCL_VERSION"] == "2.22.3"
    assert facts.framework == ("torch", "2.5.0a0+872d972")
    assert facts.env["NVIDIA_REQUIRE_CUDA"] == "cuda>=9.0"
    assert facts.arch_list is not None and (90, True) in facts.arch_list and (80, False) in facts.arch_list
    assert "PATH" not in facts.env  # only the stack facts are kept
    assert facts.entrypoint == ["/opt/nvidia/nvidia_entrypoint.sh"]
    # the record `trainvm lock` stores round-trips
    assert type(facts).from_record(facts.to_record()) == facts


def test_pinned_digest_and_single_manifest_image(registry):
    pushed = push_image(registry, "team/train", "v1", {"CUDA_VERSION": "12.4.1", "TENSORFLOW_VERSION": "2.16.1"}, index=False, seed="single")
    facts = client().resolve(f"{registry.host}/team/train:v1@{pushed.digest}")
    assert facts.digest == facts.manifest_digest == pushed.digest
    assert facts.framework == ("tensorflow", "2.16.1") and facts.arch_list is None


def test_missing_repository_tag_and_digest(registry):
    push_image(registry, "team/exists", "v1", {"CUDA_VERSION": "12.4.1"}, index=False, seed="exists")
    for ref in (f"{registry.host}/team/nope:v1", f"{registry.host}/team/exists:v2",
                f"{registry.host}/team/exists@sha256:{'0' * 64}"):
        with pytest.raises(ImageNotFoundError) as err:
            client().resolve(ref)
        assert "not found" in str(err.value) and err.value.exit_code == 1


def test_tag_that_moved(registry):
    old = push_image(registry, "team/moving", "latest-cu124", {"CUDA_VERSION": "12.4.1"}, seed="old")
    new = push_image(registry, "team/moving", "latest-cu124", {"CUDA_VERSION": "12.6.2"}, seed="new")
    assert old.digest != new.digest
    c = client()
    assert c.digest_of(f"{registry.host}/team/moving:latest-cu124") == new.digest
    # the pinned digest still fetches what was pinned (content addressing), and says what the tag is now
    facts = c.resolve(f"{registry.host}/team/moving:latest-cu124@{old.digest}")
    assert facts.digest == old.digest and facts.cuda == "12.4"
    assert c.tag_moved(f"{registry.host}/team/moving:latest-cu124@{old.digest}") == new.digest
    assert c.tag_moved(f"{registry.host}/team/moving:latest-cu124@{new.digest}") is None


def _ctx(ca: Any) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ctx


def test_bearer_token_anonymous_pull_of_a_public_repository(token_registry):
    reg, tokens, ca = token_registry
    user, password = next(iter(USERS.items()))
    push_token = tokens.sign(user, [{"type": "repository", "name": "public/cuda", "actions": ["pull", "push"]}])
    pushed = push_image(reg, "public/cuda", "12.6.2-runtime", {"CUDA_VERSION": "12.6.2", "NVIDIA_REQUIRE_CUDA": "cuda>=12.6 brand=tesla,driver>=470,driver<471"}, token=push_token, seed="pub")
    before = len(tokens.requests)
    facts = client(ssl_context=_ctx(ca)).resolve(f"{reg.host}/public/cuda:12.6.2-runtime")
    assert facts.digest == pushed.digest
    asked = tokens.requests[before:]
    assert asked and all(r["user"] is None and r["service"] == "trainvm-test-registry" for r in asked)
    assert asked[0]["scope"] == ["repository:public/cuda:pull"]


def test_bearer_token_private_repository_needs_credentials(token_registry):
    reg, tokens, ca = token_registry
    user, password = next(iter(USERS.items()))
    push_token = tokens.sign(user, [{"type": "repository", "name": "nvidia/pytorch", "actions": ["pull", "push"]}])
    pushed = push_image(reg, "nvidia/pytorch", "24.08-py3", NGC_ENV, token=push_token, seed="priv")
    ref = f"{reg.host}/nvidia/pytorch:24.08-py3"
    with pytest.raises(RegistryError) as err:
        client(ssl_context=_ctx(ca)).resolve(ref)
    assert "denied" in str(err.value) or "credentials" in str(err.value)
    with pytest.raises(RegistryError, match="refused the credentials"):
        client(ssl_context=_ctx(ca), credentials=(user, "wrong")).resolve(ref)
    facts = client(ssl_context=_ctx(ca), credentials=(user, password)).resolve(ref)
    assert facts.digest == pushed.digest and facts.env["CUDNN_VERSION"] == "9.3.0.75"
    assert tokens.requests[-1]["user"] == user


def test_token_realm_certificate_is_checked(token_registry):
    reg, _, _ = token_registry
    with pytest.raises(RegistryError, match="cannot reach"):
        client().resolve(f"{reg.host}/public/cuda:12.6.2-runtime")  # default trust store: trustme CA unknown


def test_resolve_image_hook_reads_credentials_from_the_environment(token_registry, monkeypatch):
    reg, tokens, ca = token_registry
    user, password = next(iter(USERS.items()))
    push_token = tokens.sign(user, [{"type": "repository", "name": "team/hook", "actions": ["pull", "push"]}])
    pushed = push_image(reg, "team/hook", "v1", {"CUDA_VERSION": "12.8.0"}, token=push_token, index=False, seed="hook")
    monkeypatch.setenv("TRAINVM_REGISTRY_USER", user)
    monkeypatch.setenv("TRAINVM_REGISTRY_PASSWORD", password)
    facts = resolve_image(f"{reg.host}/team/hook:v1", scheme="http", ssl_context=_ctx(ca))
    assert facts.digest == pushed.digest


class _Huge(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.end_headers()  # no Content-Length: the client must stop reading by itself
        chunk = b" " * 65536
        try:
            for _ in range(200):
                self.wfile.write(chunk)
        except OSError:
            pass


def test_responses_are_bounded():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Huge)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RegistryError, match="limit"):
            client().resolve(f"127.0.0.1:{httpd.server_address[1]}/team/huge:v1")
    finally:
        httpd.shutdown()
        httpd.server_close()
