"""`trainvm catalog refresh --cloud azure` against a fake Retail Prices API on a loopback server
(tests/catalog/fake_azure.py says which response fields come from the documentation and which were built).

The fake serves, for the embedded catalog's Azure sizes in the asked regions, the Linux on-demand and spot rows
at the embedded prices plus the rows a classifier must drop (Windows, Windows Spot, Low Priority, DevTest,
Reservation), seven items a page. Not modelled: Resource SKUs (shapes; the refresh does not ask it without
credentials), savings plans, an empty NextPageLink while pages remain."""

from __future__ import annotations

import csv
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from provisioner.catalog import http
from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog
from tests.catalog.fake_azure import PAGE, AzureRetailFake, disk_items, vm_items
from tests.catalog.price_server import PriceServer

REGION = "eastus"


def serve(monkeypatch, items):
    fake = AzureRetailFake(items)
    server = PriceServer(fake.handle).__enter__()
    fake.url = server.url
    monkeypatch.setenv("TRAINVM_AZURE_PRICES_URL", server.url + "/api/retail/prices")
    return server


@pytest.fixture
def azure(embedded, monkeypatch, cache):
    known = [o for o in embedded.offers if o.cloud == "azure" and o.region == REGION]
    server = serve(monkeypatch, vm_items(known) + disk_items([REGION]))
    yield server
    server.__exit__(None, None, None)


def known_rows(embedded):
    return [o for o in embedded.offers if o.cloud == "azure" and o.region == REGION]


def test_refresh_writes_the_cache_and_plan_and_show_use_it(cli, azure, embedded, cache, write_yaml, monkeypatch):
    r = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    az = doc["clouds"]["azure"]
    assert az["rows"] == az["known_rows"] == len(known_rows(embedded)) and az["dropped"] == {}
    assert doc["written"] and doc["path"].startswith(str(cache))
    assert (cache / "CURRENT").read_text().strip() == doc["path"].rsplit("/", 1)[1]
    show = cli("catalog", "show", "--cloud", "azure", "--region", REGION, "--json").json()
    # as old as its oldest price: the other regions' rows are still the snapshot's
    assert show["catalog"]["origin"] == "refreshed" and show["catalog"]["date"] == embedded.date.isoformat()
    got = {o["instance_type"]: (o["price_hourly"], o["spot_price_hourly"]) for o in show["offers"]}
    # the Linux prices, not the Windows, Low Priority, DevTest or Reservation rows beside them
    want = {o.instance_type: (o.price_hourly, o.spot_price_hourly) for o in known_rows(embedded)}
    assert got == want
    # rows outside the refreshed region are the current catalog's, untouched
    assert len(load_catalog().offers) == len(embedded.offers)
    p = write_yaml("name: t\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n")
    refreshed = cli("plan", str(p), "--cloud", "azure", "--region", REGION, "--json").json()
    assert refreshed["catalog"]["origin"] == "refreshed"
    monkeypatch.setenv("TRAINVM_CATALOG", str(EMBEDDED_DIR))
    snapshot = cli("plan", str(p), "--cloud", "azure", "--region", REGION, "--json").json()
    # prices agree, so the picks do
    assert refreshed["chosen"] == snapshot["chosen"] and refreshed["failover"] == snapshot["failover"]


def test_pages_are_followed(cli, azure):
    assert cli("catalog", "refresh", "--cloud", "azure", "--region", REGION).code == 0
    vm = [r for r in azure.requests if "Virtual Machines" in r.query.get("$filter", "")]
    assert len(vm) > 3 and [int(r.query.get("$skip", 0)) for r in vm] == list(range(0, 7 * len(vm), 7))


def test_429_waits_retry_after_then_succeeds(cli, azure, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(http, "sleep", waits.append)
    azure.failures["/api"] = [(429, {"Retry-After": "7"}, b"Too Many Requests")]
    r = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION, "--json")
    assert r.code == 0, r.err
    assert waits == [7.0]


def test_a_failing_source_writes_nothing_and_exits_3(cli, azure, monkeypatch, cache):
    assert cli("catalog", "refresh", "--cloud", "azure", "--region", REGION).code == 0
    before = (cache / "CURRENT").read_text()
    monkeypatch.setattr(http, "sleep", lambda s: None)
    # the API fails for good: 5 tries, then exit 3
    azure.failures["/api"] = [(503, {}, b"unavailable")] * 5
    r = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION)
    assert r.code == 3 and "HTTP 503" in r.err and "after 5 tries" in r.err and "Traceback" not in r.err
    assert "old catalog is kept" in r.err
    assert (cache / "CURRENT").read_text() == before
    assert len([p for p in cache.iterdir() if p.name.startswith("catalog-")]) == 1


