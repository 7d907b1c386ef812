"""issue 10: `trainvm stop` / `trainvm start` through the real CLI and SDKs against the emulators: GCE
instances.stop/start (TERMINATED, disks kept), Azure deallocate/start (PowerState/deallocated, never a
billed "Stopped"); the text says what keeps billing; `stop` asks unless --yes."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

from tests.emulators.arm import ArmEmulator  # noqa: E402
from tests.emulators.gce import GceEmulator  # noqa: E402

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


def test_gce_stop_start(cli, env, write_yaml) -> None:
    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        up = cli("up", T4, "--yes", "--json", "--cloud", "gcp")
        assert up.code == 0, up.err
        name = up.json()["name"]
        assert cli("stop", name).code == 2  # not a terminal and no --yes: refuses, exit 2
        assert emu.instance(name)["status"] == "RUNNING"

        stopped = cli("stop", name, "--yes", "--json")
        assert stopped.code == 0, stopped.err
        doc = stopped.json()
        assert doc["stopped"] is True and doc["state"] == "TERMINATED" and doc["was"] == "RUNNING"
        assert "boot disk keeps billing" in doc["keeps_billing"]
        inst = emu.instance(name)
        assert inst["status"] == "TERMINATED" and inst["disks"][0]["boot"]  # the disk stays
        (call,) = emu.calls("instances.stop")
        assert call.query.get("discardLocalSsd") == "true"
        assert cli("list", "--json").json()["vms"][0]["state"] == "TERMINATED"

        text = cli("stop", name, "--yes")  # already stopped: fine, says so
        assert text.code == 0 and "terminated" in text.out and "boot disk keeps billing" in text.out

        started = cli("start", name, "--json")
        assert started.code == 0, started.err
        assert started.json()["state"] == "RUNNING" and started.json()["ip"]
        inst = emu.instance(name)
        assert inst["status"] == "RUNNING"
        # the startup script is still the instance's metadata: GCE runs it on this boot (re-verifies)
        assert any(i["key"] == "startup-script" for i in inst["metadata"]["items"])
        missing = cli("start", "trainvm-nope", "--json")  # a missing VM: exit 4, as for status/verify/logs/ssh
        assert missing.code == 4 and missing.json()["error"]["type"] == "NotFoundError"


def test_gce_stop_needs_discard_for_local_ssd(env) -> None:
    """The emulator refuses what GCE refuses: stopping a VM with Local SSD without discardLocalSsd=true."""
    from google.api_core import exceptions
    from google.cloud import compute_v1

    with GceEmulator() as emu:
        c = emu.sdk_clients()
        body = {"name": "vm-ssd", "machineType": "zones/us-central1-a/machineTypes/n1-standard-8",
                "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
                    "sourceImage": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"}},
                          {"type": "SCRATCH", "interface": "NVME", "autoDelete": True,
                           "initializeParams": {"diskType": "zones/us-central1-a/diskTypes/local-ssd"}}],
                "networkInterfaces": [{"network": "global/networks/default"}]}
        def done(op):
            c.zone_operations.wait(project="p", zone="us-central1-a", operation=op.name)

        done(c.instances.insert_unary(project="p", zone="us-central1-a", instance_resource=compute_v1.Instance.from_json(
            __import__("json").dumps(body))))
        with pytest.raises(exceptions.BadRequest):
            c.instances.stop_unary(project="p", zone="us-central1-a", instance="vm-ssd")
        done(c.instances.stop_unary(request=compute_v1.StopInstanceRequest(project="p", zone="us-central1-a",
                                                                           instance="vm-ssd", discard_local_ssd=True)))
        assert emu.instance("vm-ssd")["status"] == "TERMINATED"


def test_azure_stop_is_deallocate(cli, env, tmp_path) -> None:
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        try:
            azure_t4 = tmp_path / "t4-azure.yaml"  # the gs:// corpus needs a credential reference on Azure
            azure_t4.write_text(f"extends: {T4}\nname: bert-finetune\ndata:\n  - {{source: 'gs://example-ml-data/glue/', "
                                "dest: /mnt/data/glue, credential: 'secret://azure-keyvault/trainvmkv/glue-reader'}\n")
            up = cli("up", str(azure_t4), "--yes", "--json", "--cloud", "azure")
            assert up.code == 0, up.err
            name = up.json()["name"]
            stopped = cli("stop", name, "--yes", "--json", "--cloud", "azure")
            assert stopped.code == 0, stopped.err
            doc = stopped.json()
            assert doc["state"] == "DEALLOCATED" and "public IP keep billing" in doc["keeps_billing"]
            posts = [r.path.rsplit("/", 1)[-1] for r in emu.requests if r.method == "POST" and "/virtualMachines/" in r.path]
            assert posts == ["deallocate"]  # never powerOff: a powered-off VM still bills compute
            group = f"trainvm-{name}"
            assert any("/disks/" in r for r in emu.resources_in(group))  # the OS disk stays
            text = cli("start", name, "--cloud", "azure")
            assert text.code == 0 and "running" in text.out and "re-verifies" in text.out
            posts = [r.path.rsplit("/", 1)[-1] for r in emu.requests if r.method == "POST" and "/virtualMachines/" in r.path]
            assert posts == ["deallocate", "start"]
            assert cli("list", "--json").json()["vms"][0]["state"] == "RUNNING"
        finally:
            emu.finish_operations(stuck=True)


def test_gce_stop_while_a_previous_stop_is_still_stopping_waits_for_it(cli, env) -> None:
    """issue 30: `stop` of a VM that a previous `stop --no-wait` left STOPPING: GCE answers instances.stop with
    resourceNotReady there; trainvm waits for that stop to end (the provider's own bounded polling), exit 0."""
    with GceEmulator(power_ends_after_reads=2) as emu:  # the pending stop ends with time: its 2nd read sees it done
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
        first = cli("stop", name, "--yes", "--no-wait", "--json")
        assert first.code == 0 and emu.instance(name)["status"] == "STOPPING"

        again = cli("stop", name, "--yes", "--no-wait")  # not waiting: it says so, exit 0
        assert again.code == 0, again.err
        assert "already stopping" in again.out and emu.instance(name)["status"] == "STOPPING"

        waited = cli("stop", name, "--yes", "--json")
        assert waited.code == 0, waited.err
        doc = waited.json()
        assert doc["was"] == "STOPPING" and doc["state"] == "TERMINATED" and doc["stopped"] is True
        assert emu.instance(name)["status"] == "TERMINATED"
        assert len(emu.calls("instances.stop")) == 1  # no second stop was sent into resourceNotReady
        text = cli("stop", name, "--yes")
        assert text.code == 0 and "terminated" in text.out


def test_gce_stop_of_a_vm_stuck_in_stopping_gives_up_at_the_operation_timeout(cli, env) -> None:
    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        env.setenv("TRAINVM_GCE_OP_TIMEOUT", "0.5")
        name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
        emu.set_status(name, "STOPPING")  # held: no operation will end it
        r = cli("stop", name, "--yes")
        assert r.code == 3, (r.out, r.err)
        assert f"{name} in us-central1-a was still STOPPING after 0.5 s" in r.err and "TRAINVM_GCE_OP_TIMEOUT" in r.err
        assert "not ready" not in r.err and emu.calls("instances.stop") == []


def test_gce_stop_that_meets_a_stop_begun_since_it_read_the_vm_waits_too(cli, env, monkeypatch) -> None:
    """The VM read RUNNING, but a stop began before ours was sent: GCE answers resourceNotReady (400); trainvm
    reads it again, sees STOPPING and treats it like the case above (without --wait: says it is stopping, exit 0)."""
    from provisioner.providers.gcp.cluster import GceClusters

    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        env.setenv("TRAINVM_GCE_OP_TIMEOUT", "0.5")
        name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
        emu.set_status(name, "STOPPING")
        real = GceClusters.members  # the one lookup of a name's members (issue 26: a VM is a group of one)

        def read_before_the_other_stop(self, vm):
            found = real(self, vm)
            found[0][0].status = "RUNNING"  # as it was when read
            return found

        monkeypatch.setattr(GceClusters, "members", read_before_the_other_stop)
        r = cli("stop", name, "--yes", "--no-wait", "--json")
        assert r.code == 0, r.err
        assert r.json()["state"] == "STOPPING" and len(emu.calls("instances.stop")) == 1
        r = cli("stop", name, "--yes")  # waiting: bounded, the stop that never ends is named
        assert r.code == 3 and "was still STOPPING after 0.5 s" in r.err and "not ready" not in r.err
