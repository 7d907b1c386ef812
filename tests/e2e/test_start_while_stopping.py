"""issue 30: `trainvm start` of a GCE VM whose stop has not ended (an earlier `stop --no-wait`, a stop from the
console): GCE answers instances.start with 400 resourceNotReady while the VM is STOPPING (the emulator does the
same, tests/emulators/gce_power.py). trainvm waits for that stop to end (the provider's bounded polling, within
TRAINVM_GCE_OP_TIMEOUT), then starts the VM: exit 0, never "not ready" (exit 3). A stop that never ends is named
(OPERATION_TIMEOUT, exit 3) and no start is sent into it."""

from __future__ import annotations

from pathlib import Path

from tests.emulators.gce import GceEmulator

REPO = Path(__file__).resolve().parents[2]
T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


def test_gce_start_while_an_earlier_stop_is_still_stopping_waits_for_it_then_starts(cli, env) -> None:
    with GceEmulator(power_ends_after_reads=2) as emu:  # the pending stop ends with time: its 2nd read sees it done
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
        assert cli("stop", name, "--yes", "--no-wait").code == 0 and emu.instance(name)["status"] == "STOPPING"

        r = cli("start", name, "--json")
        assert r.code == 0, r.err
        doc = r.json()
        assert doc["was"] == "STOPPING" and doc["waited_for_stop"] is True and doc["state"] == "RUNNING"
        assert emu.instance(name)["status"] == "RUNNING"
        assert len(emu.calls("instances.start")) == 1  # sent once, after the stop had ended


def test_gce_start_no_wait_while_stopping_still_waits_for_the_stop_and_says_so(cli, env) -> None:
    """--no-wait leaves the start running, but the start can only be sent once the stop has ended: the text says
    that it waited for the earlier stop and that the VM is starting."""
    with GceEmulator(power_ends_after_reads=2) as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
        assert cli("stop", name, "--yes", "--no-wait").code == 0

        r = cli("start", name, "--no-wait")
        assert r.code == 0, r.err
        assert "an earlier stop was in progress: waited for it to end" in r.out
        assert len(emu.calls("instances.start")) == 1
        assert emu.instance(name)["status"] in ("STAGING", "RUNNING")


def test_gce_start_of_a_vm_stuck_in_stopping_gives_up_at_the_operation_timeout(cli, env) -> None:
    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        env.setenv("TRAINVM_GCE_OP_TIMEOUT", "0.5")
        name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
        emu.set_status(name, "STOPPING")  # held: no operation will end it
        r = cli("start", name)
        assert r.code == 3, (r.out, r.err)
        assert f"{name} in us-central1-a was still STOPPING after 0.5 s" in r.err and "TRAINVM_GCE_OP_TIMEOUT" in r.err
        assert "not ready" not in r.err and emu.calls("instances.start") == []


def test_gce_start_that_meets_a_stop_begun_since_it_read_the_vm_waits_too(cli, env, monkeypatch) -> None:
    """The VM was read RUNNING, but a stop began before the start was sent: GCE answers
    resourceNotReady; trainvm reads it again, sees STOPPING, waits for that stop, then sends the start again."""
    from provisioner.providers.gcp.cluster import GceClusters

    with GceEmulator(power_ends_after_reads=2) as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
        assert cli("stop", name, "--yes", "--no-wait").code == 0
        real = GceClusters.members  # the one lookup of a name's members (issue 26: a VM is a group of one)

        def read_before_the_stop(self, vm):
            found = real(self, vm)
            found[0][0].status = "RUNNING"  # as it was when read
            return found

        monkeypatch.setattr(GceClusters, "members", read_before_the_stop)
        r = cli("start", name, "--json")
        assert r.code == 0, r.err
        assert r.json()["state"] == "RUNNING" and emu.instance(name)["status"] == "RUNNING"
        assert len(emu.calls("instances.start")) == 2  # the refused one, then one after the stop ended
