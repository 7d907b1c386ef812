"""`make demo`: every loopback emulator a README journey needs, in one process, to try the real CLI without a cloud
account (docs/demo.md walks the journeys; tests/e2e/test_demo_journeys.py runs them against this server).

    .venv/bin/python -m tests.emulators.serve [--env-file PATH] [--state-dir DIR]

Served (the same emulators the test suite starts in its fixtures, each saying in its own module what it models and
what it does not):

- GCE: tests/emulators/gce_group.py (Compute over http, with the group engine of clusters: instances.bulkInsert,
  resourcePolicies) and the GCS emulator (tests/emulators/gcs.py) for the payload store; the project's ``CPUS``
  quota raised to 1024 in every region it serves (the emulator starts at 24, as new projects often do: the
  README's 4 x a2-highgpu-1g cluster needs 48).
- Azure: the ARM emulator (tests/emulators/arm.py, https with a throw-away CA; scale sets and proximity placement
  groups included) and Azurite (the Blob service of the payload store, tests/emulators/azurite_server.py: an account
  for each Azure region of the catalog on the emulator's subscription).
- AWS: moto's server for EC2/S3/IAM/SSM/Secrets Manager behind its fault proxy (tests/emulators/aws.py: the public
  AMIs' SSM parameters seeded in AWS_REGIONS, placement groups by aws_placement.py) with EC2's
  vCPU quotas of the G, P and Standard classes at 1024 (tests/emulators/aws_quotas.py).
- The clouds' price APIs for `catalog refresh` (tests/catalog/fake_*.py behind price_server.py), serving the
  embedded catalog's own offers and prices.
- No emulator runs a startup script: a `trainvm bake` builder (``<VM>-bake``, on any of the three) is given the console
  its bake-mode script prints when every install phase succeeds, as tests/bake/ plant it, so that a bake completes.

It prints the environment as ``export ...`` lines and writes them to ``--env-file`` (default
``.venv/demo.env``), for ``source``: the emulators' endpoints, the demo's own cache (``XDG_CACHE_HOME`` in the
state folder, so that a refreshed demo catalog or a demo bake never reaches ``~/.cache/trainvm``), an SSH key made
for the demo, and no waits. State lives in memory; Ctrl-C (or SIGTERM) stops every emulator, Azurite's node
process included, removes the state folder and the env file. Nothing listens beyond 127.0.0.1."""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = "trainvm-demo"
QUOTA = 1024  # vCPUs per region: room for every example profile, the 8 x A100 one included
#: the AWS regions served (their AMIs seeded, listed by `list`/`status`: each region listed costs time): where the
#: examples' cheapest AWS offers are, and a second region to fail over and copy baked AMIs to
AWS_REGIONS = ("us-east-1", "us-east-2", "us-west-2")
DEFAULT_ENV_FILE = REPO / ".venv" / "demo.env"


def catalog_regions(cloud: str) -> list[str]:
    import provisioner

    with open(Path(provisioner.__file__).parent / "catalog" / "data" / f"{cloud}.csv", encoding="utf-8") as fh:
        return sorted({row["region"] for row in csv.DictReader(fh)})


