"""Issue 10: what `up` shows and records about money before and after it creates (fake providers; the
real ones are driven through their SDKs in tests/e2e/test_failover_bound.py)."""

from __future__ import annotations

import sys
from datetime import UTC

import pytest

from provisioner.providers.base import CapacityError
from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


def test_up_json_summary_has_prices_run_cost_lifecycle_ssh_and_data(cli, clouds) -> None:
    doc = cli("up", T4, "--yes", "--json").json()
    s = doc["summary"]
    assert (s["cloud"], s["instance_type"], s["gpu"], s["spot"]) == ("gcp", "n1-standard-8", "1x T4", False)
    assert s["price_hourly"] == 0.73 and s["failover_bound_hourly"] == 1.5  # placement.max_price_per_hour
    assert 0.73 <= s["worst_case_price_hourly"] <= 1.5
    # running = compute + the 150 GiB pd-balanced boot disk; stopped = that disk (what a stopped VM keeps costing)
    boot = 150 * 0.10 / 730
    assert s["running_hourly"] == pytest.approx(0.73 + boot, abs=1e-6) and s["stopped_hourly"] == pytest.approx(boot, abs=1e-6)
    assert s["cluster_running_hourly"] == s["running_hourly"] and s["cluster_stopped_hourly"] == s["stopped_hourly"]
    assert s["cost"]["parts"][1]["detail"] == "150 GiB balanced (pd-balanced)"
    assert s["run_cost"] == round(s["running_hourly"] * 24, 2) and s["worst_case_run_cost"] == round(s["worst_case_price_hourly"] * 24, 2)
    assert s["lifecycle"] == {"idle_shutdown_minutes": 60, "max_run_hours": 24, "on_idle": "stop", "on_max_run": "stop"}
    assert s["ssh"].startswith("open to any address")
    assert s["data_sources"] == ["gs://example-ml-data/glue/"]
    assert doc["price_hourly"] == 0.73


