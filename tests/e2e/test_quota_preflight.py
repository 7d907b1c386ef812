"""Issue 27 (quota half): the quota preflight, through the real CLI and the real SDKs against the emulators.
A region without the quota headroom an offer needs is skipped by `up` with no create call and named with its
numbers; a quota read that fails warns and `up` goes on as without the check; `plan --quota` shows the readings.

Not modelled by the GCE emulator: usage growing with the VMs it creates (a test sets usage), and the hundreds
of metrics GCE lists that trainvm never reads."""

from __future__ import annotations

from pathlib import Path

from tests.emulators.gce import GceEmulator
from tests.emulators.gce_group import GceGroupEmulator
from tests.helpers import REPO

PROFILE = f"""\
name: preflight
extends: {REPO / "profiles" / "base" / "torch-2.4-cu124.yaml"}
hardware: {{gpu: T4, gpu_count: 1, min_vcpus: 4}}
placement: {{clouds: [gcp]}}
stack: {{packages: ["torch==2.4.1+cu124"]}}
"""


def _profile(tmp_path: Path, nodes: int = 1) -> str:
    path = tmp_path / "preflight.yaml"
    text = PROFILE if nodes == 1 else PROFILE.replace("min_vcpus: 4}", f"min_vcpus: 4, nodes: {nodes}}}")
    path.write_text(text)
    return str(path)


def _regions(cli, path: str) -> list[str]:
    doc = cli("plan", path, "--json").json()
    return list(dict.fromkeys(o["region"] for o in [doc["chosen"], *doc["failover"]]))


def _gce(env, emu: GceEmulator) -> None:
    env.setenv("TRAINVM_GCE_ENDPOINT", emu.url)
    env.setenv("GOOGLE_CLOUD_PROJECT", "quota-proj")


def _inserted_regions(emu: GceEmulator) -> list[str]:
    return [r.path.split("/zones/")[1].split("/")[0].rsplit("-", 1)[0]
            for r in emu.calls("instances.insert") + emu.calls("instances.bulkInsert")]


def test_zero_gpu_quota_region_is_skipped_without_a_create_call(cli, env, tmp_path) -> None:
    path = _profile(tmp_path)
    first, second = _regions(cli, path)[:2]
    with GceEmulator() as emu:
        _gce(env, emu)
        emu.set_quota("NVIDIA_T4_GPUS", 0, region=first)  # a fresh project: no T4s in the first region
        emu.set_quota("NVIDIA_T4_GPUS", 4, region=second)
        emu.set_quota("GPUS_ALL_REGIONS", 8)
        up = cli("up", path, "--yes", "--json")
        assert up.code == 0, up.err
        doc = up.json()
        assert doc["region"] == second
        assert first not in _inserted_regions(emu) and _inserted_regions(emu) == [second]
        skipped = doc["attempts"][0]
        assert (skipped["region"], skipped["outcome"], skipped["error_code"]) == (first, "no-quota", "QUOTA_PREFLIGHT")
        assert f"quota: 1 T4 GPU needed, 0 free in {first} (NVIDIA_T4_GPUS: limit 0, 0 in use)" in skipped["message"]
        assert "request an increase" in skipped["message"]
        checks = {(q["region"], q["status"]) for q in doc["summary"]["quota"]}
        assert (first, "short") in checks and (second, "ok") in checks
        assert len(emu.calls("regions.get")) == 2  # one read per region, not one per zone


def test_request_larger_than_the_headroom_is_refused_there_with_the_numbers(cli, env, tmp_path) -> None:
    path = _profile(tmp_path, nodes=2)
    first, second = _regions(cli, path)[:2]
    with GceGroupEmulator() as emu:  # 2 nodes: one bulkInsert
        _gce(env, emu)
        emu.set_quota("NVIDIA_T4_GPUS", 4, usage=3, region=first)  # 1 free, 2 asked (1 GPU x 2 nodes)
        emu.set_quota("NVIDIA_T4_GPUS", 4, region=second)
        up = cli("up", path, "--yes")
        assert up.code == 0, up.err
        assert f"skipped gcp {first}: quota: 2 T4 GPUs needed, 1 free in {first} (NVIDIA_T4_GPUS: limit 4, 3 in use)" in up.err
        assert _inserted_regions(emu) and first not in _inserted_regions(emu)


def test_all_regions_gpu_quota_counts_against_every_region(cli, env, tmp_path) -> None:
    path = _profile(tmp_path)
    with GceEmulator() as emu:
        _gce(env, emu)
        emu.set_quota("GPUS_ALL_REGIONS", 0)  # the project-wide cap of a new project
        up = cli("up", path, "--yes", "--json")
        assert up.code == 1
        assert emu.calls("instances.insert") == []
        attempts = up.json()["error"]["attempts"]
        assert attempts and all(a["outcome"] == "no-quota" for a in attempts)
        assert "1 GPU needed, 0 free in all regions (GPUS_ALL_REGIONS: limit 0, 0 in use)" in attempts[0]["message"]