class Demo:
    """Start with ``start()`` (or ``with Demo(dir) as d``); ``env`` is the environment the CLI needs."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.env: dict[str, str] = {}
        self._stack = contextlib.ExitStack()
        self._done = threading.Event()

    def __enter__(self) -> Demo:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stack.close()

    def start(self) -> Demo:
        try:
            self._gcp()
            self._azure()
            self._aws()
            self._prices()
        except BaseException:
            self.stop()
            raise
        builders = threading.Thread(target=self._play_builders, name="demo-builders", daemon=True)
        builders.start()
        self._stack.callback(builders.join, 5)
        self._stack.callback(self._done.set)
        key = self.state_dir / "id_ed25519.pub"
        key.write_text(_ssh_public_key())
        self.env.update({"TRAINVM_SSH_PUBLIC_KEY": str(key), "XDG_CACHE_HOME": str(self.state_dir / "cache"),
                         "TRAINVM_AZURE_POLL_SECONDS": "0", "TRAINVM_RETRY_BASE_DELAY": "0",
                         "TRAINVM_READY_POLL_SECONDS": "0", "TRAINVM_LOGS_POLL_SECONDS": "0"})
        return self

    def _gcp(self) -> None:
        from tests.emulators.gce_group import GceGroupEmulator
        from tests.emulators.gcs import GcsEmulator

        gce = GceGroupEmulator().start()
        self._stack.callback(gce.stop)
        for region in sorted({z.rsplit("-", 1)[0] for z in gce.known_zones}):
            gce.set_quota("CPUS", QUOTA, region=region)
        gcs = GcsEmulator().start()
        self._stack.callback(gcs.stop)
        self.gce, self.gcs = gce, gcs
        self.env.update({"TRAINVM_GCE_ENDPOINT": gce.url, "TRAINVM_GCS_ENDPOINT": gcs.url,
                         "GOOGLE_CLOUD_PROJECT": PROJECT})

    def _azure(self) -> None:
        from tests.emulators import azurite_server
        from tests.emulators.arm import ArmEmulator

        arm = ArmEmulator().start()
        self._stack.callback(arm.stop)
        azurite = azurite_server.shared()  # its certificate comes from the CA the ARM emulator's does
        self._stack.callback(azurite.stop)
        self.arm = arm
        self.env.update(arm.env())
        self.env["TRAINVM_AZURE_BLOB_ENDPOINT"] = azurite.url

    def _aws(self) -> None:
        from tests.emulators.aws import MotoAws
        from tests.emulators.aws_quotas import NAMES, ServiceQuotas

        regions = AWS_REGIONS
        moto = MotoAws(regions=regions)
        self._stack.callback(moto.close)
        quotas = self._stack.enter_context(ServiceQuotas().installed())
        for region in regions:
            for code in NAMES:
                quotas.set_quota(region, code, QUOTA)
        self.moto = moto
        self.env.update(moto.env())

    def _prices(self) -> None:
        from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog
        from tests.catalog.fake_aws import AwsBulkFake, offer_rows
        from tests.catalog.fake_azure import AzureRetailFake, disk_items, vm_items
        from tests.catalog.fake_gcp import GcpBillingFake, catalog_skus
        from tests.catalog.price_server import PriceServer

        offers = load_catalog(EMBEDDED_DIR).offers
        azure = AzureRetailFake(vm_items([o for o in offers if o.cloud == "azure"]) + disk_items(catalog_regions("azure")))
        aws = AwsBulkFake({r: offer_rows([o for o in offers if o.cloud == "aws"], r) for r in catalog_regions("aws")})
        gcp = GcpBillingFake(catalog_skus())
        servers = {name: self._stack.enter_context(PriceServer(fake.handle)) for name, fake in
                   (("azure", azure), ("aws", aws), ("gcp", gcp))}
        azure.url = servers["azure"].url  # its NextPageLink is absolute
        self.env.update({"TRAINVM_AZURE_PRICES_URL": servers["azure"].url + "/api/retail/prices",
                         "TRAINVM_AWS_PRICES_URL": servers["aws"].url,
                         "TRAINVM_GCP_BILLING_URL": servers["gcp"].url,
                         "TRAINVM_GCP_PRICES_API_KEY": "demo-key-not-a-secret"})


    def _play_builders(self) -> None:
        """No emulator runs a startup script: a `trainvm bake` builder (``<VM>-bake``) gets the console its bake-mode
        script prints when every install phase succeeds, as tests/bake/ plant it, so that a bake completes."""
        from moto.ec2.models import ec2_backends

        from tests.bake.test_bake_aws import _console
        from tests.emulators.aws import ACCOUNT

        text = _console("preflight", "driver", "python", "packages", "bake-clean")
        done: set[str] = set()
        while not self._done.wait(0.1):
            with self.gce._lock:
                gce = [k[2] for k in self.gce.instances if k[2].endswith("-bake") and k[2] not in done]
            for name in gce:
                self.gce.set_serial(name, text)
                done.add(name)
            for region in AWS_REGIONS:
                backend = ec2_backends[ACCOUNT][region]
                try:  # moto's request threads change these dicts meanwhile: look again at the next turn
                    found = [(i.id, dict(backend.tags.get(i.id) or {}).get("Name", ""))
                             for r in list(backend.reservations.values()) for i in list(r.instances)]
                except RuntimeError:
                    continue
                for iid, name in found:
                    if name.endswith("-bake") and iid not in done:
                        self.moto.faults.set_console(iid, text)
                        done.add(iid)
            with self.arm._lock:
                vms = [r["id"] for r in self.arm.state.res.values() if r["type"] == "Microsoft.Compute/virtualMachines"]
            for rid in vms:
                parts = rid.split("/")
                rg, name = parts[4], parts[-1]
                if name.endswith("-bake") and rid not in done:
                    self.arm.set_serial_log(rg, name, text)
                    done.add(rid)


def _ssh_public_key() -> str:
    """An ed25519 public key made for this demo (EC2, and moto, check a key pair's encoding)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public = Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                    serialization.PublicFormat.OpenSSH)
    return public.decode() + " trainvm-demo\n"


def exports(env: dict[str, str]) -> str:
    """``export K=V`` lines, and this interpreter's bin folder (.venv/bin under `make demo`) ahead on PATH, so that
    ``trainvm`` is the one installed next to the emulators."""
    lines = [f"export {key}={shlex.quote(value)}\n" for key, value in env.items()]
    return "".join(lines) + f'export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-file", type=Path, default=DEFAULT_ENV_FILE, help="where the export lines are written")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="the demo's SSH key and cache (default: a new temporary folder, removed at the end)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    import logging

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)  # moto's server logs every request on stderr
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="trainvm-demo-"))
    state.mkdir(parents=True, exist_ok=True)
    env_file: Path = args.env_file
    try:
        with Demo(state) as demo:
            text = exports(demo.env)
            env_file.parent.mkdir(parents=True, exist_ok=True)
            env_file.write_text(text)
            sys.stdout.write(text)
            print(f"# written to {env_file}: `source {shlex.quote(str(env_file))}` in another shell, then see "
                  "docs/demo.md", flush=True)
            print("# emulators running; Ctrl-C to stop", flush=True)
            stop.wait()
            print("# stopping the emulators", flush=True)
    finally:
        env_file.unlink(missing_ok=True)
        if args.state_dir is None:
            shutil.rmtree(state, ignore_errors=True)
    return 0


def _serve(argv: list[str] | None = None) -> None:
    try:
        rc = main(argv)
    except Exception as exc:  # an emulator that cannot start (Azurite not installed, a port taken): say which, exit 1
        print(f"error: the demo could not start: {type(exc).__name__}: {exc}", file=sys.stderr)
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    # every emulator is stopped; os._exit rather than a normal exit: a server thread a library keeps as a non-daemon
    # (gcp-storage-emulator's, moto's werkzeug request threads) would hold the interpreter at exit
    os._exit(rc)


if __name__ == "__main__":
    _serve()
