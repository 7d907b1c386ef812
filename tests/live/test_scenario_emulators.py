"""The live lane's scenario (tests/live/scenario.py), the very code `make test-live` runs on a real cloud, run
against the emulators of all three clouds: the whole lifecycle through the CLI (a subprocess per command), the
cost cap refusing before anything is created, and `down` + `list` after an injected failure and after SIGTERM.

Not modelled here (tests/live/worlds.py): no VM boots, so the console and report are planted; the billing state
is read from the emulators' records, not from a real cloud's API; nothing bills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import scenario as S
from tests.live import worlds as W

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def gce(env):
    from tests.emulators.gce import GceEmulator

    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        yield emu


@pytest.fixture
def azure(env):
    from tests.emulators.arm import ArmEmulator

    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        try:
            yield emu
        finally:
            emu.finish_operations(stuck=True)


@pytest.fixture
def aws(env, tmp_path):
    pytest.importorskip("moto.server")
    from tests.e2e.conftest import ssh_key
    from tests.emulators.aws import shared_moto

    emu = shared_moto()
    emu.reset()
    for k, v in emu.env().items():
        env.setenv(k, v)
    env.setenv("TRAINVM_AWS_OP_TIMEOUT", "5")
    env.setenv("TRAINVM_SSH_PUBLIC_KEY", str(ssh_key(tmp_path)))
    return emu


def _lane(world, tmp_path: Path, **kw) -> S.Lane:
    return S.Lane(world, results=tmp_path / "results", ready_timeout=20, poll_seconds=0, say=lambda line: None, **kw)


def _done(lane: S.Lane) -> dict:
    [line] = (lane.results / f"{lane.world.cloud}.jsonl").read_text().splitlines()
    return json.loads(line)


def _check_whole_run(lane: S.Lane, stopped: str) -> dict:
    rec = lane.go()
    print("\n".join(lane.transcript))  # the transcript (pytest -s shows it)
    assert rec["ok"] is True and rec["leftovers"] == [], lane.transcript
    assert [s["step"] for s in rec["steps"]] == ["plan", "up", "verify", "logs", "stop", "start", "verify-again", "down", "list"]
    assert all(s["exit"] == 0 for s in rec["steps"])
    assert rec["stopped_state"] == stopped and rec["world"] == "emulator"
    assert rec["worst_case"]["usd"] <= 2.0 and rec["worst_case"]["hours"] == 1
    assert rec["shape"]["instance_type"] and rec["shape"]["price_hourly"] > 0
    assert list(rec["phases"]) == [p for p, _ in W.PLANTED_PHASES] and rec["phases"]["driver"] == 95
    assert rec["trainvm_version"] and rec["catalog"]["age_days"] is not None and rec["time_to_ready_s"] > 0
    assert _done(lane) == rec
    return rec


def test_gce_whole_scenario_and_its_results_tabulate(gce, tmp_path) -> None:
    rec = _check_whole_run(_lane(W.GceWorld(gce), tmp_path), "TERMINATED")
    assert gce.instance(rec["name"]) is None and len(gce.calls("instances.stop")) == 1
    table = subprocess.run([sys.executable, str(REPO / "bench" / "live_table.py"), str(tmp_path / "results")],
                           capture_output=True, text=True, check=True).stdout
    print(table)
    [line] = [ln for ln in table.splitlines() if ln.startswith("| 20")]
    assert "| gcp (emulator) |" in line and "n1-standard-4 us-central1-" in line and "driver 95 s" in line
    assert "| $1.00 |" in line and line.endswith("| ok |")


def test_azure_whole_scenario(azure, tmp_path) -> None:
    rec = _check_whole_run(_lane(W.AzureWorld(azure), tmp_path), "PowerState/deallocated")
    assert rec["shape"]["instance_type"] == "Standard_NC4as_T4_v3"
    assert not [g for g in azure.vm_groups() if g.lower().startswith("trainvm-")]


def test_aws_whole_scenario(aws, tmp_path) -> None:
    rec = _check_whole_run(_lane(W.AwsWorld(aws), tmp_path), "stopped")
    assert rec["shape"]["instance_type"] == "g4dn.xlarge"
    assert aws.instances() == [] and aws.security_groups() == []


def test_cost_cap_refuses_before_anything_is_created(gce, tmp_path) -> None:
    lane = _lane(W.GceWorld(gce), tmp_path, max_usd=0.5)
    with pytest.raises(S.CostCapExceeded, match=r"worst case \$1\.00 .* above LIVE_MAX_USD=\$0\.50: nothing was created"):
        lane.go()
    assert gce.calls("insert") == [] and not gce.instances
    rec = _done(lane)
    assert rec["ok"] is False and [s["step"] for s in rec["steps"]] == ["plan"] and "leftovers" not in rec


def test_cost_cap_needs_a_bounded_duration(tmp_path) -> None:
    plan = {"chosen": {"price_hourly": 0.5}, "failover_bound": {"price_hourly": 0.9}, "lifecycle": {"max_run_hours": None}}
    with pytest.raises(S.CostCapExceeded, match="no lifecycle.max_run_hours"):
        S.worst_case(plan, 100)
    plan["lifecycle"]["max_run_hours"] = 2
    assert S.worst_case(plan, 100)["usd"] == 1.8  # the bound, not the cheapest offer's price


def test_a_failed_step_still_runs_down_and_list(gce, tmp_path) -> None:
    """The VM reports another driver: `up --wait-ready` says drift, the lane stops there, and still deletes."""
    drifting = {**W.planted_report(), "driver": "535.216.03"}
    lane = _lane(W.GceWorld(gce, report=drifting), tmp_path)
    with pytest.raises(S.StepFailed, match="step up failed"):
        lane.go()
    rec = _done(lane)
    assert [s["step"] for s in rec["steps"]] == ["plan", "up", "down", "list"] and rec["leftovers"] == []
    assert len(gce.calls("insert")) == 1 and not gce.instances  # it was created, and it is gone


def test_a_step_failing_on_aws_still_runs_down(aws, tmp_path) -> None:
    aws.faults.fail("StopInstances", "UnauthorizedOperation", times=-1)
    lane = _lane(W.AwsWorld(aws), tmp_path)
    with pytest.raises(S.StepFailed, match="step stop failed"):
        lane.go()
    rec = _done(lane)
    assert rec["steps"][-2:] == [{"step": "down", "exit": 0, "seconds": rec["steps"][-2]["seconds"]},
                                 {"step": "list", "exit": 0, "seconds": rec["steps"][-1]["seconds"]}]
    assert rec["leftovers"] == [] and aws.instances() == []


def test_what_down_could_not_delete_is_said(gce, tmp_path) -> None:
    said: list[str] = []
    lane = _lane(W.GceWorld(gce, report={**W.planted_report(), "driver": "535.216.03"}), tmp_path)
    lane.say = said.append
    real = lane.run

    def down_refused(*args: str) -> S.Result:  # `down` that cannot delete (e.g. a credential lacking delete rights)
        if args[:1] == ("down",):
            return S.Result(args, 3, "", "error: permission denied deleting the instance", 0.1)
        return real(*args)

    lane.run = down_refused
    with pytest.raises(S.StepFailed):
        lane.go()
    rec = _done(lane)
    assert any("down exited 3" in left for left in rec["leftovers"])
    assert any(f"gcp VM {rec['name']}" in left for left in rec["leftovers"])  # `list` still shows it
    assert any(line.startswith("  NOT DELETED (delete by hand)") for line in said)


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGTERM, S.Interrupted), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_mid_scenario_runs_down(gce, tmp_path, signum, raised) -> None:
    """SIGTERM (a CI runner cancelling, `kill`) or Ctrl-C while the VM exists: the lane re-raises after down + list."""
    world = W.GceWorld(gce)
    real_billing = world.billing_state

    def killed_after_stop(name, up_doc):
        os.kill(os.getpid(), signum)
        return real_billing(name, up_doc)

    world.billing_state = killed_after_stop  # type: ignore[method-assign]
    lane = _lane(world, tmp_path)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(raised):
        lane.go()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before  # the handlers are put back
    rec = _done(lane)
    assert rec["steps"][-2]["step"] == "down" and rec["leftovers"] == [] and not gce.instances


def test_live_table_without_results_says_so(tmp_path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "live_table.py"), str(tmp_path / "none")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "no live results" in done.stdout


def test_verify_perf_runs_when_the_profile_has_a_baseline(gce, tmp_path) -> None:
    """PROFILE.perf.json beside the profile: the lane adds `verify --perf --baseline PROFILE`, which compares the
    perf result in the VM's report with it (here the planted report carries the baseline itself: parity)."""
    from tests.perf.docs import doc, m

    profile = tmp_path / "live-t4.yaml"
    profile.write_text(f"extends: {S.PROFILE}\nname: live-t4\n")
    baseline = doc(cpu_single_units_s=m(1000, "cpu"))
    (tmp_path / "live-t4.perf.json").write_text(json.dumps(baseline))
    lane = _lane(W.GceWorld(gce, report={**W.planted_report(), "perf": baseline}), tmp_path, profile=profile)
    rec = lane.go()
    assert rec["ok"] and [s["step"] for s in rec["steps"]][-3:] == ["verify-perf", "down", "list"], lane.transcript
    assert "--perf" in "\n".join(lane.transcript)