def test_quota_read_refused_warns_and_proceeds_as_before(cli, env, tmp_path) -> None:
    path = _profile(tmp_path)
    first = _regions(cli, path)[0]
    with GceEmulator() as emu:
        _gce(env, emu)
        emu.set_quota("NVIDIA_T4_GPUS", 0, region=first)  # would be skipped, if it could be read
        emu.inject("permission_403", method="regions.get", times=None, permission="compute.regions.get",
                   resource=f"projects/quota-proj/regions/{first}")
        up = cli("up", path, "--yes")
        assert up.code == 0, up.err
        assert f"quota: not checked in gcp {first} (the quota read failed" in up.err
        assert _inserted_regions(emu)[0] == first  # a failed read is never a "no quota"


def test_plan_quota_names_the_zero_quota_region(cli, env, tmp_path) -> None:
    path = _profile(tmp_path)
    first, second = _regions(cli, path)[:2]
    with GceEmulator() as emu:
        _gce(env, emu)
        emu.set_quota("NVIDIA_T4_GPUS", 0, region=first)
        emu.set_quota("NVIDIA_T4_GPUS", 1, region=second)
        offline = cli("plan", path)
        assert offline.code == 0 and "quota:" not in offline.out and emu.requests == []  # plan stays offline
        r = cli("plan", path, "--quota")
        assert r.code == 0, r.err
        assert f"quota: 1 T4 GPU needed, 0 free in {first}" in r.out and "`up` skips it" in r.out
        assert f"quota: ok in gcp {second}" in r.out
        doc = cli("plan", path, "--quota", "--json").json()
        assert {(q["region"], q["status"]) for q in doc["quota"]} >= {(first, "short"), (second, "ok")}
        assert all(q["age_seconds"] >= 0 for q in doc["quota"])


def test_plan_quota_without_credentials_says_not_checked(cli, env, tmp_path) -> None:
    r = cli("plan", _profile(tmp_path), "--quota")
    assert r.code == 0, r.err
    assert "quota: not checked in gcp" in r.out and "no credentials" in r.out


AZURE_PROFILE = PROFILE.replace("clouds: [gcp]", "clouds: [azure]")


def _azure_profile(tmp_path: Path, spot: bool = False) -> str:
    path = tmp_path / "preflight-azure.yaml"
    path.write_text(AZURE_PROFILE.replace("clouds: [azure]", f"clouds: [azure], spot: {str(spot).lower()}"))
    return str(path)


def _vm_put_locations(emu) -> list[str]:
    return [r.body["location"] for r in emu.calls("PUT", r"/virtualMachines/[^/]+$")]


def test_azure_zero_family_quota_location_is_skipped_without_a_create_call(cli, env, tmp_path) -> None:
    """The ARM emulator's usages list (arm_quota.py) is what Azure documents; its usage does not grow with the VMs
    it creates."""
    from tests.emulators.arm import ArmEmulator
    from tests.emulators.arm_quota import set_quota

    path = _azure_profile(tmp_path)
    first, second = _regions(cli, path)[:2]
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        try:
            set_quota(emu, first, "standardNCASv3_T4Family", 0)  # a new subscription: no T4 family vCPUs
            set_quota(emu, second, "standardNCASv3_T4Family", 24, current=20)
            up = cli("up", path, "--yes", "--json")
            assert up.code == 0, up.err
            doc = up.json()
            assert doc["region"] == second
            assert _vm_put_locations(emu) == [second]  # no create call in the zero-quota location
            skipped = doc["attempts"][0]
            assert (skipped["region"], skipped["outcome"]) == (first, "no-quota")
            assert (f"quota: 4 NCasT4_v3 family vCPUs needed, 0 free in {first} (standardNCASv3_T4Family: limit 0, 0 in use)"
                    in skipped["message"]) and "Azure portal" in skipped["message"]
        finally:
            emu.finish_operations(stuck=True)


def test_azure_spot_counts_against_low_priority_cores(cli, env, tmp_path) -> None:
    from tests.emulators.arm import ArmEmulator
    from tests.emulators.arm_quota import set_quota

    path = _azure_profile(tmp_path, spot=True)
    first = _regions(cli, path)[0]
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        set_quota(emu, first, "lowPriorityCores", 3)  # 3 Spot vCPUs free, 4 asked; the family quota is not used
        r = cli("plan", path, "--quota")
        assert r.code == 0, r.err
        assert f"quota: 4 Spot (low-priority) vCPUs needed, 3 free in {first} (lowPriorityCores: limit 3, 0 in use)" in r.out


def test_every_catalog_azure_family_has_its_quota_name() -> None:
    from provisioner.catalog.storage import load_catalog
    from provisioner.providers.azure.quota import FAMILY_QUOTA

    families = {o.family for o in load_catalog().offers if o.cloud == "azure"}
    assert families - set(FAMILY_QUOTA) == set()
