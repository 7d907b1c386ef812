"""One redactor (issue 37, "Retries ... one redactor"): the workstation's ``provisioner.secrets.redact`` is the code the
VM's console filter runs. The payload ships provisioner/secrets.py in its agent folder, byte for byte, and the helper
(templates/files/trainvm_helper.py), run as on the VM (the image's python3 without site-packages, so nothing but that
folder provides ``provisioner``), redacts every input exactly as the workstation does."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import provisioner.secrets
from provisioner.agent.bundle import bundle_files
from provisioner.secrets import redact
from tests.helpers import REPO

LINES = [
    "curl -o x https://user:hunter2pass@example.com/a.tar",
    "fetch https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4&X-Goog-Signature=deadbeefsig0123",
    "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAEXAMPLEKEY99%2F2026&X-Amz-Signature=ab12",
    "azcopy copy 'https://acct.blob.core.windows.net/c/p?sv=2022&sig=deadbeefsig0123' /mnt",
    "--sas sig=deadbeefsig0123 token=deadbeefsig0123",
    "-H 'Authorization: Bearer eyJhbGciOi.payload.sig'",
    "postgres://admin:hunter2pass@db:5432/x",
    "git clone with ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",  # a GitHub token (split: no secret in this file)
    "export HF_TOKEN=hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "aws key AKIA" + "IOSFODNN7EXAMPLE in a log line",
    "opaque Zx8Kq2Lm9Wv4Rt7Yp3Nb6Hc1Jd5Fg0Sa in a log line",
    "gs://example-ml-data/bert-corpus/ -> /mnt/data/corpus",
    "https://pypi.org/simple",
    "TRAINVM_STATUS=running:data",
    "apt-get -y -q -o DPkg::Lock::Timeout=600 install nvidia-open=550.127.05-0ubuntu1",
    "image sha256:" + "0123456789abcdef" * 4 + " pulled",
]


def test_the_payload_ships_the_workstation_s_redactor_byte_for_byte():
    assert bundle_files()["provisioner/secrets.py"] == Path(provisioner.secrets.__file__).read_bytes()


def test_the_shipped_redactor_is_python_3_8_and_stdlib_only():
    """The VM runs it on the image's python3 (>= 3.8, as the helper): 3.8 grammar, no third-party import."""
    source = bundle_files()["provisioner/secrets.py"].decode()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_the_vm_helper_redacts_exactly_as_the_workstation(tmp_path):
    root = tmp_path / "root"
    for rel, data in bundle_files().items():  # the payload's agent folder, where the helper finds the redactor
        (root / "opt/trainvm/current/agent" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "opt/trainvm/current/agent" / rel).write_bytes(data)
    (root / "var/lib/trainvm").mkdir(parents=True)
    (root / "var/lib/trainvm/expected.json").write_text("{}")  # the manifest every helper command starts from
    helper = tmp_path / "lib/trainvm_helper.py"
    helper.parent.mkdir()
    helper.write_bytes((REPO / "templates/files/trainvm_helper.py").read_bytes())
    proc = subprocess.run([sys.executable, "-S", "-E", str(helper), "redact"], input="\n".join(LINES) + "\n",
                          capture_output=True, text=True, cwd=tmp_path, env={"TRAINVM_ROOT": str(root)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    vm = proc.stdout.splitlines()
    assert "withheld" not in proc.stdout, proc.stdout
    assert vm == [redact(line) for line in LINES]
    assert sum("***" in line for line in vm) == 11  # the credentials above go, the ordinary lines stay
