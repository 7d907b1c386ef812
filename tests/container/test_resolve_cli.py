"""`validate/plan --resolve-image` and `lock` when the registry cannot answer: what the user is told, and the exit code."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from tests.container.registry_server import NGC_ENV, free_port, push_image
from tests.container.test_profile import container_profile


@pytest.fixture(autouse=True)
def _cold_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # each test starts with no image facts
    yield
    import os

    os.environ.pop("TRAINVM_RESOLVE_IMAGES", None)  # --resolve-image sets it in-process


def offline(cli, *args):
    """The command without --resolve-image (the flag sets TRAINVM_RESOLVE_IMAGES in this process)."""
    import os

    os.environ.pop("TRAINVM_RESOLVE_IMAGES", None)
    return cli(*args)


def _image_line(path) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if "image:" in ln)


def test_resolve_image_fails_for_a_digest_the_registry_does_not_have(cli, write_yaml, registry, monkeypatch):
    push_image(registry, "team/gone", "v1", NGC_ENV, seed="gone")
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", registry.host)
    path = write_yaml(container_profile(f"{registry.host}/team/gone:v1@sha256:{'0' * 64}"))
    r = cli("validate", str(path), "--resolve-image")
    assert r.code == 1 and "invalid" in r.err, (r.out, r.err)
    assert f"{path}:{_image_line(path)}: stack.container.image: " in r.err and "not found" in r.err and "MANIFEST_UNKNOWN" in r.err
    r = cli("plan", str(path), "--resolve-image")
    assert r.code == 1 and "not found" in r.err and f"{path}:{_image_line(path)}:" in r.err, (r.out, r.err)
    # without the flag nothing is asked: the skipped checks are a warning, as before
    r = offline(cli, "validate", str(path))
    assert r.code == 0 and "not known offline" in r.err, r.err


def test_resolve_image_fails_when_the_registry_is_unreachable(cli, write_yaml, monkeypatch):
    """Issue 36 item 23: a registry that cannot be reached (and no cached facts) is exit 3 naming the registry --
    the profile was not checked, it is not INVALID (exit 1)."""
    host = f"127.0.0.1:{free_port()}"  # nothing listens
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", host)
    for image in (f"{host}/team/any:v1", f"{host}/team/any:v1@sha256:{'1' * 64}"):
        path = write_yaml(container_profile(image))
        r = cli("validate", str(path), "--resolve-image", "--json")
        res = r.json()["results"][0]
        assert r.code == 3 and res["valid"] is None, res
        err = res["errors"][0]
        assert err["path"] == "stack.container.image" and err["line"] == _image_line(path) and "cannot reach" in err["message"]
        assert f"the registry {host} could not be read" in err["message"]
        text = cli("validate", str(path), "--resolve-image")
        assert text.code == 3 and f"{path}: invalid" not in text.err, text.err
        assert f"{path}: not checked: a registry could not be read" in text.err and host in text.err
        r = cli("plan", str(path), "--resolve-image")
        assert r.code == 3 and "cannot reach" in r.err and f"{path}:{_image_line(path)}:" in r.err, (r.code, r.err)
        r = offline(cli, "plan", str(path))  # without the flag: offline, as before
        assert r.code == 0, r.err


class _Slow(http.server.BaseHTTPRequestHandler):
    """A registry that sends its manifest a byte at a time (each byte well within any per-read timeout)."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        body = b'{"schemaVersion": 2, "layers": []}'.ljust(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for i in range(len(body)):
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass  # the client gave up


@pytest.fixture
def slow_registry():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_registry_that_trickles_its_manifest_is_bounded_by_the_deadline(cli, write_yaml, slow_registry, monkeypatch):
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", slow_registry)
    monkeypatch.setenv("TRAINVM_REGISTRY_TIMEOUT", "1")  # the whole lookup; the server needs ~10 s for its 200 bytes
    path = write_yaml(container_profile(f"{slow_registry}/team/slow:v1"))
    r = cli("lock", str(path))
    assert r.code == 3 and "registry lookup took longer than 1 s" in r.err, (r.code, r.err)
    r = cli("validate", str(path), "--resolve-image")
    assert r.code == 3 and "took longer than 1 s" in r.err, (r.code, r.err)  # the registry, not the profile


