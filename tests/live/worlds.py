"""The scenario's worlds (tests/live/scenario.py): a real cloud (``LIVE``: reads the billing state from the
cloud's API, plants nothing) or an emulator (``emulator_world``: plays the VM's startup script by planting its
console and report, reads the billing state from the emulator's own records).

What the emulator worlds do not model: no VM boots, so the console and stack report (and the phase timings in
them, made up: ``PLANTED_PHASES``) are planted where each cloud shows them (GCE serial port 1, Azure boot
diagnostics and RunShellScript output, EC2 console output), again after `start` as a re-run startup script
prints them again; nothing there bills."""

from __future__ import annotations

import base64
import gzip
import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# seconds per startup phase in the planted console: placeholders, not measurements
PLANTED_PHASES = (("preflight", 2), ("driver", 95), ("cuda", 1), ("python", 40), ("packages", 120), ("env", 1), ("data", 0))


def planted_report() -> dict[str, Any]:
    """The stack report of a T4 VM matching tests/live/live-t4.yaml (the probe fixture, no data staged)."""
    report = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())
    return {**report, "data": []}


def planted_console(report: dict[str, Any] | None = None) -> str:
    """What the startup script prints on the console: a status line and start/end log lines per phase, then ready
    and the report (the console protocol of provisioner/verify/console.py)."""
    t, lines = datetime(2026, 11, 22, 10, 0, tzinfo=UTC), ["cloud-init: running startup script"]
    for phase, secs in PLANTED_PHASES:
        lines += [f"TRAINVM_STATUS=running:{phase}", f"{t:%Y-%m-%dT%H:%M:%S%z} trainvm {phase}: phase start"]
        t += timedelta(seconds=secs)
        lines.append(f"{t:%Y-%m-%dT%H:%M:%S%z} trainvm {phase}: phase end: done")
    body = base64.b64encode(json.dumps(report or planted_report()).encode()).decode()
    return "\n".join([*lines, "TRAINVM_STATUS=ready", "TRAINVM_REPORT=" + body]) + "\n"


class GceWorld:
    cloud, kind = "gcp", "emulator"

    def __init__(self, emu: Any, report: dict[str, Any] | None = None) -> None:
        self.emu, self.report = emu, report

    def before_up(self, name: str) -> None:
        self.emu.play_serial(name, [planted_console(self.report)])

    def after_start(self, name: str) -> None:
        self.emu.set_serial(name, planted_console(self.report))

    def billing_state(self, name: str, up_doc: dict[str, Any]) -> str:
        inst = self.emu.instance(name)
        return inst["status"] if inst else "absent"

    def leftovers(self, name: str) -> list[str]:
        return [f"gcp instance {k[2]} in {k[1]}" for k in list(self.emu.instances) if k[2] == name]


class AzureWorld:
    cloud, kind = "azure", "emulator"

    def __init__(self, emu: Any, report: dict[str, Any] | None = None) -> None:
        self.emu, self.report = emu, report

    def before_up(self, name: str) -> None:
        rg, report = f"trainvm-{name}", self.report or planted_report()
        self.emu.set_serial_log(rg, name, planted_console(report))
        self.emu.set_run_command_output(rg, name, stdout=base64.b64encode(gzip.compress(json.dumps(report).encode())).decode())

    def after_start(self, name: str) -> None:
        self.before_up(name)

    def billing_state(self, name: str, up_doc: dict[str, Any]) -> str:
        with self.emu._lock:  # the emulator's record of the VM (what instanceView's PowerState is rendered from)
            return "PowerState/" + self.emu.state.vm(f"trainvm-{name}", name)["extra"]["power"]

    def leftovers(self, name: str) -> list[str]:
        return [f"azure resource group {g}" for g in self.emu.vm_groups() if g.lower() == f"trainvm-{name}"]


