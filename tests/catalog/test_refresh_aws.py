"""`trainvm catalog refresh --cloud aws` against a fake Price List bulk API on a loopback server
(tests/catalog/fake_aws.py says which parts of the files come from the documentation or recordings and which were
built); DescribeSpotPriceHistory through botocore's Stubber (moto answers a constant 0.00001 for every spot price),
its responses built from the botocore model's SpotPrice shape. Without credentials (every test but the spot ones:
``ec2_client`` answers None, as it does with no AWS credentials) spot prices stay the catalog's.
Not modelled: DescribeInstanceTypes (shapes stay the catalog's), the JSON offer files, the Query API."""

from __future__ import annotations

import csv
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog
from provisioner.providers.aws import prices as aws_prices
from tests.catalog.fake_aws import AwsBulkFake, offer_rows
from tests.catalog.price_server import PriceServer

REGION = "us-west-2"


@pytest.fixture(autouse=True)
def no_aws_credentials(monkeypatch, request):
    if "real_ec2_client" not in request.node.name:
        monkeypatch.setattr(aws_prices, "ec2_client", lambda region: None)


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
    assert any("no AWS credentials for DescribeSpotPriceHistory" in n for n in aws["notes"])
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
    assert sorted((d["region"], d["disk_type"], d["unit"], d["size_max_gib"], d["price_month"]) for d in disks
                  if d["cloud"] == "aws" and d["region"] != "*") == [
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


def test_spot_prices_from_describe_spot_price_history_when_credentials_exist(cli, known, monkeypatch, cache):
    import boto3
    from botocore.stub import ANY, Stubber

    client = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    types = sorted({o.instance_type for o in known})
    g4 = next(o for o in known if o.instance_type == "g4dn.xlarge")
    old, new = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 20, tzinfo=UTC)
    params = {"InstanceTypes": types, "ProductDescriptions": ["Linux/UNIX"], "StartTime": ANY}
    stub.add_response("describe_spot_price_history", {"NextToken": "t2", "SpotPriceHistory": [
        {"AvailabilityZoneId": g4.zone, "AvailabilityZone": "us-west-2a", "InstanceType": "g4dn.xlarge",
         "ProductDescription": "Linux/UNIX", "SpotPrice": "0.300000", "Timestamp": old},
        {"AvailabilityZoneId": g4.zone, "AvailabilityZone": "us-west-2a", "InstanceType": "g4dn.xlarge",
         "ProductDescription": "Linux/UNIX", "SpotPrice": "0.210000", "Timestamp": new}]}, params)
    # a page without AvailabilityZoneId: the zone name is the account's, mapped to the catalog's AZ ID
    stub.add_response("describe_spot_price_history", {"SpotPriceHistory": [
        {"AvailabilityZone": "us-west-2x", "InstanceType": "g5.xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "0.450000", "Timestamp": new}]}, {**params, "NextToken": "t2"})
    g5 = next(o for o in known if o.instance_type == "g5.xlarge")
    stub.add_response("describe_availability_zones", {"AvailabilityZones": [
        {"ZoneName": "us-west-2x", "ZoneId": g5.zone, "RegionName": REGION, "State": "available"}]},
        {"AllAvailabilityZones": True})
    stub.activate()
    monkeypatch.setattr(aws_prices, "ec2_client", lambda region: client)
    with serve(monkeypatch, {REGION: offer_rows(known, REGION)}):
        r = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION, "--json")
    assert r.code == 0, r.err
    stub.assert_no_pending_responses()
    assert any(n.startswith("spot: DescribeSpotPriceHistory") for n in r.json()["clouds"]["aws"]["notes"])
    now = {o.key(): o for o in load_catalog().offers if o.cloud == "aws" and o.region == REGION}
    assert now[g4.key()].spot_price_hourly == 0.21  # the newest
    assert now[g5.key()].spot_price_hourly == 0.45
    others = [o for k, o in now.items() if k not in (g4.key(), g5.key())]
    assert others and all(o.spot_price_hourly is None and "no_spot_price" in o.flags for o in others)


def test_spot_api_refusal_is_a_cloud_error_and_nothing_is_written(cli, known, monkeypatch, cache):
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_client_error("describe_spot_price_history", "UnauthorizedOperation",
                          "You are not authorized to perform this operation.", 403)
    stub.activate()
    monkeypatch.setattr(aws_prices, "ec2_client", lambda region: client)
    with serve(monkeypatch, {REGION: offer_rows(known, REGION)}):
        r = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION)
    assert r.code == 3 and "not authorized" in r.err and "Traceback" not in r.err
    assert not (cache / "CURRENT").exists()


def test_real_ec2_client_is_none_without_any_aws_credentials(monkeypatch, tmp_path):
    """The real ``ec2_client`` on a machine with no AWS credentials anywhere in boto3's chain: None (the refresh
    then keeps the catalog's spot prices), not the "no AWS credentials" error `up` gives."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_DEFAULT_PROFILE", "TRAINVM_AWS_ENDPOINT", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    from provisioner.providers.aws import api as aws_api

    monkeypatch.setattr(aws_api, "_shared_session", lambda: __import__("boto3").session.Session())
    assert aws_prices.ec2_client(REGION) is None


def test_bare_metal_sizes_are_priced_and_local_zone_rows_never_are(cli, known, monkeypatch, cache):
    """Issue 36 items 14 and 15: a ``*.metal`` size's rows say ``Compute Instance (bare metal)``; a region's file also
    holds its Local Zones' (dearer) rows under the same instance type and region code: only ``AWS Region`` rows
    are the region's price, and they are no ambiguous duplicate."""
    metal = {o.key(): o for o in known if o.instance_type.endswith(".metal")}
    assert metal, "the embedded us-west-2 rows have a bare-metal GPU size"
    with serve(monkeypatch, {REGION: offer_rows(known, REGION)}):
        r = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION, "--json")
    assert r.code == 0, r.err
    aws = r.json()["clouds"]["aws"]
    assert aws["dropped"] == {} and aws["ambiguous"] == []
    now = {o.key(): o for o in load_catalog().offers if o.cloud == "aws" and o.region == REGION}
    assert {k: now[k].price_hourly for k in metal} == {k: o.price_hourly for k, o in metal.items()}
    assert {k: o.price_hourly for k, o in now.items()} == {o.key(): o.price_hourly for o in known}


def test_sizes_the_price_list_adds_are_counted_not_invented(cli, known, embedded, monkeypatch, cache):
    """Issue 36 item 17: the Price List names sizes the catalog lacks here; AWS rows are per AZ and the file has
    no GPU model, so without the shapes API they are skipped and counted, never added with guessed facts."""
    here = {o.instance_type for o in known}
    elsewhere = next(o for o in embedded.offers if o.cloud == "aws" and o.instance_type not in here)
    new = [replace(elsewhere, region=REGION), replace(elsewhere, region=REGION, instance_type="p9.96xlarge")]
    with serve(monkeypatch, {REGION: offer_rows([*known, *new], REGION)}):
        r = cli("catalog", "refresh", "--cloud", "aws", "--region", REGION, "--json")
    assert r.code == 0, r.err
    aws = r.json()["clouds"]["aws"]
    assert aws["new_sizes_skipped"] == {"no_shape_facts": 1, "no_zone_facts": 1} and aws["placed"] == 0
    assert any("no_shape_facts 1" in n and "shapes API" in n for n in aws["notes"])
    assert aws["rows"] == len(known)
