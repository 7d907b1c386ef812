"""lifecycle.on_idle / lifecycle.on_max_run: one vocabulary (stop | delete), default stop, shown by plan."""

from __future__ import annotations

import pytest

from provisioner.errors import ProfileError
from provisioner.profile import load_profile
from provisioner.providers.lifecycle import MECHANISM, describe, summary_lines
from tests.helpers import BASE_PROFILE as BASE


def test_defaults_keep_disks() -> None:
    from provisioner.profile.model import Lifecycle

    lc = Lifecycle()
    assert (lc.on_idle, lc.on_max_run) == ("stop", "stop")


@pytest.mark.parametrize("on_idle", ["stop", "delete"])
@pytest.mark.parametrize("on_max_run", ["stop", "delete"])
def test_values_accepted_and_hashed(write_yaml, on_idle: str, on_max_run: str) -> None:
    plain = load_profile(write_yaml(BASE))
    loaded = load_profile(write_yaml(BASE + f"lifecycle: {{on_idle: {on_idle}, on_max_run: {on_max_run}, max_run_hours: 2}}\n"))
    assert (loaded.profile.lifecycle.on_idle, loaded.profile.lifecycle.on_max_run) == (on_idle, on_max_run)
    assert loaded.hash != plain.hash  # what the VM does at idle/max-run is part of what it is


@pytest.mark.parametrize("text", ["lifecycle: {on_idle: terminate}\n", "lifecycle: {on_max_run: deallocate}\n",
                                  "lifecycle: {on_idle: Stop}\n"])
def test_other_words_rejected_with_line(write_yaml, text: str) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile(write_yaml(BASE + text))
    errs = [m.render() for m in info.value.messages if m.level == "error"]
    assert any("lifecycle.on_" in e and "'stop' or 'delete'" in e and ":11: " in e for e in errs), errs


@pytest.mark.parametrize("cloud", sorted(MECHANISM))
def test_words_per_cloud_say_what_bills(cloud: str) -> None:
    stop, delete = describe(cloud, "stop"), describe(cloud, "delete")
    assert "compute billing ends" in stop and "billing;" in stop.split(": ", 1)[1] and "local NVMe/scratch data is lost" in stop
    assert "all lost" in delete and "billing ends" in delete
    assert "deallocated" in describe("azure", "stop") and "TERMINATED" in describe("gcp", "stop")


def test_summary_lines_name_only_actions_in_use() -> None:
    from provisioner.profile.model import Lifecycle

    lines = summary_lines(Lifecycle(idle_shutdown_minutes=30, on_idle="delete", max_run_hours=None), "azure")
    assert lines[0] == "idle 30 min -> delete; no max run" and len(lines) == 3 and lines[1].startswith("delete on azure:")
    assert lines[2].startswith("stalled GPU: a process holding the GPU below 5 % for 60 min counts as idle")
    lines = summary_lines(Lifecycle(idle_shutdown_minutes=None, max_run_hours=3), "gcp")
    assert lines[0].startswith("no idle shutdown") and "max run 3 h -> stop" in lines[0] and lines[1].startswith("stop on gcp:")


def test_plan_shows_lifecycle_text_and_json(cli, write_yaml, monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    p = write_yaml(BASE + "lifecycle: {idle_shutdown_minutes: 30, on_idle: delete, max_run_hours: 5, on_max_run: stop}\n")
    r = cli("plan", str(p), "--cloud", "azure")
    assert r.code == 0, r.err
    assert "lifecycle: idle 30 min -> delete; max run 5 h -> stop" in r.out
    assert "stop on azure: the VM is deallocated" in r.out and "delete on azure:" in r.out
    doc = cli("plan", str(p), "--cloud", "azure", "--json").json()
    lc = doc["lifecycle"]
    assert (lc["on_idle"], lc["on_max_run"], lc["idle_shutdown_minutes"], lc["max_run_hours"]) == ("delete", "stop", 30, 5)
    assert "deallocated" in lc["on_max_run_effect"] and "all lost" in lc["on_idle_effect"]


def test_docs_have_the_cost_and_kept_table() -> None:
    """The full table per cloud is docs/vm.md's (issue 37: the reference left the README); the README keeps a
    compact one that links it."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    readme = (repo / "README.md").read_text()
    short = readme.split("## What it costs and what `down` deletes", 1)[1].split("\n## ", 1)[0]
    assert "(docs/vm.md#what-it-costs-and-what-is-kept)" in short
    events = [line.split("|")[1] for line in short.splitlines() if line.startswith("| ") and "---" not in line]
    for event in ("`trainvm stop`", "with `stop` (the default)", "with `delete`", "spot preemption", "`trainvm down NAME`",
                  "`trainvm bake`"):
        assert any(event in cell for cell in events), event
    assert "local NVMe/scratch lost" in short and "unknown, never 0" in short
    text = (repo / "docs" / "vm.md").read_text()
    section = text.split("## What it costs and what is kept", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:4] for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    seen = {(c.strip().split()[0], e.strip().split(",")[0]) for c, e, _ in rows}
    for cloud in ("GCE", "Azure"):
        for event in ("idle", "max-run", "`trainvm stop`", "`trainvm down`"):
            assert any(c == cloud and e.startswith(event) for c, e in seen), (cloud, event)
    assert {("AWS", "idle"), ("AWS", "max-run")} <= seen
    assert "lost on every stop on every cloud" in section and "≥ 5 %" in section and "load average is ≥ 1.0" in section


@pytest.mark.parametrize("on_max_run, says", [("stop", "stopped (disk kept)"), ("delete", "deleted")])
def test_plan_says_what_spot_preemption_does_on_gce(cli, write_yaml, monkeypatch, on_max_run, says) -> None:
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    p = write_yaml(BASE + f"lifecycle: {{on_max_run: {on_max_run}}}\n")
    r = cli("plan", str(p), "--cloud", "gcp", "--spot")
    assert r.code == 0, r.err
    assert f"spot: a preempted spot VM is {says}, as on_max_run says" in r.out
    assert "spot:" not in cli("plan", str(p), "--cloud", "gcp").out
