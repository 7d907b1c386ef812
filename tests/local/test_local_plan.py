"""Issue 38, the local cloud's plan: its one offer is a fact of this machine (read through its ``host_offers`` hook,
not a catalog row), and a profile that asks for a GPU is offered there as a rehearsal, never as a pass."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from provisioner.catalog.storage import load_catalog
from provisioner.hooks import HOOKS, host_offers
from provisioner.planner.core import plan
from provisioner.planner.request import DEFAULT_CLOUDS, PlanRequest
from provisioner.providers.clouds import HASHED_DEFAULT_CLOUDS
from provisioner.providers.local import host
from provisioner.providers.registry import CLOUDS, rehearsal_clouds
from tests.planner.planner_synth import TODAY, catalog, offer

MEMINFO = "MemTotal:       24683772 kB\nMemFree:         1234 kB\n"
HERE = Path(__file__).parent


def test_the_offer_is_this_machine_sized_by_the_documented_rule() -> None:
    assert host.mem_total_gib(MEMINFO) == pytest.approx(23.54, abs=0.01)
    # all the host's CPUs (at most 16), half its memory rounded down to 0.5 GiB (1..32 GiB)
    assert host.vm_size(2, 23.54) == (2, 11.5)
    assert host.vm_size(64, 512.0) == (16, 32.0)
    assert host.vm_size(1, 1.2) == (1, 1.0)
    (o,) = host.host_offers(cpu_count=4, meminfo=MEMINFO, machine="x86_64")
    assert (o.cloud, o.region, o.instance_type, o.vcpus, o.memory_gib) == ("local", "this-machine", "qemu-4vcpu-11.5gib", 4, 11.5)
    assert (o.gpu_count, o.gpu_memory_gib, o.price_hourly, o.spot_price_hourly) == (0, 0.0, 0.0, None)
    with pytest.raises(ValueError, match="MemTotal"):
        host.mem_total_gib("MemFree: 1 kB\n")


def test_the_offer_comes_from_the_hook_not_the_price_snapshot() -> None:
    assert not [o for o in load_catalog().offers if o.cloud == "local"]
    assert HOOKS["local"].host_offers is not None
    assert [n for n, h in HOOKS.items() if h.host_offers is not None] == ["local"]
    assert host_offers(("gcp", "aws")) == ()  # a plan that does not name local reads nothing of the host
    assert [o.cloud for o in host_offers(("gcp", "local"))] == ["local"]


def test_local_is_a_rehearsal_cloud_outside_the_default_set() -> None:
    spec = CLOUDS["local"]
    assert spec.rehearsal and not spec.default and rehearsal_clouds() == frozenset({"local"})
    assert "local" not in DEFAULT_CLOUDS and HASHED_DEFAULT_CLOUDS == ("gcp", "azure")


T4 = offer(cloud="gcp", instance_type="n1-standard-8", family="n1-standard", gpu_name="T4", gpu_memory_gib=16.0,
           price_hourly=0.73)
LOCAL = host.host_offers(cpu_count=2, meminfo=MEMINFO, machine="x86_64")[0]
PROV = frozenset({"gcp", "azure", "aws", "local"})


def test_a_gpu_profile_is_rehearsed_on_local_and_the_plan_says_so() -> None:
    req = PlanRequest(gpu_names=frozenset({"T4"}), min_vcpus=4, min_memory_gib=15, clouds=("local",),
                      region_globs=("us-*",), provisionable_clouds=PROV)
    p = plan(req, catalog([T4, LOCAL]), TODAY)
    assert p.chosen is LOCAL
    r = p.rehearsal(LOCAL)
    assert r is not None and r.status == "no GPU"
    assert r.not_checked == ("gpu_name", "gpu_count", "vcpus", "memory", "region")  # 2 vCPUs, 11.5 GiB, this-machine
    doc = p.to_json()
    assert doc["rehearsal"] == r.to_json() and "T4 x1" in r.why and "never a pass" in r.why
    assert r.line().startswith("rehearsal: no GPU - ")


def test_the_rehearsal_lists_what_it_did_not_check() -> None:
    req = PlanRequest(gpu_names=frozenset({"T4"}), min_vcpus=2, min_memory_gib=4, clouds=("local",),
                      provisionable_clouds=PROV)
    p = plan(req, catalog([LOCAL]), TODAY)
    r = p.rehearsal(LOCAL)
    assert p.chosen is LOCAL and r is not None and r.not_checked == ("gpu_name", "gpu_count")  # the host is big enough


def test_a_rehearsal_ranks_after_every_offer_that_can_pass() -> None:
    req = PlanRequest(gpu_names=frozenset({"T4"}), clouds=("local", "gcp"), provisionable_clouds=PROV)
    p = plan(req, catalog([LOCAL, T4]), TODAY)
    assert p.chosen is T4 and p.ranked == (T4, LOCAL)  # $0.00 ranks last: it cannot pass
    assert p.failover == () and p.rehearsal(T4) is None and "rehearsal" not in p.to_json()


def test_checks_stay_gates_on_every_other_cloud_and_on_local_the_rest_still_apply() -> None:
    cheap_k80 = replace(T4, gpu_name="K80", price_hourly=0.1)
    req = PlanRequest(gpu_names=frozenset({"T4"}), clouds=("local", "gcp"), provisionable_clouds=PROV)
    p = plan(req, catalog([cheap_k80, LOCAL]), TODAY)
    assert p.chosen is LOCAL and p.rejected == {"gcp": {"gpu_name": 1}}
    # a cloud the request says is not provisionable is still rejected for it (a rehearsal relaxes no such check)
    p = plan(replace(req, provisionable_clouds=frozenset({"gcp"})), catalog([LOCAL]), TODAY)
    assert p.chosen is None and p.rejected == {"local": {"not_provisionable": 1}}
    # data on another cloud's store is not readable on local: not relaxed by a rehearsal
    p = plan(replace(req, data_excluded_clouds={"local": "gs:// data"}), catalog([LOCAL]), TODAY)
    assert p.chosen is None and p.rejected == {"local": {"data_locality": 1}}


def _trainvm(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TRAINVM_TODAY": "2026-12-07", "TRAINVM_NO_CACHE": "1",
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True, env=env,
                          cwd=HERE.parents[1])


def test_plan_says_rehearsal_in_its_text_and_json(tmp_path: Path) -> None:
    profile = str(HERE / "fixtures" / "t4-rehearsal.yaml")
    out = _trainvm(tmp_path, "plan", profile, "--cloud", "local")
    assert out.returncode == 0, out.stderr
    assert "rehearsal: no GPU - " in out.stdout and "never a pass" in out.stdout
    assert "$0.00" in out.stdout and "$0. " not in out.stdout  # a zero price prints as money
    assert "matches no local region" not in out.stderr  # regions are not a gate for a rehearsal: the line says so
    doc = json.loads(_trainvm(tmp_path, "plan", profile, "--cloud", "local", "--json").stdout)
    assert doc["chosen"]["cloud"] == "local" and doc["rehearsal"]["status"] == "no GPU"
    assert "region" in doc["rehearsal"]["not_checked"]
    # without --cloud local the profile's own clouds: no rehearsal, nothing of the host read
    doc = json.loads(_trainvm(tmp_path, "plan", profile, "--json").stdout)
    assert doc["chosen"]["cloud"] == "gcp" and "rehearsal" not in doc


def test_local_nvme_is_what_this_machine_can_back_and_a_larger_ask_is_rehearsed_on_thin_devices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINVM_LOCAL_DIR", str(tmp_path / "not" / "made" / "yet"))
    free = host.free_gib(tmp_path)
    (o,) = host.host_offers(cpu_count=2, meminfo=MEMINFO, machine="x86_64")
    assert o.local_nvme_max_gib == free  # the file system of the local cloud's folder (its nearest existing parent)
    small = host.host_offers(cpu_count=2, meminfo=MEMINFO, machine="x86_64", disk_free_gib=100)[0]
    req = PlanRequest(gpu_names=frozenset({"T4"}), min_vcpus=2, min_memory_gib=4, clouds=("local",),
                      provisionable_clouds=PROV, local_nvme_gib=100)
    r = plan(req, catalog([small]), TODAY).rehearsal(small)
    assert r is not None and "local_nvme" not in r.not_checked  # 100 GiB free backs it
    p = plan(replace(req, local_nvme_gib=750, clouds=("local", "gcp")),
             catalog([small, replace(T4, local_nvme_max_gib=0)]), TODAY)
    r = p.rehearsal(small)
    assert p.chosen is small and r is not None and r.not_checked == ("gpu_name", "gpu_count", "local_nvme")
    assert p.rejected == {"gcp": {"local_nvme": 1}}  # still a gate on every cloud that can pass


def test_plan_local_nvme_on_local(tmp_path: Path) -> None:
    profile = tmp_path / "nvme.yaml"
    profile.write_text((HERE / "fixtures" / "t4-rehearsal.yaml").read_text().replace(
        "  gpu: T4\n", "  gpu: T4\n  local_nvme_gib: 750\n"))
    doc = json.loads(_trainvm(tmp_path, "plan", str(profile), "--cloud", "local", "--json").stdout)
    assert doc["chosen"]["cloud"] == "local"
    parts = {p["what"]: p for p in doc["estimate"]["cost"]["parts"]}
    assert parts["local SSD"] == {"what": "local SSD", "detail": "750 GiB local NVMe", "hourly": 0.0,
                                  "kept_when_stopped": False,
                                  "source": "this machine's own CPUs, memory and disk: no bill"}


def test_plan_on_local_prices_this_machine_at_zero_and_says_what_the_store_keeps(tmp_path: Path) -> None:
    """Issue 38: the boot disk is a file on this machine (not "unknown"), and the local store has no lifecycle rule
    (no "30 days"): both words come from the local CloudSpec (on_host, payload.expires/billed)."""
    profile = str(HERE / "fixtures" / "t4-rehearsal.yaml")
    out = _trainvm(tmp_path, "plan", profile, "--cloud", "local")
    assert out.returncode == 0, out.stderr
    cost = next(line for line in out.stdout.splitlines() if line.startswith("cost: "))
    assert cost.startswith("cost: running $0.000/h (this machine's own CPUs, memory and disk: no bill); stopped $0.000/h")
    assert "unknown" not in cost
    payload = next(line for line in out.stdout.splitlines() if line.startswith("payload: "))
    assert "no bill" in payload and "kept until `trainvm down` of the last VM that uses it (nothing expires)" in payload
    assert "days" not in payload and "$0.0" not in payload
    doc = json.loads(_trainvm(tmp_path, "plan", profile, "--cloud", "local", "--json").stdout)
    est = doc["estimate"]["cost"]
    assert est["unknown"] == [] and est["running_hourly"] == 0.0 and est["stopped_hourly"] == 0.0
    assert {p["what"]: p["source"] for p in est["parts"]} == {
        "compute": "this machine's own CPUs, memory and disk: no bill",  # not the price catalog: a host fact
        "boot disk": "this machine's own CPUs, memory and disk: no bill"}
    assert doc["payload"]["expires_days"] is None and doc["payload"]["cost_monthly_at_most"] == 0.0
    # a cloud's store keeps its lifecycle rule and its bound
    gcp = json.loads(_trainvm(tmp_path, "plan", profile, "--json").stdout)
    assert gcp["payload"]["expires_days"] == 30 and gcp["payload"]["cost_monthly_at_most"] > 0
    assert "unknown" not in json.dumps(gcp["estimate"]["cost"]["unknown"])


def test_a_cluster_is_not_rehearsed_on_local_yet_and_the_plan_says_why(tmp_path: Path) -> None:
    """hardware.nodes > 1: the local CloudSpec has no group engine (``group_engine=False``), so the planner's
    ``cluster`` check (not a rehearsed one) rejects the offer, and the near miss says what to change."""
    assert not CLOUDS["local"].group_engine
    profile = tmp_path / "two.yaml"
    profile.write_text((HERE / "fixtures" / "t4-rehearsal.yaml").read_text().replace("  gpu: T4\n", "  gpu: T4\n  nodes: 2\n"))
    out = _trainvm(tmp_path, "plan", str(profile), "--cloud", "local")
    text = out.stdout + out.stderr
    assert "no feasible offer" in text and "local: cluster 1" in text
    assert "trainvm cannot create 2-node clusters on local yet (hardware.nodes: 1 for one VM)" in text
    doc = json.loads(_trainvm(tmp_path, "plan", str(profile), "--cloud", "local", "--json").stdout)
    assert doc["chosen"] is None and doc["rejected"]["local"] == {"cluster": 1}


def test_plan_on_local_says_the_vm_reads_its_payload_through_its_own_endpoint(tmp_path: Path) -> None:
    """The payload line's "how the VM reads it" is the cloud's fact (PayloadStoreFacts.reads): a local VM has no
    cloud identity, it reads the object through its own endpoint (providers/local/endpoint.py); a cloud's VM reads it
    with its identity."""
    profile = str(HERE / "fixtures" / "t4-rehearsal.yaml")
    out = _trainvm(tmp_path, "plan", profile, "--cloud", "local")
    assert out.returncode == 0, out.stderr
    payload = next(line for line in out.stdout.splitlines() if line.startswith("payload: "))
    assert "identity" not in payload and "through its own endpoint (its QEMU guestfwd channel" in payload
    doc = json.loads(_trainvm(tmp_path, "plan", profile, "--cloud", "local", "--json").stdout)
    assert doc["payload"]["reads"] == CLOUDS["local"].payload.reads
    gcp = _trainvm(tmp_path, "plan", profile)
    assert "read with the VM's identity" in next(line for line in gcp.stdout.splitlines() if line.startswith("payload: "))
