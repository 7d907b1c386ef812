"""capture --container IMAGE: the host probe plus the image pinned by digest (from docker here, or the registry)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.container.registry_server import NGC_ENV, push_image

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "probe" / "report-vm-t4.json"


@pytest.fixture
def probed(monkeypatch):
    report = json.loads(FIXTURE.read_text())
    report.update(source="local", driver="550.127.05")
    monkeypatch.setattr("provisioner.probe.report.probe", lambda **kw: report)
    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)
    return report


def test_capture_container_pins_the_registry_digest_and_warns_about_forward_compat(cli, registry, probed, monkeypatch, tmp_path):
    pushed = push_image(registry, "nvidia/pytorch", "24.08-py3", NGC_ENV, seed="capture")
    monkeypatch.setenv("TRAINVM_INSECURE_REGISTRIES", registry.host)
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker on this machine
    out = tmp_path / "ws.yaml"
    r = cli("capture", "--container", f"{registry.host}/nvidia/pytorch:24.08-py3", "-o", str(out), "--name", "ws")
    assert r.code == 0, r.err
    text = out.read_text()
    assert f"image: {registry.host}/nvidia/pytorch:24.08-py3@{pushed.digest}" in text
    assert "python:" not in text and "packages:" not in text
    # driver 550 < 560.28.03 (CUDA 12.6 GA): the workstation runs the image in forward-compatibility mode
    assert "relies on forward compatibility" in r.err
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    v = cli("validate", str(out), "--json")
    assert v.code == 0, v.out  # offline: the facts were recorded by digest


def test_capture_container_uses_the_digest_docker_recorded(cli, probed, monkeypatch, tmp_path):
    digest = "sha256:" + "d" * 64
    bindir = tmp_path / "bin"
    bindir.mkdir()
    docker = bindir / "docker"
    docker.write_text("#!/bin/sh\n" f"echo '[{{\"RepoDigests\": [\"nvcr.io/nvidia/pytorch@{digest}\"]}}]'\n")
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    from provisioner.container import registry

    def unreachable(image, **kw):
        raise registry.RegistryError(f"cannot reach {image}: no network in this test")

    monkeypatch.setattr(registry, "resolve_image", unreachable)
    out = tmp_path / "ws.yaml"
    r = cli("capture", "--container", "127.0.0.1:9/nvidia/pytorch:24.08-py3", "-o", str(out))
    assert r.code == 0, r.err
    # docker's digest is for nvcr.io, not this registry: not taken; the tag stays and up would refuse it
    assert "no digest known" in r.err
    r = cli("capture", "--container", "nvcr.io/nvidia/pytorch:24.08-py3", "-o", str(out))
    assert f"image: nvcr.io/nvidia/pytorch:24.08-py3@{digest}" in out.read_text()
