"""Run the loopback cloud emulators by hand, to try the real CLI without a cloud account.

    .venv/bin/python -m tests.emulators.serve [--cloud gcp|azure|both]   # prints the environment to export

GCE comes with the GCS emulator (gcp-storage-emulator) where `up` stages the payload.

Then, in another shell with that environment: ``trainvm up profiles/examples/bert-finetune-t4.yaml --yes``,
``trainvm list``, ``trainvm verify NAME``, ``trainvm down NAME --yes``. State lives in memory and
is gone when this process stops (Ctrl-C). Nothing listens beyond 127.0.0.1."""

from __future__ import annotations

import argparse
import shlex
import signal
import threading

from tests.emulators.arm import ArmEmulator
from tests.emulators.gce import GceEmulator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cloud", choices=["gcp", "azure", "both"], default="both")
    args = parser.parse_args()
    env: dict[str, str] = {}
    running = []
    if args.cloud in ("gcp", "both"):
        from tests.emulators.gcs import GcsEmulator

        gce, gcs = GceEmulator().start(), GcsEmulator().start()
        running += [gce, gcs]
        env.update({"TRAINVM_GCE_ENDPOINT": gce.url, "TRAINVM_GCS_ENDPOINT": gcs.url, "GOOGLE_CLOUD_PROJECT": "trainvm-demo"})
    if args.cloud in ("azure", "both"):
        arm = ArmEmulator().start()
        running.append(arm)
        env.update(arm.env())
    env.update({"TRAINVM_AZURE_POLL_SECONDS": "0", "TRAINVM_RETRY_BASE_DELAY": "0"})
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}", flush=True)
    print("# emulators running; Ctrl-C to stop", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    for emu in running:
        emu.stop()


if __name__ == "__main__":
    main()
