"""The payload end to end on GCE, everything real but the VM: `trainvm up` (CLI, google-cloud-compute against the
GCE emulator) stages the payload in GCS (google-cloud-storage against gcp-storage-emulator) and creates the VM with
the bootstrap as its startup-script; the bootstrap from that metadata then runs as the VM would run it (real bash,
curl, sha256sum, tar and the real fetch-gcp.sh) with a metadata-server stub handing out a token; its console goes
to the VM's serial port, where `trainvm verify` reads it.

What is not modelled: the VM itself (the bootstrap runs under TRAINVM_ROOT on this machine and stops before it
execs the payload's startup script, which the stub harness and the real-OS lane run), GCS's token and IAM checks
(the emulator checks none), the guest agent that runs startup-script."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers import REPO, gce_cli_env

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


@pytest.fixture
def gce(monkeypatch, tmp_path):
    yield from gce_cli_env(monkeypatch, tmp_path)


@pytest.fixture
def metadata():
    """GCE's metadata server as far as the fetch uses it: a token, only with Metadata-Flavor: Google."""

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            ok = self.headers.get("Metadata-Flavor") == "Google" and self.path.endswith("/service-accounts/default/token")
            body = json.dumps({"access_token": "ya29.stub-token", "expires_in": 3599, "token_type": "Bearer"}).encode()
            self.send_response(200 if ok else 403)
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _boot(bootstrap: str, root, md: str) -> subprocess.CompletedProcess[str]:
    """The bootstrap as the VM runs it, up to the exec of the payload's script (left out: see the module docstring)."""
    assert bootstrap.rstrip().endswith('exec "$TV_ROOT/usr/local/sbin/trainvm-provision"')
    script = bootstrap.rstrip().rsplit("\n", 1)[0] + "\necho BOOTSTRAP-DONE\n"
    env = {"PATH": os.environ["PATH"], "TRAINVM_ROOT": str(root), "TRAINVM_METADATA_URL": md,
           "TRAINVM_RETRY_SLEEP": "0", "TRAINVM_FETCH_SECONDS": "0", "LC_ALL": "C"}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)


def test_up_stages_the_payload_the_vm_fetches_it_and_verify_names_a_tampered_one(cli, gce, metadata, tmp_path):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    up = cli("up", T4, "--yes", "--json", "--cloud", "gcp")
    assert up.code == 0, up.err
    doc = up.json()
    name, payload = doc["name"], doc["summary"]["payload"]
    assert payload["uploaded"] and payload["sha256"] in payload["url"]
    inst = gce.instance(name)
    items = {i["key"]: i["value"] for i in inst["metadata"]["items"]}
    bootstrap = items["startup-script"]
    assert f"TV_SHA256='{payload['sha256']}'" in bootstrap and inst["labels"]["trainvm-payload"] == payload["sha256"][:16]
    # the VM's first boot: fetched with the token, verified, unpacked, the script installed
    root = tmp_path / "vm"
    root.mkdir()
    r = _boot(bootstrap, root, metadata)
    assert r.returncode == 0 and "BOOTSTRAP-DONE" in r.stdout, r.stderr
    assert f"payload {payload['sha256']} fetched" in r.stderr
    assert (root / "opt/trainvm/current/startup.sh").read_bytes() == (root / "usr/local/sbin/trainvm-provision").read_bytes()
    assert (root / "opt/trainvm/current/agent/provisioner/agent/__main__.py").exists()
    # someone replaces the stored object: a fresh VM refuses it, and verify says so
    gcs = storage.Client(project="e2e-proj", credentials=AnonymousCredentials(),
                         client_options={"api_endpoint": os.environ["TRAINVM_GCS_ENDPOINT"]})
    bucket = payload["location"]
    gcs.bucket(bucket).blob(f"payloads/{payload['sha256']}.tar.gz").upload_from_string(b"not the payload")
    fresh = tmp_path / "vm2"
    fresh.mkdir()
    bad = _boot(bootstrap, fresh, metadata)
    assert bad.returncode == 1 and "BOOTSTRAP-DONE" not in bad.stdout and not (fresh / "opt/trainvm/current").exists()
    gce.play_serial(name, [bad.stdout])
    v = cli("verify", name, "--json")
    assert v.code == 1, v.out + v.err
    vdoc = v.json()
    assert (vdoc["status"], vdoc["phase"]) == ("failed", "bootstrap") and "payload hash mismatch" in vdoc["message"]
    # the first VM restarts after the object is gone: its verified copy serves, nothing is fetched
    gcs.bucket(bucket).blob(f"payloads/{payload['sha256']}.tar.gz").delete()
    again = _boot(bootstrap, root, "http://127.0.0.1:9")
    assert again.returncode == 0 and "already on disk: nothing fetched" in again.stderr
    gone = cli("down", name, "--yes", "--json").json()
    assert gone["deleted"] and gone["payload"]["state"] == "gone"  # deleted above: down finds nothing to remove
