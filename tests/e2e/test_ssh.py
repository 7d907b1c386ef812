"""`trainvm ssh NAME [-- CMD...]` against the emulators through the real providers: the command line it
execs (a fake `ssh` / `gcloud` first on PATH records its argv), and what it says when SSH is closed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import payload_stores

REPO = Path(__file__).resolve().parents[2]

from tests.emulators.arm import ArmEmulator  # noqa: E402
from tests.emulators.gce import GceEmulator  # noqa: E402

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHtrainvmTestKeyOnlyForTheEmulator0000000 tester@example"


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    for var in ("TRAINVM_GCE_ENDPOINT", "GOOGLE_CLOUD_PROJECT", "AZURE_SUBSCRIPTION_ID", "TRAINVM_AZURE_ENDPOINT",
                "TRAINVM_AZURE_ACCESS_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "id_test.pub").write_text(SSH_KEY + "\n")
    (tmp_path / "id_test").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n(test)\n")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(tmp_path / "id_test.pub"))
    payload_stores(monkeypatch)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("ssh", "gcloud"):  # record argv as JSON, exit 7 so the exit status is seen to pass through
        fake = bindir / tool
        fake.write_text(f"#!{sys.executable}\nimport json, sys\n"
                        f"open({str(tmp_path / (tool + '.argv'))!r}, 'w').write(json.dumps(sys.argv))\nsys.exit(7)\n")
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    # in-process tests cannot let execvp replace pytest: run the same argv as a child instead
    monkeypatch.setattr("provisioner.commands.ssh._exec", lambda argv: sys.exit(subprocess.run(argv).returncode))
    monkeypatch.setattr("provisioner.commands.ssh.port_open", lambda host, port=22, timeout=5.0: True)
    return tmp_path


def _argv(tmp: Path, tool: str) -> list[str]:
    return json.loads((tmp / f"{tool}.argv").read_text())


def test_azure_ssh_uses_the_admin_user_key_and_address(cli, env, monkeypatch) -> None:
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        local = env / "t4-no-gs.yaml"  # gs:// data rules Azure out (data locality): the same profile without it
        local.write_text(f"name: bert-finetune\nextends: {T4}\ndata: []\n")
        up = cli("up", str(local), "--yes", "--json", "--cloud", "azure")
        assert up.code == 0, up.err
        name, ip = up.json()["name"], up.json()["ip"]
        r = cli("ssh", name, "--", "nvidia-smi", "-L")
        assert r.code == 7, r.err
        argv = _argv(env, "ssh")
        assert argv[1:] == ["-o", "StrictHostKeyChecking=accept-new", "-i", str(env / "id_test"), "-o",
                            "IdentitiesOnly=yes", f"trainvm@{ip}", "--", "nvidia-smi", "-L"]
        monkeypatch.setattr("provisioner.commands.ssh.port_open", lambda host, port=22, timeout=5.0: False)
        closed = cli("ssh", name)
        assert closed.code == 1 and f"SSH (tcp:22) on {name} ({ip}) did not answer" in closed.err
        assert "az network nsg rule create" in closed.err and f"--nsg-name {name}-nsg" in closed.err
        cli("down", name, "--yes")


def test_gce_ssh_goes_through_gcloud(cli, env, monkeypatch) -> None:
    with GceEmulator() as emu:
        monkeypatch.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        up = cli("up", T4, "--yes", "--json", "--cloud", "gcp")
        assert up.code == 0, up.err
        name, zone = up.json()["name"], up.json()["zone"]
        assert cli("ssh", name).code == 7
        assert _argv(env, "gcloud")[1:] == ["compute", "ssh", name, "--zone", zone, "--project", "e2e-proj"]
        monkeypatch.setattr("provisioner.commands.ssh.port_open", lambda host, port=22, timeout=5.0: False)
        closed = cli("ssh", name, "--", "uptime")
        assert closed.code == 1 and "gcloud compute firewall-rules create" in closed.err
