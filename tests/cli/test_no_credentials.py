"""A cloud command without credentials for any cloud, off-cloud, asks no instance metadata server (issue 30: "every
cloud command takes 4-5 s to say 'no credentials'"), and on a cloud VM its own metadata server still is asked.

The metadata servers are stood in for by sockets on loopback, reached through each SDK's own setting
(``GCE_METADATA_IP``/``GCE_METADATA_HOST`` for google-auth, ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` for botocore,
``AZURE_POD_IDENTITY_AUTHORITY_HOST`` for azure-identity's IMDS credential). The "blackhole" accepts and never answers,
as 169.254.169.254 behaves where its packets are dropped: every connection it accepts is a probe that would have
waited its timeout. Whether this machine is a cloud VM comes from its DMI strings, a folder written per test
(``host.DMI``). No timing is asserted; bench/startup.py prints the whole-process figures."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from provisioner.errors import InputError
from provisioner.providers import host
from provisioner.providers.aws import api as aws_api

AZURE_TAG = host.AZURE_CHASSIS_ASSET_TAG


def dmi(tmp_path: Path, **fields: str) -> Path:
    folder = tmp_path / "dmi"
    folder.mkdir(exist_ok=True)
    for name, value in fields.items():
        (folder / name).write_text(value + "\n")
    return folder


@pytest.mark.parametrize("fields, uuid, cloud", [
    ({"product_name": "Google Compute Engine", "sys_vendor": "Google", "bios_vendor": "Google"}, "", "gcp"),
    ({"product_name": "Virtual Machine", "sys_vendor": "Microsoft Corporation", "chassis_asset_tag": AZURE_TAG}, "", "azure"),
    ({"product_name": "g5.xlarge", "sys_vendor": "Amazon EC2", "bios_vendor": "Amazon EC2"}, "", "aws"),
    ({"product_name": "HVM domU", "sys_vendor": "Xen", "bios_version": "4.11.amazon"}, "", "aws"),
    ({"product_name": "HVM domU", "sys_vendor": "Xen"}, "ec2e1916-9099-7caf-fd21-012345abcdef", "aws"),
    # a Hyper-V VM on a workstation: Microsoft's strings, another asset tag
    ({"product_name": "Virtual Machine", "sys_vendor": "Microsoft Corporation",
      "chassis_asset_tag": "5261-2476-0073-4314-9745-6956-37"}, "", None),
    ({"product_name": "ThinkPad X1 Carbon", "sys_vendor": "LENOVO", "bios_vendor": "LENOVO"}, "", None),
    ({"product_name": "HVM domU", "sys_vendor": "Xen"}, "5a1e6f1c-0000-0000-0000-000000000000", None),
    ({}, "", None),  # no DMI at all (macOS, a container without /sys)
])
def test_the_host_cloud_comes_from_the_dmi_strings(tmp_path, fields, uuid, cloud):
    hyp = tmp_path / "hypervisor-uuid"
    if uuid:
        hyp.write_text(uuid + "\n")
    assert host.host_cloud(dmi(tmp_path, **fields), hyp) == cloud


@pytest.mark.parametrize("mode, product, probed", [
    (None, "Google Compute Engine", {"gcp"}),
    (None, "ThinkPad X1 Carbon", set()),
    ("auto", "Google Compute Engine", {"gcp"}),
    ("always", "ThinkPad X1 Carbon", {"gcp", "azure", "aws"}),
    ("never", "Google Compute Engine", set()),
])
def test_only_the_cloud_the_dmi_names_is_probed_unless_the_setting_says(tmp_path, monkeypatch, mode, product, probed):
    monkeypatch.setattr(host, "DMI", dmi(tmp_path, product_name=product))
    monkeypatch.setattr(host, "HYPERVISOR_UUID", tmp_path / "none")
    if mode is None:
        monkeypatch.delenv("TRAINVM_METADATA_PROBE", raising=False)
    else:
        monkeypatch.setenv("TRAINVM_METADATA_PROBE", mode)
    assert {c for c in ("gcp", "azure", "aws") if host.probe_metadata(c)} == probed


def test_a_bad_probe_setting_is_an_input_error(monkeypatch):
    monkeypatch.setenv("TRAINVM_METADATA_PROBE", "sometimes")
    with pytest.raises(InputError, match="TRAINVM_METADATA_PROBE='sometimes' is not one of auto, always, never"):
        host.probe_metadata("gcp")


class Blackhole:
    """Accepts connections on loopback and never answers (each one is counted)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.sock.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def no_credentials(tmp_path, monkeypatch) -> Iterator[Blackhole]:
    """No credentials for any cloud; every cloud's metadata server is the blackhole; AZURE_SUBSCRIPTION_ID set, so
    that Azure's credential chain runs too (it needs the subscription first)."""
    hole = Blackhole()
    at = f"127.0.0.1:{hole.port}"
    for var in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "TRAINVM_GCE_ENDPOINT", "TRAINVM_AZURE_ENDPOINT",
                "TRAINVM_AWS_ENDPOINT", "TRAINVM_AZURE_ACCESS_TOKEN", "AWS_EC2_METADATA_DISABLED", "AZURE_CLIENT_ID",
                "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_TOKEN_CREDENTIALS", "TRAINVM_METADATA_PROBE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no gcloud ADC file
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.azure, ~/.config/gcloud
    monkeypatch.setenv("GCE_METADATA_IP", at)
    monkeypatch.setenv("GCE_METADATA_HOST", at)
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://{at}/")
    monkeypatch.setenv("AWS_METADATA_SERVICE_TIMEOUT", "1")
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", f"http://{at}")
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", "00000000-0000-0000-0000-000000000000")
    monkeypatch.setenv("TRAINVM_AWS_REGIONS", "us-east-1")
    monkeypatch.setattr(aws_api, "_SESSION", [])  # the per-process boto3 session is built under this environment
    monkeypatch.setattr(host, "HYPERVISOR_UUID", tmp_path / "no-hypervisor-uuid")
    yield hole
    hole.close()