class AwsWorld:
    """The instance id is known only once RunInstances answered: a thread watches moto for the instance named
    NAME and plants its console output then (as the VM prints it after it booted)."""

    cloud, kind = "aws", "emulator"

    def __init__(self, aws: Any, report: dict[str, Any] | None = None) -> None:
        self.aws, self.report = aws, report
        self.stop_watching = threading.Event()

    def _named(self, name: str) -> list[dict[str, Any]]:
        return [i for i in self.aws.instances() if {"Key": "Name", "Value": name} in (i.get("Tags") or [])]

    def before_up(self, name: str) -> None:
        def watch() -> None:
            while not self.stop_watching.is_set():
                found = self._named(name)
                if found:
                    self.aws.faults.set_console(found[0]["InstanceId"], planted_console(self.report))
                    return
                time.sleep(0.05)

        threading.Thread(target=watch, daemon=True).start()

    def after_start(self, name: str) -> None:
        for inst in self._named(name):
            self.aws.faults.set_console(inst["InstanceId"], planted_console(self.report))

    def billing_state(self, name: str, up_doc: dict[str, Any]) -> str:
        found = self._named(name)
        return found[0]["State"]["Name"] if found else "absent"

    def leftovers(self, name: str) -> list[str]:
        self.stop_watching.set()
        return ([f"aws instance {i['InstanceId']} ({i['State']['Name']})" for i in self._named(name)]
                + [f"aws security group {g['GroupName']}" for g in self.aws.security_groups() if name in g["GroupName"]]
                + [f"aws instance profile {p}" for p in self.aws.instance_profiles() if p == name])


class LiveWorld:
    """A real cloud, through its own SDK and the credentials trainvm itself uses (only the billing state is
    read here; everything else goes through the CLI). Nothing is planted: the VM's startup script prints."""

    kind = "live"

    def __init__(self, cloud: str) -> None:
        self.cloud = cloud

    def before_up(self, name: str) -> None:
        pass

    def after_start(self, name: str) -> None:
        pass

    def billing_state(self, name: str, up_doc: dict[str, Any]) -> str:
        zone, region = up_doc.get("zone"), up_doc.get("region")
        if self.cloud == "gcp":
            import google.auth
            from google.cloud import compute_v1

            _creds, project = google.auth.default()
            project = os.environ.get("GOOGLE_CLOUD_PROJECT") or project
            return str(compute_v1.InstancesClient().get(project=project, zone=zone, instance=name).status)
        if self.cloud == "azure":
            from azure.identity import DefaultAzureCredential
            from azure.mgmt.compute import ComputeManagementClient

            compute = ComputeManagementClient(DefaultAzureCredential(), os.environ["AZURE_SUBSCRIPTION_ID"])
            view = compute.virtual_machines.instance_view(f"trainvm-{name}", name)
            return next((s.code for s in view.statuses or [] if (s.code or "").startswith("PowerState/")), "unknown")
        import boto3

        ec2 = boto3.client("ec2", region_name=region or (zone or "")[:-1] or None)
        got = ec2.describe_instances(Filters=[{"Name": "tag:Name", "Values": [name]}])
        states = [i["State"]["Name"] for r in got["Reservations"] for i in r["Instances"]]
        return states[0] if states else "absent"

    def leftovers(self, name: str) -> list[str]:
        return []  # `list` (every cloud with credentials) is the lane's look at a real account


def credentials_missing(cloud: str) -> str | None:
    """Why the live lane cannot run on ``cloud`` here (None: it can): the same checks trainvm's providers make."""
    if cloud == "gcp":
        try:
            import google.auth

            _creds, project = google.auth.default()
        except Exception as exc:  # DefaultCredentialsError and friends
            return f"no Google Cloud credentials ({type(exc).__name__}): run `gcloud auth application-default login`"
        return None if (project or os.environ.get("GOOGLE_CLOUD_PROJECT")) else "no GCP project: set GOOGLE_CLOUD_PROJECT"
    if cloud == "azure":
        return None if os.environ.get("AZURE_SUBSCRIPTION_ID") else "AZURE_SUBSCRIPTION_ID is not set (az login first)"
    if cloud == "aws":
        import boto3

        return None if boto3.Session().get_credentials() else "no AWS credentials (aws configure / AWS_PROFILE)"
    return f"unknown cloud {cloud!r} (CLOUD=gcp|azure|aws)"
