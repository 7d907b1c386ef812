"""disks.csv: the catalog's disk prices (loading, clear errors with file:line, tier lookup) and the cost record
built from them (catalog/costs.py): compute + disks running, persistent disks stopped, unknown never 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.catalog import CatalogError, load_catalog, write_catalog
from provisioner.catalog.costs import cost_of
from provisioner.catalog.disks import DISKS_FILE, DiskPrices, read_disk_prices
from tests.catalog.test_catalog_storage import OFFERS, mk

HEADER = "cloud,region,disk_type,size_max_gib,unit,price_month,source,fetched_at\n"
GOOD = (HEADER
        + "gcp,*,ssd,,gib,0.17,GCE page pd-ssd,2026-11-27\n"
        + "gcp,europe-west4,ssd,,gib,0.187,GCE page pd-ssd europe-west4,2026-11-27\n"
        + "gcp,*,local_ssd,,gib,0.08,GCE page Local SSD,2026-11-27\n"
        + "azure,*,ssd,128,disk,19.71,P10 LRS Disk,2026-11-27\n"
        + "azure,*,ssd,512,disk,73.22,P20 LRS Disk,2026-11-27\n"
        + "azure,*,ssd,256,disk,38.01,P15 LRS Disk,2026-11-27\n")


def folder_with(tmp_path: Path, disks_text: str | None) -> Path:
    cat = tmp_path / "cat"
    write_catalog(cat, OFFERS, source="unit test", catalog_date="2026-01-02")
    if disks_text is not None:
        (cat / DISKS_FILE).write_text(disks_text)
        manifest = json.loads((cat / "catalog.json").read_text())
        manifest["files"].append(DISKS_FILE)
        (cat / "catalog.json").write_text(json.dumps(manifest))
    return cat


def test_embedded_catalog_carries_disk_prices_with_sources() -> None:
    cat = load_catalog()
    assert "disks.csv" in json.loads((cat.path / "catalog.json").read_text())["files"]
    assert cat.provenance["disk_prices"]["file"] == DISKS_FILE
    rows = cat.disk_prices.rows
    assert {(r.cloud, r.disk_type) for r in rows} >= {("gcp", "ssd"), ("gcp", "local_ssd"), ("azure", "ssd"),
                                                     ("aws", "balanced")}
    assert all(r.source and r.fetched_at for r in rows)
    # AWS "ssd" is gp3 with provisioned IOPS: its price depends on them, so it is not in the table
    assert not cat.disk_prices.rows_for("aws", "us-east-1", "ssd")


def test_loads_rows_region_default_and_tiers(tmp_path) -> None:
    prices = load_catalog(folder_with(tmp_path, GOOD)).disk_prices
    assert prices.quote("gcp", "us-central1", "ssd", 500).monthly == pytest.approx(85.0)  # the `*` row
    assert prices.quote("gcp", "europe-west4", "ssd", 100).monthly == pytest.approx(18.7)  # its own row
    q = prices.quote("azure", "eastus", "ssd", 200)  # smallest tier >= 200 GiB: P15
    assert (q.monthly, q.billed_gib) == (38.01, 256)
    assert prices.quote("azure", "eastus", "ssd", 128).billed_gib == 128
    assert prices.quote("azure", "eastus", "ssd", 600) is None  # above the largest tier listed: unknown
    assert prices.quote("azure", "eastus", "balanced", 100) is None  # not in the table: unknown, not 0


def test_a_folder_without_disks_csv_prices_no_disk(tmp_path) -> None:
    cat = load_catalog(folder_with(tmp_path, None))
    assert not cat.disk_prices
    c = cost_of(cat.offers[0], disk_prices=cat.disk_prices, boot_disk_type="balanced", boot_disk_gib=100)
    assert c.compute_hourly == cat.offers[0].price_hourly
    assert c.disks_hourly is None and c.running_hourly is None and c.stopped_hourly is None
    assert c.running_hourly_known == cat.offers[0].price_hourly and "boot disk" in c.unknown[0]


@pytest.mark.parametrize("row, pattern", [
    ("gcp,*,nvme,,gib,0.1,x,2026-11-27", r"disk_type 'nvme'"),
    ("gcp,*,ssd,,month,0.1,x,2026-11-27", r"unit 'month'"),
    ("gcp,*,ssd,100,gib,0.1,x,2026-11-27", r"size_max_gib must be empty"),
    ("azure,*,ssd,,disk,19.71,x,2026-11-27", r"size_max_gib '': unit disk needs"),
    ("gcp,*,ssd,,gib,,x,2026-11-27", r"price_month '' is not a number \(leave the row out"),
    ("gcp,*,ssd,,gib,-1,x,2026-11-27", r"price_month .-1. must be >= 0"),
    ("gcp,*,ssd,,gib,0.1,,2026-11-27", r"source must say"),
    ("gcp,*,ssd,,gib,0.1,x,27.11.2026", r"fetched_at '27.11.2026' is not YYYY-MM-DD"),
    ("oracle,*,ssd,,gib,0.1,x,2026-11-27", r"cloud 'oracle'"),
    ("gcp,*,ssd,,gib,0.1,x", r"7 fields, expected 8"),
    ("gcp,*,ssd,,gib,0.2,again,2026-11-27", r"same cloud, region, disk_type and size_max_gib as line 2"),
])
def test_bad_row_is_a_catalog_error_with_file_and_line(tmp_path, row, pattern) -> None:
    cat = folder_with(tmp_path, GOOD + row + "\n")
    with pytest.raises(CatalogError, match=r"disks\.csv:8: " + pattern):
        load_catalog(cat)


def test_bad_header_and_mixed_units(tmp_path) -> None:
    with pytest.raises(CatalogError, match=r"disks\.csv:1: header must be cloud,region,disk_type"):
        load_catalog(folder_with(tmp_path, "cloud,region,type\n"))
    p = tmp_path / "mixed.csv"
    p.write_text(HEADER + "azure,*,ssd,,gib,0.1,x,2026-11-27\nazure,*,ssd,128,disk,19.71,x,2026-11-27\n")
    with pytest.raises(CatalogError, match=r"azure \* ssd: one 'gib' row or 'disk' tiers"):
        read_disk_prices(p)


def test_bad_disks_csv_is_a_one_line_cli_error(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_CATALOG", str(folder_with(tmp_path, GOOD + "gcp,*,ssd,,gib,0.2,again,2026-11-27\n")))
    r = cli("catalog", "show", "--gpu", "L4")
    assert r.code == 2 and "disks.csv:8: same cloud" in r.err and "Traceback" not in r.err


# ---- the cost record -------------------------------------------------------------------------------------
def bert_pretrain_offer():
    """bert-pretrain-8xa100 on GCE: a2-highgpu-8g, 500 GiB pd-ssd boot disk, local_nvme_gib 1500, which GCE
    attaches as 8 Local SSD disks (A2 Standard a2-highgpu-8g takes at least 8: providers/gcp/request.py)."""
    cat = load_catalog()
    return cat, next(o for o in cat.offers if o.instance_type == "a2-highgpu-8g" and o.zone == "us-central1-a")


def test_bert_pretrain_on_gce_prices_boot_disk_and_8_local_ssds() -> None:
    cat, offer = bert_pretrain_offer()
    c = cost_of(offer, disk_prices=cat.disk_prices, boot_disk_type="ssd", boot_disk_gib=500, local_nvme_gib=1500)
    boot = 500 * 0.17 / 730  # pd-ssd $0.17/GiB-month (the embedded table's GCE row)
    local = 8 * 375 * 0.08 / 730  # 8 x 375 GiB Local SSD at $0.08/GiB-month
    parts = {p.what: p for p in c.parts}
    assert parts["boot disk"].detail == "500 GiB ssd (pd-ssd)" and parts["boot disk"].hourly == pytest.approx(boot)
    assert parts["local SSD"].detail == "8 x 375 GiB local_ssd" and parts["local SSD"].hourly == pytest.approx(local)
    assert c.compute_hourly == offer.price_hourly
    assert c.running_hourly == pytest.approx(offer.price_hourly + boot + local, abs=1e-5)
    # stopped: the persistent boot disk only (Local SSD is discarded by trainvm's stop and not billed)
    assert c.stopped_hourly == pytest.approx(boot, abs=1e-6)
    assert all("disks-image-pricing" in p.source for p in c.parts[1:])


def test_cluster_costs_are_per_node_times_nodes() -> None:
    cat, offer = bert_pretrain_offer()
    c = cost_of(offer, disk_prices=cat.disk_prices, boot_disk_type="ssd", boot_disk_gib=500, local_nvme_gib=1500,
                nodes=3)
    doc = c.to_json()
    assert doc["cluster_running_hourly"] == pytest.approx(3 * doc["running_hourly"], abs=1e-5)
    assert doc["cluster_stopped_hourly"] == pytest.approx(3 * doc["stopped_hourly"], abs=1e-5)
    assert "for 3 nodes" in c.line()


def test_azure_boot_disk_billed_at_its_tier_and_ip_named_when_stopped(tmp_path) -> None:
    prices = load_catalog(folder_with(tmp_path, GOOD)).disk_prices
    offer = OFFERS[2]  # Standard_NC4as_T4_v3, eastus
    c = cost_of(offer, disk_prices=prices, boot_disk_type="ssd", boot_disk_gib=200)
    assert c.parts[1].hourly == pytest.approx(38.01 / 730) and "billed as 256 GiB" in c.parts[1].detail
    assert "public IP" in c.stopped_note  # the registry's words: it keeps billing, not priced here


def test_unknown_parts_are_named_and_never_counted_as_zero() -> None:
    cat = load_catalog()
    aws = next(o for o in cat.offers if o.cloud == "aws" and o.instance_type == "g5.xlarge")
    c = cost_of(aws, disk_prices=cat.disk_prices, boot_disk_type="ssd", boot_disk_gib=200)
    assert c.running_hourly is None and c.stopped_hourly is None
    assert "running unknown" in c.line() and "stopped unknown" in c.line()
    a3 = next(o for o in cat.offers if o.instance_type == "a3-highgpu-8g")
    c = cost_of(a3, disk_prices=cat.disk_prices, boot_disk_type="ssd", boot_disk_gib=200)
    assert c.running_hourly is None and c.stopped_hourly is not None  # its own Local SSD is not priced
    a4 = next(o for o in cat.offers if o.instance_type == "a4-highgpu-8g")
    c = cost_of(a4, disk_prices=cat.disk_prices, boot_disk_type="balanced", boot_disk_gib=200)
    assert "hyperdisk-balanced" in c.parts[1].source and c.stopped_hourly is None


def test_included_local_nvme_costs_nothing_extra_and_nothing_when_stopped() -> None:
    cat = load_catalog()
    g5 = next(o for o in cat.offers if o.cloud == "aws" and o.instance_type == "g5.2xlarge")
    c = cost_of(g5, disk_prices=cat.disk_prices, boot_disk_type="balanced", boot_disk_gib=100, local_nvme_gib=400)
    assert c.parts[2].hourly == 0 and "instance store" in c.parts[2].source
    assert c.stopped_hourly == pytest.approx(100 * 0.08 / 730, abs=1e-6)


def test_empty_table_is_falsy() -> None:
    assert not DiskPrices()
    assert mk().cloud == "gcp"
