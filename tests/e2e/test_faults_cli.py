"""Issue 19 end to end: the real CLI and SDKs against the loopback emulators under faults. Each test states
the outcome a user sees: exit code, message, and what is left in the (emulated) cloud."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

from tests.e2e.test_cli_against_emulators import T4  # noqa: E402 - (env: tests/e2e/conftest.py)
from tests.emulators.arm import ArmEmulator  # noqa: E402
from tests.emulators.gce import GceEmulator  # noqa: E402


@pytest.fixture
def gce(env):
    with GceEmulator(projects={"e2e-proj"}) as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        yield emu


@pytest.fixture
def az_t4(tmp_path):
    """The T4 example with its data over https (a gs:// source rules Azure out: data locality)."""
    p = tmp_path / "bert-finetune-t4.yaml"
    p.write_text(Path(T4).read_text().replace("gs://example-ml-data/glue/", "https://example.com/glue/"))
    return str(p)


@pytest.fixture
def arm(env):
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        env.setenv("TRAINVM_AZURE_OP_TIMEOUT", "20")
        try:
            yield emu
        finally:
            emu.finish_operations(stuck=True)


def test_gce_down_during_pending_create_is_not_undone(cli, gce):
    gce.polls_to_done = 3

    def down(emu, key):  # the VM is deleted (`trainvm down`) while its insert is pending
        target = emu._op_state[key]["target"]
        if emu.operations[key]["operationType"] == "insert" and target in emu.instances:
            del emu.instances[target]
    gce.on_poll = down
    up = cli("up", T4, "--yes", "--cloud", "gcp")
    assert up.code == 3, up.err
    assert "was deleted while `up` waited for it" in up.err and "RUNNING" not in up.out
    assert not gce.instances and len(gce.calls("instances.insert")) == 1


def test_gce_rerun_while_create_in_progress_finishes(cli, gce, env):
    from provisioner.planner.from_profile import Overrides, make_plan
    from provisioner.profile import load_profile
    from provisioner.providers.gcp.provider import GcpProvider
    from provisioner.provision.launch import launch_spec
    from provisioner.render.script import render_for_offer

    gce.polls_to_done = 2
    loaded = load_profile(Path(T4))
    plan = make_plan(loaded, Overrides(("gcp",), None, None)).plan
    GcpProvider().submit(launch_spec(loaded, plan.chosen, rendered=render_for_offer(loaded, plan.chosen)), plan.chosen)  # an `up` killed right after its insert
    assert next(iter(gce.instances.values()))["status"] == "PROVISIONING"
    again = cli("up", T4, "--yes", "--json", "--cloud", "gcp")
    assert again.code == 0, again.err
    doc = again.json()
    assert doc["existing"] is True and doc["state"] == "RUNNING" and len(gce.instances) == 1


def test_gce_503_storm_on_operation_wait_stops_with_the_vm_named(cli, gce, env):
    env.setenv("TRAINVM_GCE_OP_TIMEOUT", "3")
    gce.inject("unavailable_503", method="zoneOperations.wait", times=None)
    up = cli("up", T4, "--yes", "--cloud", "gcp")
    assert up.code == 3, up.err
    assert "may have left trainvm-bert-finetune-" in up.err and "trainvm down trainvm-bert-finetune-" in up.err
    assert "nothing was left behind" not in up.err
    assert len(gce.instances) <= 1 and len(gce.calls("instances.insert")) == 1


def test_gce_wrong_project_is_exit_3_never_already_gone(cli, gce, env):
    up = cli("up", T4, "--yes", "--json", "--cloud", "gcp")
    name = up.json()["name"]
    env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-porj")
    down = cli("down", name, "--yes")
    assert down.code == 3 and "e2e-porj" in down.err and "already gone" not in down.out
    assert gce.instance(name) is not None


def test_azure_wrong_subscription_is_exit_3_never_already_gone(cli, arm, env, az_t4):
    up = cli("up", az_t4, "--yes", "--json", "--cloud", "azure")
    assert up.code == 0, up.err
    name = up.json()["name"]
    wrong = "00000000-0000-0000-0000-0000000000ff"
    env.setenv("AZURE_SUBSCRIPTION_ID", wrong)
    down = cli("down", name, "--yes")
    assert down.code == 3 and wrong in down.err and "already gone" not in down.out
    again = cli("up", az_t4, "--yes", "--cloud", "azure", "--name", "other-box")
    assert again.code == 3 and wrong in again.err and again.err.count("attempt:") <= 1
    assert len([r for r in arm.state.res.values() if r["type"] == "Microsoft.Compute/virtualMachines"]) == 1


def test_azure_down_during_pending_create_is_not_undone(cli, arm, az_t4):
    arm.polls = 3

    def down(emu, op):
        if op.ns == "Microsoft.Compute":
            for g in list(emu.state.groups):
                emu.state.delete_group_now(g)
    arm.on_poll = down
    up = cli("up", az_t4, "--yes", "--cloud", "azure")
    assert up.code == 3, up.err
    assert "was deleted while `up` waited for it" in up.err
    assert len(arm.calls("PUT", "/virtualMachines/")) == 1 and arm.vm_groups() == []


def test_gce_up_while_another_up_creates_the_vm_is_exit_5_naming_what_to_do(cli, gce, env):
    """Another `up` (its insert accepted, its VM PROVISIONING for good) holds the name: `up` waits its operation
    timeout, then exits 5 saying so and what to do, with the attempt in --json; the VM is never deleted and no
    other zone is tried (before: exit 3 "retry-exhausted" from a re-run, or, inside the failover walk, a second
    VM in the next zone)."""
    from provisioner.planner.from_profile import Overrides, make_plan
    from provisioner.profile import load_profile
    from provisioner.providers.gcp.provider import GcpProvider
    from provisioner.provision.launch import launch_spec
    from provisioner.render.script import render_for_offer

    env.setenv("TRAINVM_GCE_OP_TIMEOUT", "1")
    gce.inject("op_never_done", times=None)
    loaded = load_profile(Path(T4))
    plan = make_plan(loaded, Overrides(("gcp",), None, None)).plan
    spec = launch_spec(loaded, plan.chosen, rendered=render_for_offer(loaded, plan.chosen))
    name = spec.name
    GcpProvider().submit(spec, plan.chosen)
    up = cli("up", T4, "--yes", "--json", "--cloud", "gcp")
    assert up.code == 5, up.err
    err = up.json()["error"]
    assert "another `trainvm up`" in err["message"] and "still PROVISIONING" in err["message"]
    assert f"`trainvm status {name}`" in err["hint"] and f"`trainvm down {name}`" in err["hint"]
    assert len(gce.instances) == 1 and not gce.calls("instances.delete")
    assert len(gce.calls("instances.insert")) <= 2  # the other `up`'s, and this one's replay of its requestId