def test_a_pinned_tag_is_answered_from_the_warm_cache_when_the_registry_is_down(cli, write_yaml, registry, monkeypatch):
    """Issue 36 item 23: TAG@DIGEST with the digest's facts cached: a warning naming the registry and the cache's
    age, the profile valid (exit 0); an invalid profile on the same unreachable registry is still exit 1."""
    import os

    from provisioner.container import store
    from provisioner.container.registry import RegistryClient

    pushed = push_image(registry, "team/warm", "v1", NGC_ENV, seed="warm")
    facts = RegistryClient(scheme="http").resolve(f"{registry.host}/team/warm:v1@{pushed.digest}")
    down = f"127.0.0.1:{free_port()}"  # the same image, on a registry that does not answer now
    store.record(facts.model_copy(update={"image": f"{down}/team/warm:v1@{pushed.digest}"}))
    hour_ago = time.time() - 3720
    for f in store.store_dir().glob("*.json"):
        os.utime(f, (hour_ago, hour_ago))
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", down)
    path = write_yaml(container_profile(f"{down}/team/warm:v1@{pushed.digest}"))
    r = cli("validate", str(path), "--resolve-image", "--json")
    res = r.json()["results"][0]
    assert r.code == 0 and res["valid"] is True, res
    said = [w["message"] for w in res["warnings"] if "could not be read" in w["message"]]
    assert said and f"the registry {down} could not be read" in said[0] and "cannot reach" in said[0]
    assert f"using the facts cached 1 h 2 min ago for {pushed.digest}" in said[0] and "tag v1" in said[0]
    bad = container_profile(f"{down}/team/warm:v1@{pushed.digest}")
    bad["stack"]["python"] = "3.11.9"  # a container and a python: invalid whatever the registry says
    assert cli("validate", str(write_yaml(bad, name="bad.yaml")), str(path), "--resolve-image").code == 1


def test_explicit_resolve_rereads_the_tag_with_a_warm_cache(cli, write_yaml, registry, monkeypatch):
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", registry.host)
    old = push_image(registry, "team/retag", "stable", NGC_ENV, seed="retag-old")
    path = write_yaml(container_profile(f"{registry.host}/team/retag:stable@{old.digest}"))
    r = cli("validate", str(path), "--resolve-image", "--json")
    assert r.code == 0 and not any("now points at" in w["message"] for w in r.json()["results"][0]["warnings"])  # cache now warm
    new = push_image(registry, "team/retag", "stable", {**NGC_ENV, "CUDA_VERSION": "12.8.0"}, seed="retag-new")
    r = cli("validate", str(path), "--resolve-image", "--json")
    warnings = [w["message"] for w in r.json()["results"][0]["warnings"]]
    assert r.code == 0 and any(f"the tag stable now points at {new.digest}" in w for w in warnings), warnings
    r = offline(cli, "validate", str(path), "--json")  # without the flag: the cached facts, no network
    assert r.code == 0 and not any("now points at" in w["message"] for w in r.json()["results"][0]["warnings"])


def test_lock_uses_the_cached_facts_of_a_pinned_digest_when_the_registry_is_down(cli, write_yaml, registry, monkeypatch):
    from provisioner.container import store
    from provisioner.container.registry import RegistryClient
    from provisioner.lock.model import read_lock

    pushed = push_image(registry, "team/offline", "v1", NGC_ENV, seed="offline")
    facts = RegistryClient(scheme="http").resolve(f"{registry.host}/team/offline:v1@{pushed.digest}")
    down = f"127.0.0.1:{free_port()}"  # the same image, on a registry that does not answer now
    store.record(facts.model_copy(update={"image": f"{down}/team/offline:v1@{pushed.digest}"}))
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", down)
    path = write_yaml(container_profile(f"{down}/team/offline:v1@{pushed.digest}"))
    r = cli("lock", str(path))
    assert r.code == 0, r.err
    assert "note: " in r.err and "cannot reach" in r.err and f"the facts cached for {pushed.digest}" in r.err and "not checked" in r.err
    assert read_lock(path.with_suffix(".lock")).container["digest"] == pushed.digest
    r = cli("lock", str(path), "--json")
    assert r.code == 0 and any("facts cached" in n for n in r.json()["notes"])
    # a tag (no digest) cannot be locked from the cache: what it points at is the question
    r = cli("lock", str(write_yaml(container_profile(f"{down}/team/offline:v1"), name="tag.yaml")))
    assert r.code == 3 and "cannot reach" in r.err


@pytest.mark.parametrize("registry_host", ["127.0.0.1:5000", "localhost:5000", "[::1]:5000", "127.0.1.1:5000"])
def test_a_loopback_registry_is_a_warning_where_the_image_is_shown(cli, write_yaml, registry_host):
    path = write_yaml(container_profile(f"{registry_host}/team/train:v1@sha256:{'2' * 64}"))
    where = f"{path}:{_image_line(path)}: stack.container.image: "
    for args in (("validate",), ("plan",), ("render", "--cloud", "gcp")):
        r = offline(cli, args[0], str(path), *args[1:])
        assert r.code == 0, (args, r.err)
        assert f"{where}{registry_host} is this workstation's loopback address: a VM cannot pull from it" in r.err, (args, r.err)
    r = offline(cli, "validate", str(write_yaml(container_profile(f"nvcr.io/nvidia/pytorch:24.08-py3@sha256:{'2' * 64}"), name="ngc.yaml")))
    assert r.code == 0 and "loopback address" not in r.err
