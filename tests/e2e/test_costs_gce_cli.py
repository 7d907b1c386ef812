"""Running and stopped $/h end to end on GCE: `up` (CLI, google-cloud-compute against the GCE emulator) records
the disks' prices as labels on the instance; `list` and `status` read them back from the cloud and show compute +
disks running and what a stopped VM keeps costing; `stop` then `status` says what the stopped VM keeps costing.
What the emulator does not model: billing itself (it keeps labels and states; the prices are the catalog's)."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, gce_cli_env

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
BOOT = 150 * 0.10 / 730  # bert-finetune-t4: 150 GiB pd-balanced boot disk at $0.10/GiB-month (embedded disks.csv)


@pytest.fixture
def gce(monkeypatch, tmp_path):
    yield from gce_cli_env(monkeypatch, tmp_path)


def test_up_records_disk_prices_and_list_status_show_running_and_stopped(cli, gce) -> None:
    r = cli("up", T4, "--yes", "--json", "--cloud", "gcp")
    assert r.code == 0, r.err
    name = r.json()["name"]
    [inst] = [v for k, v in gce.instances.items() if k[2] == name]
    assert inst["labels"]["trainvm-disks-price"] == inst["labels"]["trainvm-kept-price"] == f"{round(BOOT * 1e6)}u"

    [v] = cli("list", "--json").json()["vms"]
    assert v["price_hourly"] == pytest.approx(0.73)
    assert v["running_hourly"] == pytest.approx(0.73 + BOOT, abs=1e-6)
    assert v["stopped_hourly"] == pytest.approx(BOOT, abs=1e-6) and v["billing_now_hourly"] == v["running_hourly"]

    assert cli("stop", name, "--yes").code == 0
    [v] = cli("status", name, "--json").json()["vms"]
    assert v["state"] == "TERMINATED" and v["billing_now_hourly"] == pytest.approx(BOOT, abs=1e-6)
    text = cli("status", name).out
    assert f"{name} is TERMINATED: compute billing has ended; it keeps costing $0.021/h (the boot disk keeps billing)" in text