def test_up_json_reports_the_created_offers_price_after_failover(cli, clouds) -> None:
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"):
        clouds["gcp"].fail(zone, *[CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED")] * 10)
    doc = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()
    assert doc["region"] != "us-central1" and doc["instance_type"] == "n1-standard-8"
    created = doc["attempts"][-1]
    assert created["outcome"] == "created" and doc["price_hourly"] == created["price_hourly"]
    vm = clouds["gcp"].vms[doc["name"]]
    assert vm.price_hourly == doc["price_hourly"]


def test_up_spot_records_the_spot_price(cli, clouds) -> None:
    doc = cli("up", T4, "--yes", "--json", "--spot").json()
    assert doc["summary"]["spot"] is True and doc["price_hourly"] == doc["summary"]["price_hourly"] < 0.73
    listed = cli("list", "--json").json()["vms"]
    assert [v["price_hourly"] for v in listed] == [doc["price_hourly"]]


def test_confirmation_shows_the_summary_before_asking(cli, clouds, monkeypatch) -> None:
    import typer

    asked = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(typer, "confirm", lambda text, **kw: asked.append(text) or False)
    r = cli("up", T4)
    assert r.code == 1 and len(asked) == 1 and not clouds["gcp"].vms
    for expected in ("gcp n1-standard-8 (1x T4) in us-central1-a at $0.730/h",
                     "cost: running $0.751/h (compute $0.730 + disks $0.021); stopped $0.021/h (the boot disk keeps billing)",
                     "failover: same GPU only, at most $1.500/h running; worst case $",
                     "run length: max_run_hours=24 -> $18.01", "lifecycle: idle shutdown after 60 idle minutes, on_idle=stop, on_max_run=stop",
                     "ssh: open to any address", "data: gs://example-ml-data/glue/"):
        assert expected in r.err


def test_up_finds_the_name_on_a_cloud_outside_the_plan(cli, clouds, write_yaml) -> None:
    path = str(write_yaml("name: d\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n"))  # feasible on both clouds
    first = cli("up", path, "--yes", "--json", "--cloud", "gcp").json()
    again = cli("up", path, "--yes", "--json", "--cloud", "azure")
    assert again.code == 0, again.err
    assert again.json()["existing"] is True and again.json()["cloud"] == "gcp"
    assert list(clouds["gcp"].vms) == [first["name"]] and not clouds["azure"].vms


def test_plan_text_shows_the_bound_and_worst_case(cli, write_yaml) -> None:
    r = cli("plan", T4)
    assert r.code == 0, r.err
    assert "failover bound: $1.50/h running (placement.max_price_per_hour); worst-case failover price $" in r.out
    p = write_yaml("name: d\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4, min_vcpus: 4, min_memory_gib: 15}\n"
                   "placement: {clouds: [gcp], max_failover_premium: 0.1}\n")
    doc = cli("plan", str(p), "--json").json()
    # the bound and the worst case are running prices (compute + the request's disks: the same GCE boot disk
    # price for every offer here, so running = compute + estimate.cost.disks_hourly)
    disks = doc["estimate"]["cost"]["disks_hourly"]
    assert doc["estimate"]["running_hourly"] == pytest.approx(0.54 + disks, abs=1e-6)
    assert doc["failover_bound"] == {
        "price_hourly": round(doc["estimate"]["running_hourly"] * 1.1, 6), "basis": "placement.max_failover_premium",
        "premium": 0.1,
        "worst_case_price_hourly": pytest.approx(max(o["price_hourly"] for o in [doc["chosen"], *doc["failover"]]) + disks,
                                                 abs=1e-6)}
    bound = doc["failover_bound"]["price_hourly"]
    assert all(o["price_hourly"] + disks <= bound and o["gpu_name"] == "T4" for o in doc["failover"])
    assert "failover bound: $0.6241/h running (chosen $0.5674/h +10%, placement.max_failover_premium)" in cli("plan", str(p)).out
    assert bound == pytest.approx((0.54 + 200 * 0.10 / 730) * 1.1, abs=1e-6)  # 200 GiB pd-balanced boot disk
    bad = write_yaml("name: d\nextends: base/torch-2.4-cu124\nplacement: {max_failover_premium: -1}\n", name="bad.yaml")
    r = cli("validate", str(bad))
    assert r.code == 1 and "bad.yaml:3: placement.max_failover_premium: Input should be greater than or equal to 0" in r.err


def _record(**kw):
    from provisioner.providers.base import InstanceRecord

    base = dict(name="trainvm-s-1", cloud="gcp", region="us-central1", zone="us-central1-a", instance_type="n1-standard-8",
                state="RUNNING", profile="s", hash="abc", price_hourly=0.3, created="2026-11-01T00:00:00Z")
    return InstanceRecord(**{**base, **kw})


def test_cost_so_far_does_not_grow_while_stopped(cli, clouds) -> None:
    clouds["gcp"].vms["trainvm-s-1"] = _record(state="TERMINATED", last_start="2026-11-01T00:00:00Z",
                                               last_stop="2026-11-01T10:00:00Z")
    first = cli("status", "trainvm-s-1", "--json").json()["vms"][0]
    assert first["uptime_hours"] == 10 and first["cost_so_far"] == 3.0 and first["billing_compute"] is False
    assert cli("status", "trainvm-s-1", "--json").json()["vms"][0]["cost_so_far"] == 3.0
    text = cli("list").out
    assert "not billing compute" in text and "$3.00" in text


def test_unknown_running_time_is_said_not_invented(cli, clouds) -> None:
    clouds["azure"].vms["trainvm-s-2"] = _record(name="trainvm-s-2", cloud="azure", region="eastus", zone=None,
                                                 instance_type="Standard_NC4as_T4_v3", state="STOPPED", last_start=None)
    clouds["gcp"].vms["trainvm-s-3"] = _record(name="trainvm-s-3", price_hourly=None, spot=True,
                                               last_start="2026-11-01T00:00:00Z")
    doc = {v["name"]: v for v in cli("list", "--json").json()["vms"]}
    assert doc["trainvm-s-2"]["cost_so_far"] is None and doc["trainvm-s-2"]["uptime_hours"] is None
    assert doc["trainvm-s-3"]["price_hourly"] is None  # a spot VM without a recorded price: not the on-demand price
    assert "unknown" in cli("list").out


def test_running_cost_counts_from_the_last_start_not_creation(cli, clouds) -> None:
    from datetime import datetime, timedelta

    start = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    clouds["gcp"].vms["trainvm-s-1"] = _record(created="2026-01-01T00:00:00Z", last_start=start)
    v = cli("status", "trainvm-s-1", "--json").json()["vms"][0]
    assert 1.9 < v["uptime_hours"] < 2.5 and v["cost_so_far"] == pytest.approx(0.3 * v["uptime_hours"], abs=0.01)


def test_name_on_two_clouds_down_refuses_without_cloud_and_says_which_with_it(cli, clouds) -> None:
    name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
    clouds["azure"].vms[name] = _record(name=name, cloud="azure", region="eastus", zone=None)  # made outside this trainvm
    r = cli("down", name, "--yes")
    assert r.code == 2 and "exists on gcp (us-central1-a) and azure (eastus)" in r.err
    assert "--cloud gcp or --cloud azure" in r.err and name in clouds["gcp"].vms and name in clouds["azure"].vms
    assert cli("verify", name).code == 2
    r = cli("down", name, "--yes", "--cloud", "azure", "--json")
    assert r.code == 0 and r.json()["cloud"] == "azure" and r.json()["deleted"] is True
    assert name not in clouds["azure"].vms and name in clouds["gcp"].vms
    text = cli("down", name, "--yes").out
    assert f"{name} on gcp us-central1-a: deleted" in text and not clouds["gcp"].vms


def test_status_and_verify_take_cloud(cli, clouds) -> None:
    name = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()["name"]
    assert [v["cloud"] for v in cli("status", name, "--json", "--cloud", "gcp").json()["vms"]] == ["gcp"]
    assert cli("status", name, "--json", "--cloud", "azure").code == 4  # no such VM there (issue 12 exit codes)
    assert cli("list", "--cloud", "azure", "--json").json()["vms"] == []
    assert cli("verify", name, "--cloud", "gcp", "--json").json()["cloud"] == "gcp"
    assert f"{name} on gcp us-central1-a" in cli("verify", name, "--cloud", "gcp").out
    assert cli("verify", name, "--cloud", "azure").code == 4  # no such VM there (issue 12 exit codes)
    assert cli("down", name, "--cloud", "nope", "--yes").code == 2


def test_list_and_status_show_running_and_stopped_prices_recorded_at_up(cli, clouds) -> None:
    """`up` records the disks' $/h on the VM (trainvm-disks-price, trainvm-kept-price); `list`/`status` show compute +
    disks running and what a stopped VM keeps costing."""
    up = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()
    boot = 150 * 0.10 / 730  # the profile's 150 GiB pd-balanced boot disk
    vm = clouds["gcp"].vms[up["name"]]
    assert vm.disks_hourly == pytest.approx(boot, abs=1e-6) and vm.kept_hourly == pytest.approx(boot, abs=1e-6)
    v = cli("list", "--json").json()["vms"][0]
    assert v["running_hourly"] == pytest.approx(0.73 + boot, abs=1e-6) and v["stopped_hourly"] == pytest.approx(boot, abs=1e-6)
    assert v["billing_now_hourly"] == v["running_hourly"]
    text = cli("list").out
    assert "running $/h" in text and "stopped $/h" in text and "$0.751" in text and "$0.021" in text
    from dataclasses import replace

    clouds["gcp"].vms[up["name"]] = replace(vm, state="TERMINATED")
    stopped = cli("status", up["name"], "--json").json()["vms"][0]
    assert stopped["billing_now_hourly"] == stopped["stopped_hourly"] == pytest.approx(boot, abs=1e-6)
    assert (f"{up['name']} is TERMINATED: compute billing has ended; it keeps costing $0.021/h (the boot disk keeps "
            "billing)") in cli("status", up["name"]).out


def test_a_vm_without_recorded_disk_prices_says_unknown_not_zero(cli, clouds) -> None:
    clouds["gcp"].vms["trainvm-s-1"] = _record(state="TERMINATED")  # an older trainvm: no disk price labels
    v = cli("status", "trainvm-s-1", "--json").json()["vms"][0]
    assert v["running_hourly"] is None and v["stopped_hourly"] is None and v["billing_now_hourly"] is None
    assert "it keeps costing an unknown amount per hour" in cli("status", "trainvm-s-1").out
