"""`trainvm catalog refresh --cloud aws` against a fake Price List bulk API on a loopback server
(tests/catalog/fake_aws.py says which parts of the files come from the documentation or recordings and which were
built). Not modelled: DescribeSpotPriceHistory and DescribeInstanceTypes (credentials; the refresh does not ask
them: spot prices and shapes stay the catalog's), the JSON offer files, the Query API."""

from __future__ import annotations

import csv
from datetime import UTC, datetime

import pytest

from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog
from provisioner.providers import aws_prices
from tests.catalog.fake_aws import AwsBulkFake, offer_rows
from tests.catalog.price_server import PriceServer

REGION = "us-west-2"


@pytest.fixture
def known(embedded):
    return [o for o in embedded.offers if o.cloud == "aws" and o.region == REGION]


def serve(monkeypatch, files):
    server = PriceServer(AwsBulkFake(files).handle).__enter__()
    monkeypatch.setenv("TRAINVM_AWS_PRICES_URL", server.url)
    return server


def test_refresh_prices_known_types_from_the_linux_on_demand_rows(cli, known, monkeypatch, cache, write_yaml):
    with serve(monkeypatch, {REGION: offer_rows(known, REGION)}) as server:
        r = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION, "--json")
    assert r.code == 0, r.err
    aws = r.json()["clouds"]["aws"]
    assert aws["rows"] == aws["known_rows"] == len(known) and aws["dropped"] == {} and aws["ambiguous"] == []
    assert any("DescribeSpotPriceHistory needs credentials" in n for n in aws["notes"])
    assert server.paths() == ["/offers/v1.0/aws/AmazonEC2/current/region_index.json",
                              f"/offers/v1.0/aws/AmazonEC2/20261101000000/{REGION}/index.csv"]
    now = {o.key(): o for o in load_catalog().offers if o.cloud == "aws" and o.region == REGION}
    # not the Windows, BYOL, Dedicated, Unused Reservation, SQL or Reserved rows
    assert {k: o.price_hourly for k, o in now.items()} == {o.key(): o.price_hourly for o in known}
    assert {k: o.spot_price_hourly for k, o in now.items()} == {o.key(): o.spot_price_hourly for o in known}
    p = write_yaml("name: t\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n")
    refreshed = cli("plan", str(p), "--cloud", "aws", "--region", REGION, "--json").json()
    monkeypatch.setenv("TRAINVM_CATALOG", str(EMBEDDED_DIR))
    snapshot = cli("plan", str(p), "--cloud", "aws", "--region", REGION, "--json").json()
    assert refreshed["catalog"]["origin"] == "refreshed" and snapshot["catalog"]["origin"] == "TRAINVM_CATALOG"
    assert refreshed["chosen"] == snapshot["chosen"] and refreshed["failover"] == snapshot["failover"]


def test_row_provenance_and_gp3_disk_prices(cli, known, monkeypatch, cache):
    with serve(monkeypatch, {REGION: offer_rows(known, REGION)}):
        doc = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION, "--json").json()
    with open(doc["path"] + "/aws.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    mine = [r for r in rows if r["region"] == REGION]
    assert mine and all(r["source"].startswith("AWS Price List bulk API") and "SKU LIN" in r["source"]
                        for r in mine)
    assert {r["fetched_at"] for r in mine} == {datetime.now(UTC).date().isoformat()}
    other = next(r for r in rows if r["region"] != REGION)
    assert other["source"].startswith("SkyPilot catalog v8") and other["fetched_at"] == "2026-09-23"
    with open(doc["path"] + "/disks.csv", newline="") as fh:
        disks = list(csv.DictReader(fh))
    assert [(d["region"], d["disk_type"], d["unit"], d["size_max_gib"], d["price_month"]) for d in disks] == [
        (REGION, t, "gib", "", "0.08") for t in ("balanced", "ssd", "standard")]  # gp3, not gp2


def test_an_unused_reservation_cheaper_than_on_demand_is_not_a_price(cli, known, monkeypatch, cache):
    rows = offer_rows(known, REGION)
    lin = [r for r in rows if r["SKU"].startswith("LIN") and r["TermType"] == "OnDemand"]
    rows = [r for r in rows if r not in lin[:1]]  # the first type has only trap rows left
    with serve(monkeypatch, {REGION: rows}):
        doc = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION, "--json").json()
    gone = lin[0]["Instance Type"]
    n = sum(1 for o in known if o.instance_type == gone)
    assert doc["clouds"]["aws"]["dropped"] == {"no_ondemand_price": n}
    assert not [o for o in load_catalog().offers if o.region == REGION and o.instance_type == gone]


def test_an_offer_file_over_the_cap_is_an_error_and_nothing_is_written(cli, known, monkeypatch, cache):
    monkeypatch.setattr(aws_prices, "MAX_BYTES", 2000)
    with serve(monkeypatch, {REGION: offer_rows(known, REGION)}):
        r = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION)
    assert r.code == 3 and "larger than" in r.err and "Traceback" not in r.err
    assert not (cache / "CURRENT").exists()


def test_a_region_without_an_offer_file_is_an_error(cli, known, monkeypatch, cache):
    with serve(monkeypatch, {"us-east-1": []}):
        r = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION)
    assert r.code == 3 and f"no offer file for {REGION}" in r.err
