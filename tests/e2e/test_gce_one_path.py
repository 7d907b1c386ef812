"""issue 26 "One create path: a single VM is a group of one" (GCE): `status`, `stop`, `start` and `down` reach
a VM through the same path as a group's nodes, and a VM created before groups existed (by the single-VM code:
no trainvm-cluster label, no trainvm-nodes label, no node list) is still found, stopped, started and deleted.

The legacy VM is inserted here straight through the SDK against the emulator, with exactly the labels and
metadata keys the old single-VM path wrote (provisioner/providers/gcp/request.instance_body before issue 26)."""

from __future__ import annotations

import json

from tests.emulators.gce import GceEmulator

ZONE = "us-central1-a"
LEGACY_LABELS = {"trainvm-managed": "true", "trainvm-profile": "bert-finetune", "trainvm-hash": "0123456789abcdef",
                 "trainvm-owner": "someone", "trainvm-price": "350000u", "trainvm-disks-price": "20000u",
                 "trainvm-kept-price": "15000u"}


def _insert_legacy(emu: GceEmulator, name: str, *, tags: list[str] | None = None) -> None:
    from google.cloud import compute_v1

    c = emu.sdk_clients()
    body = {"name": name, "machineType": f"zones/{ZONE}/machineTypes/n1-standard-8",
            "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
                "sourceImage": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"}}],
            "guestAccelerators": [{"acceleratorType": f"zones/{ZONE}/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 1}],
            "scheduling": {"onHostMaintenance": "TERMINATE", "automaticRestart": False},
            "networkInterfaces": [{"network": "global/networks/default",
                                   "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]}],
            "metadata": {"items": [{"key": "trainvm-hash", "value": LEGACY_LABELS["trainvm-hash"]},
                                   {"key": "trainvm-profile", "value": json.dumps({"name": "bert-finetune"})}]},
            "labels": LEGACY_LABELS, **({"tags": {"items": tags}} if tags else {})}
    op = c.instances.insert_unary(project="e2e-proj", zone=ZONE,
                                  instance_resource=compute_v1.Instance.from_json(json.dumps(body)))
    c.zone_operations.wait(project="e2e-proj", zone=ZONE, operation=op.name)


def test_a_vm_made_by_the_old_single_path_is_found_stopped_started_and_deleted(cli, env) -> None:
    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        _insert_legacy(emu, "legacy-vm")

        status = cli("status", "legacy-vm", "--json", "--cloud", "gcp")
        assert status.code == 0, status.err
        (doc,) = status.json()["vms"]
        assert doc["name"] == "legacy-vm" and doc["zone"] == ZONE
        assert not doc.get("cluster") and not doc.get("rank")  # a single VM's row: no cluster fields
        assert doc["price_hourly"] == 0.35  # its cost labels are read as before
        rows = cli("list", "--json").json()["vms"]
        assert [r["name"] for r in rows] == ["legacy-vm"] and not rows[0].get("cluster")

        stopped = cli("stop", "legacy-vm", "--yes", "--json")
        assert stopped.code == 0, stopped.err
        assert emu.instance("legacy-vm")["status"] == "TERMINATED"
        started = cli("start", "legacy-vm", "--json")
        assert started.code == 0, started.err
        assert emu.instance("legacy-vm")["status"] == "RUNNING"

        down = cli("down", "legacy-vm", "--yes", "--json")
        assert down.code == 0, down.err
        assert emu.instance("legacy-vm") is None
        assert [c.path.rsplit("/", 1)[-1] for c in emu.calls("instances.delete")] == ["legacy-vm"]
        assert emu.calls("resourcePolicies.delete") == []  # a single VM has no placement policy


def test_up_of_one_vm_looks_as_before_through_the_one_create_path(cli, env) -> None:
    """`up` of a one-node profile: the VM is called as the profile says (no -0), it is one instances.insert with a
    requestId, it carries no cluster label and no node list, `list` shows no cluster fields, and its cost labels
    are there; `down` deletes it and nothing else (no placement policy, no internal rule)."""
    from pathlib import Path

    t4 = str(Path(__file__).resolve().parents[2] / "profiles" / "examples" / "bert-finetune-t4.yaml")
    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        up = cli("up", t4, "--yes", "--json", "--cloud", "gcp")
        assert up.code == 0, up.err
        name = up.json()["name"]
        assert not name.endswith("-0") and emu.instance(name) is not None
        (insert,) = emu.calls("instances.insert")
        assert insert.query.get("requestId") and emu.calls("bulkInsert") == []
        inst = emu.instance(name)
        assert inst["labels"]["trainvm-managed"] == "true" and inst["labels"]["trainvm-price"].endswith("u")
        assert not {"trainvm-cluster", "trainvm-nodes", "trainvm-rank"} & set(inst["labels"])
        assert not any(i["key"].startswith("trainvm-cluster") for i in inst["metadata"]["items"])
        (row,) = cli("list", "--json").json()["vms"]
        assert row["name"] == name and not row.get("cluster") and not row.get("rank")
        down = cli("down", name, "--yes", "--json")
        assert down.code == 0, down.err
        assert emu.instance(name) is None and emu.calls("resourcePolicies.delete") == []
        assert all("internal" not in c.path for c in emu.calls("firewalls.delete"))