@pytest.mark.parametrize("argv", [["list", "--cloud", "gcp"], ["list", "--cloud", "aws"], ["status", "some-vm"], ["down", "some-vm", "--yes"]])
def test_off_cloud_a_command_without_credentials_asks_no_metadata_server(cli, tmp_path, monkeypatch, no_credentials, argv):
    monkeypatch.setattr(host, "DMI", dmi(tmp_path, product_name="ThinkPad X1 Carbon", sys_vendor="LENOVO"))
    r = cli(*argv)
    # `status NAME` also looks on the local cloud, which needs no credentials: not found there (4), and the other
    # clouds named as not looked at for want of credentials
    assert r.code == (4 if argv[0] == "status" else 3), r.err
    assert "no" in r.err and "credentials" in r.err
    assert argv[0] != "status" or "not looked for on: gcp" in r.err
    assert len(no_credentials.accepted) == 0


def test_on_ec2_the_instance_role_is_still_looked_for(cli, tmp_path, monkeypatch, no_credentials):
    """The on-VM path is kept: with the DMI of an EC2 instance, botocore's instance-metadata provider asks IMDS
    (here the blackhole, within AWS_METADATA_SERVICE_TIMEOUT)."""
    monkeypatch.setattr(host, "DMI", dmi(tmp_path, product_name="g5.xlarge", sys_vendor="Amazon EC2"))
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID")
    r = cli("list", "--cloud", "aws")
    assert r.code == 3 and "no AWS credentials found" in r.err
    assert len(no_credentials.accepted) >= 1


class _MetadataServer(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.seen.append(self.path)
        body = b"vm-project" if self.path.endswith("/project/project-id") else b"ok"
        self.send_response(200)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", "application/text")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_on_gce_the_metadata_server_gives_the_credentials(tmp_path, monkeypatch, no_credentials):
    """The on-VM path is kept: with the DMI of a GCE VM, google.auth.default pings the metadata server and takes
    its service-account credentials. google-auth reads the metadata host for the project lookup once, at import
    (``_metadata._GCE_METADATA_HOST``), so the test sets that attribute as well as the environment."""
    from google.auth import compute_engine
    from google.auth.compute_engine import _metadata

    from provisioner.providers.gcp.provider import GcpProvider

    server = ThreadingHTTPServer(("127.0.0.1", 0), _MetadataServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    at = f"127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("GCE_METADATA_IP", at)
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", at)
    monkeypatch.setattr(host, "DMI", dmi(tmp_path, product_name="Google Compute Engine", bios_vendor="Google"))
    _MetadataServer.seen = []
    try:
        provider = GcpProvider()
    finally:
        server.shutdown()
        server.server_close()
    assert isinstance(provider._credentials, compute_engine.Credentials)
    assert provider.project == "vm-project"
    assert "/" in _MetadataServer.seen
