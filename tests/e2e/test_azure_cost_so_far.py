"""issue 10: Azure "cost so far" through the real CLI and azure-mgmt-compute against the ARM emulator.

Azure reports no start time (PowerState statuses carry none); a start is a control-plane update whose
completion sets the time of the instance view's ProvisioningState/succeeded status, and any later update moves
it later. So a running VM started at or before that time: `status`/`list` count its cost from it as a lower
bound (">=", cost_so_far_is_minimum), and say "unknown" once it is deallocated (its last run's start is not
known). The emulator models that time for create, update and the power actions (tests/emulators/arm_vm_actions.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from provisioner.providers.azure.power import latest_start
from tests.emulators.arm import ArmEmulator

REPO = Path(__file__).resolve().parents[2]
T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


def _when(stamp: str) -> datetime:
    t = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _profile(tmp_path: Path) -> str:
    p = tmp_path / "t4-azure.yaml"  # the gs:// corpus needs a credential reference on Azure
    p.write_text(f"extends: {T4}\nname: bert-finetune\ndata:\n  - {{source: 'gs://example-ml-data/glue/', "
                 "dest: /mnt/data/glue, credential: 'secret://azure-keyvault/trainvmkv/glue-reader'}\n")
    return str(p)


@contextmanager
def _azure_vm(cli: Any, env: Any, tmp_path: Path) -> Iterator[str]:
    """A VM made by `trainvm up --cloud azure` against the ARM emulator; yields its name."""
    with ArmEmulator() as emu:
        for k, v in emu.env().items():
            env.setenv(k, v)
        env.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")
        try:
            up = cli("up", _profile(tmp_path), "--yes", "--json", "--cloud", "azure")
            assert up.code == 0, up.err
            yield up.json()["name"]
        finally:
            emu.finish_operations(stuck=True)


def test_running_cost_is_a_lower_bound_from_the_last_operation_and_unknown_once_deallocated(cli, env, tmp_path) -> None:
    with _azure_vm(cli, env, tmp_path) as name:
        [v] = cli("list", "--json").json()["vms"]
        assert v["state"] == "RUNNING" and v["billing_compute"] is True
        assert v["last_start"] and _when(v["last_start"]) >= _when(v["created"])
        assert v["cost_so_far"] is not None and v["cost_so_far_is_minimum"] is True
        assert ">= $" in cli("status", name, "--cloud", "azure").out

        assert cli("stop", name, "--yes", "--cloud", "azure").code == 0
        [v] = cli("list", "--json").json()["vms"]
        assert v["state"] == "DEALLOCATED" and v["billing_compute"] is False
        assert v["last_start"] is None and v["uptime_hours"] is None and v["cost_so_far"] is None
        assert v["cost_so_far_is_minimum"] is False and "unknown" in cli("list").out

        before_start = datetime.now(UTC)
        assert cli("start", name, "--cloud", "azure").code == 0
        [v] = cli("list", "--json").json()["vms"]
        # counted from the start just made, not from creation (creation is earlier than before_start)
        assert v["state"] == "RUNNING" and _when(v["last_start"]) >= before_start > _when(v["created"])
        assert v["cost_so_far_is_minimum"] is True and v["uptime_hours"] is not None


def test_sdk_instance_view_time_moves_with_a_start(cli, env, tmp_path) -> None:
    """What the provider reads, read through azure-mgmt-compute: the ProvisioningState/succeeded time of the
    instance view is the end of the last operation (here create, then deallocate, then start)."""
    from provisioner.providers.azure.api import wire as _wire
    from provisioner.providers.azure.clients import Settings, default_credential, make_clients

    with _azure_vm(cli, env, tmp_path) as name:
        rg = f"trainvm-{name}"
        compute = make_clients(Settings.from_env(), default_credential()).compute.virtual_machines

        def started() -> str | None:
            vm = _wire(compute.get(rg, name, expand="instanceView"))  # the provider's own conversion
            return latest_start(vm["properties"])

        first = started()
        assert first is not None
        compute.begin_deallocate(rg, name).result()
        assert started() is None  # deallocated: no running time to count
        compute.begin_start(rg, name).result()
        again = started()
        assert again is not None and _when(again) > _when(first)


def test_latest_start_needs_a_running_vm_and_a_time() -> None:
    ok = {"code": "ProvisioningState/succeeded", "time": "2026-11-25T10:00:00Z"}
    running = {"code": "PowerState/running"}
    assert latest_start({"provisioningState": "Succeeded", "instanceView": {"statuses": [ok, running]}}) == ok["time"]
    for statuses in ([ok, {"code": "PowerState/starting"}], [ok, {"code": "PowerState/deallocated"}],
                     [{"code": "ProvisioningState/succeeded"}, running], [ok]):
        assert latest_start({"provisioningState": "Succeeded", "instanceView": {"statuses": statuses}}) is None
    assert latest_start({"provisioningState": "Updating", "instanceView": {"statuses": [ok, running]}}) is None
