"""The VM side of Azure payload delivery: templates/bootstrap/fetch-azure.sh's ``tv_fetch URL OUT`` in real bash with
real curl, against Azurite over HTTPS (``CURL_CA_BUNDLE`` = the tests' trustme CA) with a loopback IMDS token
endpoint (tests/emulators/imds_azure.py) standing in for 169.254.169.254. The return codes are the contract of
templates/bootstrap/README.md.

What the fakes do not model: Azurite checks a Bearer token's audience, issuer and expiry but not its signature
nor any permission (no RBAC: an identity without Storage Blob Data Reader would get 403 from Azure but 200 from
Azurite, so rc 3 is shown here with tokens Azurite itself refuses: expired, wrong audience); role-assignment
propagation delay; IMDS rate limits. The token's absence from argv is checked through a curl wrapper that logs
the arguments of every curl run (ps would race)."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from provisioner.providers.azure.store import CONTAINER, account_name
from tests.emulators.arm import DEFAULT_SUBSCRIPTION as SUB
from tests.emulators.imds_azure import Imds

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "templates" / "bootstrap" / "fetch-azure.sh"
ACCOUNT = account_name(SUB, "eastus")


@pytest.fixture(scope="module")
def blob(azurite, tls_ca, tmp_path_factory):
    """One payload-like blob in Azurite (uploaded with the shared key) and its URL; the CA file curl trusts."""
    from azure.core.exceptions import ResourceExistsError

    ca = tmp_path_factory.mktemp("ca") / "ca.pem"
    tls_ca.cert_pem.write_to_path(str(ca))
    svc = azurite.service(ACCOUNT, str(ca))
    try:
        svc.create_container(CONTAINER)
    except ResourceExistsError:
        pass
    data = os.urandom(70_000)
    key = f"payloads/{hashlib.sha256(data).hexdigest()}.tar.gz"
    svc.get_blob_client(CONTAINER, key).upload_blob(data, overwrite=True)
    return {"url": f"{azurite.url}/{ACCOUNT}/{CONTAINER}/{key}", "data": data, "ca": str(ca), "base": azurite.url}


@pytest.fixture
def curl_log(tmp_path):
    """A ``curl`` first on PATH that appends its arguments to a log, then runs the real curl."""
    real = shutil.which("curl")
    assert real, "curl is needed on this machine"
    bindir, log = tmp_path / "bin", tmp_path / "curl-argv.log"
    bindir.mkdir()
    (bindir / "curl").write_text(f'#!/bin/bash\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    (bindir / "curl").chmod(0o755)
    return bindir, log


def fetch(url, out, *, md, ca, curl_log):
    bindir, _ = curl_log
    env = {**os.environ, "TV_MD": md, "CURL_CA_BUNDLE": ca, "PATH": f"{bindir}:{os.environ['PATH']}"}
    script = f'set -euo pipefail\nsource "{FETCH}"\nrc=0\ntv_fetch "$1" "$2" || rc=$?\necho "rc=$rc"\n'
    p = subprocess.run(["bash", "-c", script, "fetch", url, str(out)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.strip().rsplit("rc=", 1)[1]), p.stdout + p.stderr


def assert_secret_kept(imds, output, curl_log):
    _, log = curl_log
    argv = log.read_text()
    assert argv.count("\n") >= 1  # the wrapper did run: a check that can fail
    for token in imds.tokens:
        for part in (token, token.split(".")[2]):
            assert part not in argv and part not in output


def test_shellcheck_passes():
    sc = shutil.which("shellcheck") or str(Path(os.sys.executable).parent / "shellcheck")
    p = subprocess.run([sc, "-s", "bash", str(FETCH)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_200_writes_the_body(blob, tmp_path, curl_log):
    out = tmp_path / "payload.tar.gz"
    with Imds() as md:
        rc, output = fetch(blob["url"], out, md=md.url, ca=blob["ca"], curl_log=curl_log)
        assert rc == 0, output
        assert out.read_bytes() == blob["data"]
        (path, headers), = [r for r in md.requests if "/identity/" in r[0]]
        assert headers.get("Metadata") == "true" and "msi_res_id" not in path  # no tag: the system identity
        assert "resource=https%3A%2F%2Fstorage.azure.com%2F" in path and "api-version=2018-02-01" in path
        assert_secret_kept(md, output, curl_log)
        assert len(md.tokens) == 1


def test_404_is_4(blob, tmp_path, curl_log):
    out = tmp_path / "missing"
    with Imds() as md:
        rc, output = fetch(blob["url"].replace("payloads/", "payloads/0"), out, md=md.url, ca=blob["ca"],
                           curl_log=curl_log)
        assert rc == 4, output
        assert "404" in output and not out.exists()
        assert_secret_kept(md, output, curl_log)


@pytest.mark.parametrize("mode", ["expired", "audience"])
def test_a_token_azurite_refuses_is_3(blob, tmp_path, curl_log, mode):
    out = tmp_path / "refused"
    with Imds(mode) as md:
        rc, output = fetch(blob["url"], out, md=md.url, ca=blob["ca"], curl_log=curl_log)
        assert rc == 3, output
        assert "refused" in output and not out.exists()
        assert_secret_kept(md, output, curl_log)


def test_imds_without_identity_is_3(blob, tmp_path, curl_log):
    with Imds("no_identity") as md:
        rc, output = fetch(blob["url"], tmp_path / "x", md=md.url, ca=blob["ca"], curl_log=curl_log)
    assert rc == 3, output
    assert "HTTP 400" in output and output.count("tv_fetch:") == 1


def test_imds_busy_or_down_is_2(blob, tmp_path, curl_log):
    with Imds("busy") as md:
        rc, output = fetch(blob["url"], tmp_path / "x", md=md.url, ca=blob["ca"], curl_log=curl_log)
    assert rc == 2, output
    rc, output = fetch(blob["url"], tmp_path / "x", md=f"http://127.0.0.1:{free_port()}", ca=blob["ca"],
                       curl_log=curl_log)
    assert rc == 2 and "did not answer" in output


def test_blob_service_down_is_2(blob, tmp_path, curl_log):
    url = blob["url"].replace(blob["base"], f"https://127.0.0.1:{free_port()}")
    with Imds() as md:
        rc, output = fetch(url, tmp_path / "x", md=md.url, ca=blob["ca"], curl_log=curl_log)
        assert rc == 2, output
        assert "did not answer" in output and not (tmp_path / "x").exists()
        assert_secret_kept(md, output, curl_log)


def free_port() -> int:
    with socket.socket() as s:  # bound then closed: nobody listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------- user-assigned identity
ADMIN_ID = (f"/subscriptions/{SUB}/resourceGroups/ops/providers/Microsoft.ManagedIdentity/userAssignedIdentities/"
            "trainvm-vms")
POLICY_ID = ADMIN_ID.replace("trainvm-vms", "monitoring-agent")  # e.g. one Azure Policy attaches to every VM


def test_user_assigned_identity_named_by_the_vm_tag(blob, tmp_path, curl_log):
    """placement.identity.azure: the VM has no system identity and two user-assigned ones (the administrator's and
    one a policy attached). The fetch reads the tag trainvm-identity from IMDS and asks for that identity's token
    (msi_res_id); IMDS would refuse a token request that names none."""
    out = tmp_path / "payload.tar.gz"
    with Imds(identities={"system": False, "user": [POLICY_ID, ADMIN_ID]},
              tags={"trainvm-managed": "true", "trainvm-identity": ADMIN_ID}) as md:
        rc, output = fetch(blob["url"], out, md=md.url, ca=blob["ca"], curl_log=curl_log)
        assert rc == 0, output
        assert out.read_bytes() == blob["data"] and md.tokens_for == [ADMIN_ID]
        (path, _), = [r for r in md.requests if "/identity/" in r[0]]
        assert "msi_res_id=" + ADMIN_ID.replace("/", "%2F") in path
        assert_secret_kept(md, output, curl_log)


def test_user_assigned_identities_without_the_tag_are_refused_by_imds(blob, tmp_path, curl_log):
    """The same VM without the tag (what the fetch did before): IMDS cannot tell which identity: rc 3, no token."""
    with Imds(identities={"system": False, "user": [POLICY_ID, ADMIN_ID]}, tags={"trainvm-managed": "true"}) as md:
        rc, output = fetch(blob["url"], tmp_path / "x", md=md.url, ca=blob["ca"], curl_log=curl_log)
    assert rc == 3 and "HTTP 400" in output and md.tokens == []


LIFECYCLE = REPO / "templates" / "files" / "trainvm-lifecycle-azure.sh"


def _lifecycle(tmp_path, md, action="stop"):
    """trainvm-lifecycle-azure.sh in real bash: a curl first on PATH sends the IMDS calls (169.254.169.254) to the
    stub with the real curl and records the Azure Resource Manager call instead of making it (arm.log)."""
    real = shutil.which("curl")
    bindir = tmp_path / "lbin"
    bindir.mkdir()
    arm_log = tmp_path / "arm.log"
    (bindir / "curl").write_text(
        "#!/bin/bash\nargs=()\nfor a in \"$@\"; do\n"
        "  case $a in https://management.azure.com/*) printf '%s\\n' \"$*\" >> " + f'"{arm_log}"' + "; exit 0 ;; esac\n"
        "  args+=(\"${a/http:\\/\\/169.254.169.254/" + md.url.replace("/", "\\/") + "}\")\n"
        "done\nexec " + f'"{real}"' + " \"${args[@]}\"\n")
    (bindir / "curl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    p = subprocess.run(["bash", str(LIFECYCLE), action, "idle"], env=env, capture_output=True, text=True, timeout=60)
    return p, (arm_log.read_text() if arm_log.exists() else "")


def test_lifecycle_deallocates_with_the_user_assigned_identity(tmp_path):
    vm_id = f"/subscriptions/{SUB}/resourceGroups/trainvm-box/providers/Microsoft.Compute/virtualMachines/box"
    with Imds(identities={"system": False, "user": [POLICY_ID, ADMIN_ID]},
              tags={"trainvm-identity": ADMIN_ID}) as md:
        md.resource_id = vm_id
        p, arm = _lifecycle(tmp_path, md)
        assert p.returncode == 0, p.stderr
        assert md.tokens_for == [ADMIN_ID]
        (path, _), = [r for r in md.requests if "/identity/" in r[0]]
        assert "resource=https%3A%2F%2Fmanagement.azure.com%2F" in path and "msi_res_id=" in path
        assert f"{vm_id}/deallocate" in arm and "-X POST" in arm


def test_lifecycle_with_the_system_identity_names_none(tmp_path):
    vm_id = f"/subscriptions/{SUB}/resourceGroups/trainvm-box/providers/Microsoft.Compute/virtualMachines/box"
    with Imds(tags={"trainvm-managed": "true"}) as md:
        md.resource_id = vm_id
        p, arm = _lifecycle(tmp_path, md)
        assert p.returncode == 0, p.stderr
        assert md.tokens_for == ["system"] and f"{vm_id}/deallocate" in arm
        assert not any("msi_res_id" in r[0] for r in md.requests)
