"""CLI: plan (text, JSON, golden files, no feasible offer, flags) and catalog show."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import EXAMPLES

GOLDEN = Path(__file__).with_name("golden")
OFFER_KEYS = {"cloud", "region", "zone", "instance_type", "gpu_name", "gpu_count", "vcpus", "memory_gib", "gpu_memory_gib", "price_hourly", "spot"}


@pytest.fixture(autouse=True)
def _fixed_today(monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_plan_json_golden(cli, path: Path) -> None:
    r = cli("plan", str(path), "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert set(doc) >= {"profile", "hash", "chosen", "alternatives", "failover", "rejected", "defaults", "catalog", "script_sha256"}
    assert set(doc["chosen"]) == OFFER_KEYS
    doc.pop("script_sha256")
    # the payload's bytes carry the agent and the installed `packaging` (its version is the environment's): its
    # sha256, size and cost bound are checked where they are made (tests/render/test_sizes.py), not pinned here
    assert len(doc["payload"].pop("sha256")) == 64 and doc["payload"].pop("size_bytes") > 0
    assert doc["payload"].pop("cost_monthly_at_most") < 0.001
    doc["failover"] = doc["failover"][:10]
    doc["warnings"] = [w.replace(f"`trainvm lock {path}`", "`trainvm lock <profile>`") for w in doc["warnings"]]  # no machine path
    golden = GOLDEN / f"plan-{path.stem}.json"
    if os.environ.get("TRAINVM_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    assert doc == json.loads(golden.read_text()), f"plan output changed; rerun with TRAINVM_UPDATE_GOLDEN=1 and review {golden}"


def test_plan_text_shows_table_failover_rejections_cost(cli) -> None:
    r = cli("plan", str(EXAMPLES[0]), "--top", "3")
    assert r.code == 0, r.err
    assert "n1-standard-8" in r.out and "chosen: gcp" in r.out
    assert "failover:" in r.out and "rejected:" in r.out and "catalog:" in r.out
    assert "estimated cost:" in r.out and "for max_run_hours=24" in r.out


def test_plan_defaults_shown_when_host_size_omitted(cli, write_yaml) -> None:
    p = write_yaml("name: d\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n")
    doc = cli("plan", str(p), "--json").json()
    assert doc["defaults"] == {"min_vcpus": 4, "min_memory_gib": 15.0}
    assert doc["chosen"]["vcpus"] >= 4 and doc["chosen"]["memory_gib"] >= 15


def test_plan_spot_flag_uses_spot_price(cli) -> None:
    on_demand = cli("plan", str(EXAMPLES[0]), "--json").json()["chosen"]
    spot = cli("plan", str(EXAMPLES[0]), "--json", "--spot").json()["chosen"]
    assert spot["spot"] is True and spot["price_hourly"] < on_demand["price_hourly"]


def test_plan_cloud_and_region_flags(cli, write_yaml) -> None:
    anywhere = write_yaml("name: d\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n")  # no gs:// data: azure can read it
    doc = cli("plan", str(anywhere), "--json", "--cloud", "azure").json()
    assert doc["chosen"]["cloud"] == "azure"
    doc = cli("plan", str(EXAMPLES[0]), "--json", "--region", "europe-*").json()
    assert doc["chosen"]["region"].startswith("europe-")


def test_failover_order_same_region_then_other_regions_then_other_cloud(cli) -> None:
    doc = cli("plan", str(EXAMPLES[0]), "--json", "--top", "2").json()
    chosen, failover = doc["chosen"], doc["failover"]
    regions = [o["region"] for o in failover]
    clouds = [o["cloud"] for o in failover]
    n_same = next((i for i, r in enumerate(regions) if r != chosen["region"]), len(regions))
    assert all(r == chosen["region"] for r in regions[:n_same])
    first_other_cloud = next((i for i, c in enumerate(clouds) if c != chosen["cloud"]), len(clouds))
    assert all(c == chosen["cloud"] for c in clouds[:first_other_cloud])
    assert all(c != chosen["cloud"] for c in clouds[first_other_cloud:])


def test_no_feasible_offer_exit_1_with_nearest(cli, write_yaml) -> None:
    p = write_yaml("name: h\nextends: base/torch-2.4-cu124\nhardware: {gpu: H100}\nplacement: {regions: ['europe-north9*']}\n")
    r = cli("plan", str(p))
    # the plan's answer is "no" (docs/spec.md "Exit codes": 1), in text and JSON alike: a result on stdout, not an error
    assert r.code == 1
    assert "no feasible offer for H100 x1 in europe-north9*" in r.out and "nearest" in r.out and "$" in r.out
    assert "rejected: " in r.out and "error" not in r.err
    j = cli("plan", str(p), "--json")
    doc = j.json()
    assert j.code == 1 and "error" not in doc
    assert doc["chosen"] is None and doc["suggestions"] and doc["suggestions"][0]["price_hourly"] > 0
    assert doc["message"].startswith("no feasible offer for H100 x1 in europe-north9*")


def test_plan_explain_lists_near_misses(cli) -> None:
    import re

    from provisioner.planner.request import REASONS

    r = cli("plan", str(EXAMPLES[0]), "--explain")
    lines = r.out.splitlines()
    head = lines.index("near misses (rejected by exactly one constraint):")  # not the empty branch ("near misses: none")
    rows = [re.match(r"^  (\S+) (\S+) (\S+) \$[0-9.]+/h: (\w+) - \S", ln) for ln in lines[head + 1:head + 4]]
    assert r.code == 0 and all(rows) and all(m.group(4) in REASONS for m in rows if m)


def test_plan_bad_inputs(cli, tmp_path: Path) -> None:
    assert cli("plan", str(tmp_path / "missing.yaml")).code == 2
    assert cli("plan", str(EXAMPLES[0]), "--cloud", "ibm").code == 2
    assert cli("plan", str(EXAMPLES[0]), "--top", "0").code == 2


def test_plan_invalid_profile_exit_1(cli, write_yaml) -> None:
    p = write_yaml("name: k\nextends: base/torch-2.4-cu124\nhardware: {gpu: K80}\n")
    r = cli("plan", str(p))
    assert r.code == 1 and "R470" in r.err


def test_catalog_show(cli) -> None:
    r = cli("catalog", "show", "--gpu", "H100", "--cloud", "gcp", "--json")
    assert r.code == 0
    doc = r.json()
    assert doc["count"] > 0 and all(o["gpu_name"] == "H100" and o["cloud"] == "gcp" for o in doc["offers"])
    assert doc["catalog"]["date"] and doc["catalog"]["source"]
    text = cli("catalog", "show", "--cloud", "aws", "--limit", "3")
    assert text.code == 0 and "aws" in text.out and "not provisionable yet" not in text.out


def test_region_glob_that_excludes_a_whole_cloud_warns(cli, write_yaml) -> None:
    p = write_yaml("name: r\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\nplacement: {regions: ['us-*']}\n")
    r = cli("plan", str(p))
    assert r.code == 0 and "matches no azure region" in r.err and "eastus" in r.err
    doc = cli("plan", str(p), "--json").json()
    assert any("matches no azure region" in w for w in doc["warnings"])
    ok = write_yaml("name: r\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\nplacement: {regions: ['us-*', '*us']}\n", "ok.yaml")
    assert "matches no" not in cli("plan", str(ok)).err


@pytest.mark.parametrize(("given", "same_as"), [("A100-40GB", "A100"), ("H100-80GB", "H100"), ("a100", "A100"), ("l4", "L4")])
def test_catalog_show_gpu_takes_the_names_and_aliases_validate_takes(cli, given, same_as) -> None:
    want = cli("catalog", "show", "--gpu", same_as, "--json").json()
    got = cli("catalog", "show", "--gpu", given, "--json").json()
    assert want["count"] > 0 and got["count"] == want["count"] and got["offers"] == want["offers"]


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_catalog_show_unknown_gpu_is_an_input_error_with_suggestions(cli, json_out) -> None:
    r = cli("catalog", "show", "--gpu", "Z100", *(["--json"] if json_out else []))
    assert r.code == 2, (r.out, r.err)
    assert "--gpu: unknown GPU 'Z100'; did you mean V100 or P100?" in r.err and "Traceback" not in r.err
    if json_out:
        assert r.json()["error"]["exit_code"] == 2


def test_catalog_show_workstation_gpu_says_no_cloud_rents_it(cli) -> None:
    r = cli("catalog", "show", "--gpu", "RTX-4090")
    assert r.code == 2 and "workstation GPU that no cloud rents" in r.err, r.err


def test_the_no_lock_warning_names_the_real_profile_path(cli, tmp_path) -> None:
    import shlex

    folder = tmp_path / "my profiles"
    folder.mkdir()
    p = folder / "t4.yaml"
    p.write_text((EXAMPLES[0].parent / "bert-finetune-t4.yaml").read_text())  # extends a bundled profile
    r = cli("plan", str(p))
    assert r.code == 0, r.err
    assert f"run `trainvm lock {shlex.quote(str(p))}`" in r.err and "PROFILE" not in r.err


@pytest.mark.parametrize(("on_idle", "on_max_run"), [("delete", "stop"), ("stop", "delete")])
def test_plan_of_a_mixed_aws_lifecycle_says_the_delete_is_the_vms_own_call_not_terminate(cli, write_yaml, on_idle, on_max_run) -> None:
    """A mixed stop/delete on AWS sets InstanceInitiatedShutdownBehavior=stop (aws_request.shutdown_behavior): the
    delete is the VM's own EC2 TerminateInstances call. The plan must not say the shutdown behaviour is terminate."""
    p = write_yaml("name: m\nextends: base/torch-2.4-cu124\nhardware: {gpu: A10G}\nplacement: {clouds: [aws]}\n"
                   f"lifecycle: {{idle_shutdown_minutes: 60, on_idle: {on_idle}, max_run_hours: 24, on_max_run: {on_max_run}}}\n")
    r = cli("plan", str(p))
    assert r.code == 0, r.err
    assert "InstanceInitiatedShutdownBehavior=terminate" not in r.out
    [delete] = [ln for ln in r.out.splitlines() if ln.strip().startswith("delete on aws:")]
    assert "TerminateInstances" in delete and "its own" in delete, delete
    doc = cli("plan", str(p), "--json").json()["lifecycle"]
    effect = doc["on_idle_effect"] if on_idle == "delete" else doc["on_max_run_effect"]
    assert "terminate)" not in effect and "TerminateInstances" in effect
    # the same profile all delete: the shutdown behaviour is terminate, and the plan says so
    uniform = write_yaml(p.read_text().replace(": stop}", ": delete}").replace("on_idle: stop", "on_idle: delete"), name="u.yaml")
    r = cli("plan", str(uniform))
    assert r.code == 0 and "InstanceInitiatedShutdownBehavior=terminate" in r.out, r.out


