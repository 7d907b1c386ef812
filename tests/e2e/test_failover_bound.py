"""Issue 10: a stock-out must not buy a dearer, different VM. The real CLI and SDKs against the GCE and
ARM emulators: failover stays on the same GPU model and count, never above the plan's bound, and `up`,
the VM's labels/tags and `list` all carry exactly the created offer's price."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.catalog.storage import load_catalog
from tests.emulators.arm import ArmEmulator
from tests.emulators.gce import GceEmulator
from tests.helpers import REPO

#: Accepts any GPU with >= 16 GiB: the shape of profile that used to fail over onto an A10 / L4.
PROFILE = f"""\
name: anygpu
extends: {REPO / "profiles" / "base" / "torch-2.4-cu124.yaml"}
hardware: {{min_gpu_memory_gib: 16, gpu_count: 1}}
placement: {{clouds: [CLOUD]}}
stack: {{packages: ["torch==2.4.1+cu124"]}}
"""
T4_SIZES = ("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3", "Standard_NC16as_T4_v3")
GCE_T4_ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")


def _profile(tmp_path: Path, cloud: str) -> str:
    path = tmp_path / f"any-{cloud}.yaml"
    path.write_text(PROFILE.replace("CLOUD", cloud))
    return str(path)


def _catalog_price(cloud: str, location: str, instance_type: str, gpu: str = "T4") -> float:
    [offer] = [o for o in load_catalog().offers if o.cloud == cloud and o.location == location
               and o.instance_type == instance_type and o.gpu_name == gpu and o.gpu_count == 1]
    return offer.price_hourly


def _plan(cli, path: str) -> dict:
    r = cli("plan", path, "--json")
    assert r.code == 0, r.err
    return r.json()


def test_gce_t4_stockout_fails_over_to_the_same_shape_within_the_bound(cli, env, tmp_path) -> None:
    path = _profile(tmp_path, "gcp")
    planned = _plan(cli, path)
    chosen = planned["chosen"]
    assert (chosen["instance_type"], chosen["gpu_name"], chosen["price_hourly"]) == ("n1-standard-4", "T4", 0.54)
    bound = planned["failover_bound"]["price_hourly"]  # a running price: compute + the boot disk (catalog/costs.py)
    assert bound == pytest.approx((0.54 + planned["estimate"]["cost"]["disks_hourly"]) * 1.25)
    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        for zone in GCE_T4_ZONES:  # every us-central1 zone is out of T4s
            emu.inject("stockout_op", zone=zone, times=None, accelerator="nvidia-tesla-t4")
        up = cli("up", path, "--yes", "--json")
        assert up.code == 0, up.err
        doc = up.json()
        inst = emu.instance(doc["name"])
        accel = inst["guestAccelerators"][0]
        assert accel["acceleratorType"].endswith("/nvidia-tesla-t4") and accel["acceleratorCount"] == 1
        assert doc["instance_type"] == "n1-standard-4" and doc["region"] != "us-central1"
        price = _catalog_price("gcp", doc["zone"], doc["instance_type"])
        assert price <= bound
        assert doc["price_hourly"] == price
        assert inst["labels"]["trainvm-price"] == f"{round(price * 1e6)}u"
        assert [a["instance_type"] for a in doc["attempts"]] == ["n1-standard-4"] * len(doc["attempts"])
        listed = cli("list", "--json").json()["vms"]
        assert [(v["name"], v["price_hourly"]) for v in listed] == [(doc["name"], price)]
        assert listed[0]["last_start"] and listed[0]["billing_compute"] is True
        # stopped after a 10-hour run (what GCE reports after instances.stop): cost stays that run's cost
        with emu._lock:
            emu.instances[emu.find(doc["name"])].update(status="TERMINATED", lastStartTimestamp="2026-11-20T00:00:00.000-08:00",
                                                         lastStopTimestamp="2026-11-20T10:00:00.000-08:00")
        stopped = cli("status", doc["name"], "--json").json()["vms"][0]
        assert stopped["state"] == "TERMINATED" and stopped["billing_compute"] is False
        assert stopped["uptime_hours"] == 10 and stopped["cost_so_far"] == round(price * 10, 2)


def test_gce_every_cheap_offer_stocked_out_stops_instead_of_escalating(cli, env, tmp_path) -> None:
    path = _profile(tmp_path, "gcp")
    bound = _plan(cli, path)["failover_bound"]["price_hourly"]
    with GceEmulator() as emu:
        env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
        env.setenv("GOOGLE_CLOUD_PROJECT", "e2e-proj")
        emu.inject("stockout_op", times=None)  # no zone anywhere has capacity
        up = cli("up", path, "--yes", "--json", "--max-attempts", "500")
        assert up.code == 1
        assert "no VM could be created" in up.err and "failover bound" in up.err
        assert emu.instances == {}
        tried = up.json()["error"]["attempts"]  # --json: the attempts are in the error document
        assert tried and all(t["outcome"] == "capacity" for t in tried)
        inserted = [r for r in emu.calls("instances.insert")]
        for r in inserted:  # every insert was a T4 shape priced within the bound
            body = r.body
            zone = r.path.split("/zones/")[1].split("/")[0]
            mtype = body["machineType"].rsplit("/", 1)[-1]
            assert body["guestAccelerators"][0]["acceleratorType"].endswith("/nvidia-tesla-t4")
            assert _catalog_price("gcp", zone, mtype) <= bound


def test_azure_t4_stockout_in_eastus_fails_over_to_the_same_shape_within_the_bound(cli, env, tmp_path) -> None:
    path = _profile(tmp_path, "azure")
    planned = _plan(cli, path)
    assert (planned["chosen"]["instance_type"], planned["chosen"]["region"]) == ("Standard_NC4as_T4_v3", "eastus")
    bound = planned["failover_bound"]["price_hourly"]  # a running price: compute + the OS disk (catalog/costs.py)
    assert bound == pytest.approx((0.526 + planned["estimate"]["cost"]["disks_hourly"]) * 1.25)
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        try:
            for size in T4_SIZES:  # T4 stocked out in eastus; the A10 and A100 sizes there are not
                emu.inject("sku_not_available_409", location="eastus", size=size, times=None)
            up = cli("up", path, "--yes", "--json")
            assert up.code == 0, up.err
            doc = up.json()
            assert doc["instance_type"] == "Standard_NC4as_T4_v3" and doc["region"] != "eastus"
            price = _catalog_price("azure", doc["region"], doc["instance_type"])
            assert price <= bound and doc["price_hourly"] == price
            assert [(a["region"], a["instance_type"], a["outcome"]) for a in doc["attempts"]] == [
                ("eastus", "Standard_NC4as_T4_v3", "capacity"), (doc["region"], "Standard_NC4as_T4_v3", "created")]
            vm = emu.resource(f"/subscriptions/{emu.subscription_id}/resourceGroups/trainvm-{doc['name']}"
                              f"/providers/Microsoft.Compute/virtualMachines/{doc['name']}")
            assert vm["tags"]["trainvm-price"] == f"{round(price * 1e6)}u"
            listed = cli("list", "--json").json()["vms"]
            assert [(v["name"], v["price_hourly"]) for v in listed] == [(doc["name"], price)]
        finally:
            emu.finish_operations(stuck=True)