def test_zero_and_missing_prices_are_dropped_and_reported(cli, embedded, monkeypatch, cache):
    known = known_rows(embedded)
    items = vm_items(known) + disk_items([REGION])
    zero, missing = known[0].instance_type, known[1].instance_type
    for it in items:
        if it.get("armSkuName") == zero and it["type"] == "Consumption" and not it["productName"].endswith("Windows"):
            it["retailPrice"] = it["unitPrice"] = 0.0
    items = [it for it in items if it.get("armSkuName") != missing]
    with serve(monkeypatch, items):
        r = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION, "--json")
    assert r.code == 0, r.err
    az = r.json()["clouds"]["azure"]
    assert az["rows"] == len(known) - 2
    assert az["dropped"]["no_ondemand_price"] == 2 and az["dropped"]["zero_or_missing_price"] >= 1
    left = {o.instance_type for o in load_catalog().offers if o.cloud == "azure" and o.region == REGION}
    assert zero not in left and missing not in left
    assert all(o.price_hourly > 0 for o in load_catalog().offers)


def test_a_sudden_50_percent_regional_drop_is_flagged(cli, embedded, monkeypatch, cache, write_yaml):
    known = known_rows(embedded)
    t4 = min((o for o in known if o.gpu_name == "T4"), key=lambda o: o.price_hourly)
    with serve(monkeypatch, vm_items(known, {(t4.instance_type, REGION): t4.price_hourly / 2})):
        r = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION, "--json")
    assert r.code == 0, r.err
    assert r.json()["clouds"]["azure"]["flagged"]["suspect_price"] >= 1
    row = next(o for o in load_catalog().offers if o.key() == t4.key())
    assert row.price_hourly == t4.price_hourly / 2 and "suspect_price" in row.flags
    p = write_yaml("name: t\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n")
    doc = cli("plan", str(p), "--cloud", "azure", "--json").json()
    assert doc["chosen"]["price_hourly"] != t4.price_hourly / 2  # excluded, like the snapshot's suspect rows


def test_a_refresh_that_fails_the_checks_keeps_the_old_catalog(cli, embedded, monkeypatch, cache):
    with serve(monkeypatch, []):  # the API answers, with no price for any known size
        r = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION)
    assert r.code == 1 and "integrity checks" in r.err and "azure: no offer left" in r.err
    assert not (cache / "CURRENT").exists()
    assert load_catalog().origin == "embedded"


def test_disks_csv_in_the_shared_format(cli, azure, cache):
    doc = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION, "--json").json()
    with open(doc["path"] + "/disks.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["cloud", "region", "disk_type", "size_max_gib", "unit", "price_month", "source", "fetched_at"]
    body = [dict(zip(rows[0], r)) for r in rows[1:] if r[:2] == ["azure", REGION]]  # the others are carried over
    assert {(r["disk_type"], r["size_max_gib"]) for r in body} == {
        (t, g) for t in ("standard", "balanced", "ssd") for g in ("32", "128", "1024")}
    assert all(r["unit"] == "disk" and r["region"] == REGION and float(r["price_month"]) > 0
               and r["fetched_at"] == doc["path"].rsplit("catalog-", 1)[1][:4] + r["fetched_at"][4:]
               and "meterId d" in r["source"] for r in body)  # LRS rows only: no ZRS, no Disk Operations
    p128 = next(r for r in body if r["disk_type"] == "ssd" and r["size_max_gib"] == "128")
    assert float(p128["price_month"]) == pytest.approx(0.15 * 128)


def test_a_truncated_answer_is_refused_with_the_counts(cli, embedded, monkeypatch, cache):
    """Issue 36 item 16: NextPageLink null after the first page (Microsoft Q&A 1188465) leaves most sizes without a
    price; the refresh refuses, says how many rows the region kept, and keeps the current catalog, unless
    ``--accept-shrink``."""
    known = known_rows(embedded)
    fake = AzureRetailFake(vm_items(known) + disk_items([REGION]), last_page=1)
    with PriceServer(fake.handle) as server:
        fake.url = server.url
        monkeypatch.setenv("TRAINVM_AZURE_PRICES_URL", server.url + "/api/retail/prices")
        r = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION)
        assert r.code == 1 and "Traceback" not in r.err, r.err
        first = [i for i in fake.items if i["serviceName"] == "Virtual Machines" and i["type"] == "Consumption"][:PAGE]
        left = len({i["armSkuName"] for i in first})
        assert f"azure {REGION}: {left} of {len(known)} rows left ({len(known) - left} lost" in r.err
        assert "--accept-shrink" in r.err and "nothing was written" in r.err
        assert not (cache / "CURRENT").exists()
        ok = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION, "--accept-shrink", "--json")
    assert ok.code == 0, ok.err
    assert sum(1 for o in load_catalog().offers if o.cloud == "azure" and o.region == REGION) == left


