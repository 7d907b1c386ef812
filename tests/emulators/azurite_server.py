"""Azurite (Microsoft's Azure Storage emulator, npm ``azurite``) as the Blob service of the payload-store tests.

Installed by ``make install-dev`` (``npm ci`` in tests/emulators/azurite from its package-lock.json, into the
git-ignored node_modules there). Started on 127.0.0.1, a port the OS picks (``--blobPort 0``; the real one is
read from Azurite's "successfully listens on" line), over HTTPS with a certificate from the tests' trustme CA,
``--oauth basic`` so that Bearer tokens are accepted, in memory (``--inMemoryPersistence``), with
``--skipApiVersionCheck`` (azure-storage-blob may send an x-ms-version newer than this Azurite knows).
Accounts come from ``AZURITE_ACCOUNTS`` (``name:base64key;...``) and are reached path-style:
``https://127.0.0.1:PORT/<account>/<container>/<blob>``.

What Azurite checks and does not (its README; BlobTokenAuthenticator in the installed package): SharedKey
signatures are verified; a Bearer token is only decoded: ``nbf``/``exp``, an issuer starting with
``https://sts.windows.net/`` (or the sovereign clouds'), an audience ``https://storage.azure.com[/]``,
``https://<account>.blob.core.windows.net`` or the storage app id. It does NOT check the token's signature or any
permission: there is no RBAC, so "the identity has no Storage Blob Data Reader" cannot be reproduced, nor role
propagation delay.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "azurite"
BIN = HERE / "node_modules" / ".bin" / "azurite-blob"
READY = re.compile(r"successfully listens on (https://127\.0\.0\.1:\d+)")


class AzuriteNotInstalled(RuntimeError):
    pass


class Azurite:
    """``with Azurite(ca, {"acct": key}) as az: az.url`` (``https://127.0.0.1:PORT``)."""

    def __init__(self, ca, accounts: dict[str, str], *, start_timeout: float = 30.0):
        self.ca, self.accounts, self.start_timeout = ca, dict(accounts), start_timeout
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self._tmp = ""

    def start(self) -> Azurite:
        if not BIN.exists():
            raise AzuriteNotInstalled(f"{BIN} is missing: run `make install-dev` (npm ci in {HERE})")
        self._tmp = tempfile.mkdtemp(prefix="azurite-")
        cert = self.ca.issue_cert("127.0.0.1", "localhost")
        cert.private_key_pem.write_to_path(f"{self._tmp}/key.pem")
        cert.cert_chain_pems[0].write_to_path(f"{self._tmp}/cert.pem")
        log = Path(self._tmp) / "azurite.log"
        env = {**os.environ, "AZURITE_ACCOUNTS": ";".join(f"{n}:{k}" for n, k in self.accounts.items())}
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(BIN), "--blobHost", "127.0.0.1", "--blobPort", "0", "--cert", f"{self._tmp}/cert.pem",
                 "--key", f"{self._tmp}/key.pem", "--oauth", "basic", "--inMemoryPersistence",
                 "--extentMemoryLimit", "256", "--skipApiVersionCheck", "--disableTelemetry", "--silent"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self._tmp)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            m = READY.search(log.read_text(errors="replace"))
            if m:
                self.url = m.group(1)
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        text = log.read_text(errors="replace")
        self.stop()
        raise RuntimeError(f"Azurite did not start within {self.start_timeout:g} s:\n{text[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = ""

    def __enter__(self) -> Azurite:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def service(self, account: str, ca_path: str):
        """A BlobServiceClient on ``account`` with its shared key (for the tests' own look-ups)."""
        from azure.storage.blob import BlobServiceClient
        return BlobServiceClient(f"{self.url}/{account}", credential={"account_name": account,
                                                                      "account_key": self.accounts[account]},
                                 connection_verify=ca_path, retry_total=0)


_CA = None
_SHARED: Azurite | None = None
_SHARED_CA_FILE = ""


def shared_ca():
    """One trustme CA per test process: the ARM emulator's default, and the shared Azurite's."""
    global _CA
    if _CA is None:
        import trustme

        _CA = trustme.CA()
    return _CA


def shared() -> Azurite:
    """One Azurite per test process for the CLI end-to-end tests (``up`` stages the Azure payload there): an account
    for every Azure region of the embedded catalog on the ARM emulator's default subscription, keyed as the emulator's
    listKeys answers (arm_storage.default_key), each with trainvm's container made (what the store's container PUT
    through ARM does on Azure; the emulator and Azurite are two programs)."""
    global _SHARED, _SHARED_CA_FILE
    if _SHARED is None:
        import csv
        import tempfile
        from pathlib import Path

        import provisioner
        from provisioner.providers.azure.store import CONTAINER, account_name
        from tests.emulators.arm import DEFAULT_SUBSCRIPTION
        from tests.emulators.arm_storage import default_key

        with open(Path(provisioner.__file__).parent / "catalog/data/azure.csv", encoding="utf-8") as fh:
            regions = sorted({row["region"] for row in csv.DictReader(fh)})
        names = [account_name(DEFAULT_SUBSCRIPTION, r) for r in regions]
        az = Azurite(shared_ca(), {n: default_key(n) for n in names}).start()
        ca = tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False)
        ca.write(shared_ca().cert_pem.bytes())
        ca.close()
        _SHARED, _SHARED_CA_FILE = az, ca.name  # known before anything else can fail: stop_shared() ends it
        try:
            for n in names:
                az.service(n, ca.name).create_container(CONTAINER)
        except BaseException:
            stop_shared()
            raise
    return _SHARED


def stop_shared() -> None:
    """Stop this test process's shared Azurite (tests/conftest.py, at the end of the session). Azurite is a node
    process, not a thread: left running, it outlived the test run (one per xdist worker)."""
    global _SHARED, _SHARED_CA_FILE
    if _SHARED is not None:
        _SHARED.stop()
        _SHARED = None
    if _SHARED_CA_FILE:
        Path(_SHARED_CA_FILE).unlink(missing_ok=True)
        _SHARED_CA_FILE = ""