def test_plan_text_and_json_show_running_and_stopped(cli) -> None:
    """bert-pretrain-8xa100 on GCE: 500 GiB pd-ssd boot disk + 8 x 375 GiB Local SSD (GCE attaches at least 8 on
    a2-highgpu-8g) are priced; a stopped VM keeps paying for the boot disk only."""
    path = next(p for p in EXAMPLES if p.stem == "bert-pretrain-8xa100")
    doc = cli("plan", str(path), "--json").json()
    est = doc["estimate"]
    boot, local = 500 * 0.17 / 730, 8 * 375 * 0.08 / 730
    assert est["running_hourly"] == pytest.approx(est["price_hourly"] + boot + local, abs=1e-5)
    assert est["stopped_hourly"] == pytest.approx(boot, abs=1e-6)
    assert [p["detail"] for p in est["cost"]["parts"][1:]] == ["500 GiB ssd (pd-ssd)", "8 x 375 GiB local_ssd"]
    assert est["per_run"] == round(est["running_hourly"] * est["hours"], 2)
    r = cli("plan", str(path))
    assert r.code == 0, r.err
    assert (f"cost: running ${est['running_hourly']:.3f}/h (compute ${est['price_hourly']:.3f} + disks "
            f"${boot + local:.3f}); stopped ${boot:.3f}/h (the boot disk keeps billing)") in r.out
    assert "running $/h" in r.out and "compute $/h" in r.out