def test_one_region_refreshed_keeps_the_rest_fresh_and_priced(cli, azure, embedded, cache, write_yaml, monkeypatch):
    """Issue 36 item 19: refreshing azure eastus neither makes the snapshot's other rows stale sooner (a plan warned
    "the refreshed offer catalog is 65 days old") nor loses their disk prices (running cost "unknown")."""
    assert cli("catalog", "refresh", "--cloud", "azure", "--region", REGION).code == 0
    p = write_yaml("name: t\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n")
    other = sorted({o.region for o in embedded.offers if o.cloud == "azure" and o.gpu_name == "T4"} - {REGION})[0]
    doc = cli("plan", str(p), "--cloud", "azure", "--region", other, "--json").json()
    assert doc["catalog"]["origin"] == "refreshed"
    assert not [w for w in doc["warnings"] if "days old" in w]
    est = doc["estimate"]
    assert doc["chosen"]["region"] != REGION and est["cost"]["unknown"] == [] and est["running_hourly"], est
    now = load_catalog().disk_prices
    for kind in ("standard", "balanced", "ssd", "local_ssd", "image"):  # every other region's rows, as they were
        assert now.quote("azure", "westeurope", kind, 100) == embedded.disk_prices.quote("azure", "westeurope", kind, 100)
    assert now.quote("aws", "us-east-1", "balanced", 100) == embedded.disk_prices.quote("aws", "us-east-1", "balanced", 100)
    today = datetime.now(UTC).date().isoformat()  # the refresh's date (TRAINVM_TODAY is the plan's)
    show = cli("catalog", "show", "--cloud", "azure", "--limit", "1").out
    assert f"days old; azure {REGION} refreshed {today}; the rest: the embedded catalog's prices of" in show, show
    # past the snapshot's own 90 days the warning says which part is fresh and which is the snapshot's
    monkeypatch.setenv("TRAINVM_TODAY", (embedded.date + timedelta(days=91)).isoformat())
    old = cli("plan", str(p), "--cloud", "azure", "--json").json()["warnings"]
    assert any("91 days old" in w and f"azure {REGION} refreshed {today}" in w
               and f"the embedded catalog's prices of {embedded.date.isoformat()}" in w for w in old), old


def test_sizes_come_back_and_new_ones_are_placed_or_counted(cli, embedded, monkeypatch, cache):
    """Issue 36 item 17: a size one refresh dropped returns when the price source prices it again; a size the source
    prices in the region that only another region's row describes is placed with that row's shape (Azure rows are
    regional); a size no row describes is skipped and counted (the Retail Prices API has no GPU model)."""
    known = known_rows(embedded)
    gone = known[0]
    with serve(monkeypatch, vm_items([o for o in known if o.instance_type != gone.instance_type])):
        first = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION, "--json")
    assert first.code == 0, first.err
    assert gone.key() not in {o.key() for o in load_catalog().offers}
    here = {o.instance_type for o in known}
    elsewhere = next(o for o in embedded.offers if o.cloud == "azure" and o.instance_type not in here)
    moved = replace(elsewhere, region=REGION, price_hourly=round(elsewhere.price_hourly * 1.01, 4))
    unknown = replace(moved, instance_type="Standard_ND999zz_v9")
    with serve(monkeypatch, vm_items([*known, moved, unknown])):
        again = cli("catalog", "refresh", "--cloud", "azure", "--region", REGION, "--json")
    assert again.code == 0, again.err
    az = again.json()["clouds"]["azure"]
    assert az["restored"] == 1 and az["placed"] == 1 and az["new_sizes_skipped"] == {"no_shape_facts": 1}
    assert "no_ondemand_price" not in az["dropped"]
    now = {o.key(): o for o in load_catalog().offers if o.cloud == "azure" and o.region == REGION}
    assert now[gone.key()].price_hourly == gone.price_hourly
    placed = now[moved.key()]
    assert (placed.gpu_name, placed.gpu_count, placed.vcpus, placed.zone, placed.price_hourly) == (
        elsewhere.gpu_name, elsewhere.gpu_count, elsewhere.vcpus, None, moved.price_hourly)
    assert not any(o.instance_type == unknown.instance_type for o in now.values())
