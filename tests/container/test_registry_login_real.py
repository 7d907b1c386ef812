"""The VM's registry login against a real registry: Debian's ``docker-registry`` (the CNCF distribution server) on
127.0.0.1 with htpasswd (bcrypt) auth. The on-VM helper (templates/files/trainvm_helper.py, as the startup script writes
it) runs under real bash and writes the private docker config from a ``secret://`` value (read through the stub world's
Secret Manager, tests/stubharness/pyfake); then curl uses that config the way docker's client does: the ``auth`` of the
registry's key in ``auths``, sent as Basic credentials after the /v2/ challenge, for the manifest by digest.

Not modelled: docker itself (no daemon here: the pull's layers, docker's credential helpers, docker's printing of the
registry's error as ``code: message``, which the phase's classifier reads; the stub-harness tests feed it docker's
words), TLS (the registry is plain http on loopback), and token-auth registries (tests/container/test_registry.py
covers the bearer flow for the resolver)."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from tests.container.registry_server import NGC_ENV, push_image, start_registry
from tests.helpers import REPO

USER, PASSWORD = "robot", "Pa55-registry-test-only"


@pytest.fixture(scope="module")
def htpasswd_registry(tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # bcrypt ($2b$) through libcrypt: what the distribution server's htpasswd accepts

        hashed = crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH))
    tmp = tmp_path_factory.mktemp("htpasswd-registry")
    (tmp / "htpasswd").write_text(f"{USER}:{hashed}\n")
    reg = start_registry(tmp, {"htpasswd": {"realm": "trainvm-test", "path": str(tmp / "htpasswd")}})
    reg.session.auth = (USER, PASSWORD)
    pushed = push_image(reg, "team/train", "v1", NGC_ENV, index=False, seed="login")
    reg.session.auth = None
    yield reg, pushed
    reg.stop()


# What docker's client does with DOCKER_CONFIG/config.json for a registry that answers /v2/ with a Basic challenge.
PULL = r'''
set -euo pipefail
auth=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["auths"][sys.argv[2]]["auth"])' "$DOCKER_CONFIG/config.json" "$HOST")
challenge=$(curl -s -o /dev/null -D - "http://$HOST/v2/" | tr -d '\r' | sed -n 's/^[Ww]ww-[Aa]uthenticate: //p')
case $challenge in Basic*) ;; *) echo "unexpected challenge: $challenge" >&2; exit 2 ;; esac
curl -s -w '\n%{http_code}\n' -H "Authorization: Basic $auth" \
  -H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' \
  "http://$HOST/v2/$REPO/manifests/$DIGEST"
'''


def login_then_pull(tmp_path: Path, host: str, secret_value: str, digest: str, repo: str = "team/train") -> tuple[int, str, str]:
    root = tmp_path / "root"
    state = root / "var/lib/trainvm"
    state.mkdir(parents=True, exist_ok=True)
    (state / "expected.json").write_text("{}")
    stub = tmp_path / "stub"
    stub.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "TRAINVM_ROOT": str(root), "STUB_STATE": str(stub),
           "PYTHONPATH": str(REPO / "tests/stubharness/pyfake"), "STUB_SECRETS": json.dumps({"gcp/registry": secret_value})}
    helper = REPO / "templates/files/trainvm_helper.py"
    login = subprocess.run(["bash", "-c", 'python3 "$1" registry-login secret "$2" secret://gcp/registry', "-", str(helper), host],
                           env=env, capture_output=True, text=True, timeout=60)
    assert login.returncode == 0, login.stderr
    assert secret_value not in login.stdout + login.stderr
    folder = state / "registry-auth"
    assert folder.stat().st_mode & 0o777 == 0o700 and (folder / "config.json").stat().st_mode & 0o777 == 0o600
    pull = subprocess.run(["bash", "-c", PULL], env={"PATH": os.environ["PATH"], "DOCKER_CONFIG": str(folder), "HOST": host,
                                                     "REPO": repo, "DIGEST": digest}, capture_output=True, text=True, timeout=60)
    body, _, status = pull.stdout.rstrip("\n").rpartition("\n")
    return int(status or 0), body, pull.stderr


def test_the_login_written_from_a_secret_pulls_the_manifest_from_an_htpasswd_registry(htpasswd_registry, tmp_path):
    reg, pushed = htpasswd_registry
    status, body, err = login_then_pull(tmp_path, reg.host, f"{USER}:{PASSWORD}", pushed.digest)
    assert status == 200, (body, err)
    import hashlib

    assert "sha256:" + hashlib.sha256(body.encode()).hexdigest() == pushed.digest


def test_a_wrong_password_is_the_registrys_unauthorized_and_a_missing_image_its_manifest_unknown(htpasswd_registry, tmp_path):
    """The two causes the container phase tells apart, in the registry's own error codes (docker prints them as
    ``unauthorized: authentication required`` and ``manifest unknown``: the phrases the phase's classifier matches)."""
    reg, pushed = htpasswd_registry
    status, body, _ = login_then_pull(tmp_path, reg.host, f"{USER}:not-the-password", pushed.digest)
    assert status == 401
    [error] = json.loads(body)["errors"]
    assert (error["code"], error["message"]) == ("UNAUTHORIZED", "authentication required")
    status, body, _ = login_then_pull(tmp_path, reg.host, f"{USER}:{PASSWORD}", "sha256:" + "e" * 64)
    assert status == 404
    assert json.loads(body)["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    phase = (REPO / "templates/phases/_container.sh.j2").read_text()
    assert '*"unauthorized"*' in phase and '*"manifest unknown"*' in phase and '*"MANIFEST_UNKNOWN"*' in phase
