"""`trainvm catalog refresh --cloud gcp` against a fake Cloud Billing Catalog API on a loopback server
(tests/catalog/fake_gcp.py says which SKUs are recorded and which were built). Not modelled: machineTypes /
acceleratorTypes (credentials and a project; the refresh prices the machine types the catalog knows),
application-default credentials (the tests use an API key; "no credentials" is google.auth's own error)."""

from __future__ import annotations

import csv

import pytest

from provisioner.catalog.storage import load_catalog
from tests.catalog.fake_gcp import UNIT, GcpBillingFake, catalog_skus
from tests.catalog.price_server import PriceServer

REGION = "us-central1"
KEY = "AIzaFAKE-test-key-0123456789"


@pytest.fixture
def gcp(monkeypatch, cache):
    server = PriceServer(GcpBillingFake(catalog_skus()).handle).__enter__()
    monkeypatch.setenv("TRAINVM_GCP_BILLING_URL", server.url)
    monkeypatch.setenv("TRAINVM_GCP_PRICES_API_KEY", KEY)
    yield server
    server.__exit__(None, None, None)


@pytest.fixture
def known(embedded):
    return [o for o in embedded.offers if o.cloud == "gcp" and o.region == REGION]


def refresh(cli):
    r = cli("catalog", "refresh", "--cloud", "gcp", "--region", REGION, "--json")
    assert r.code == 0, r.err
    return r


def test_whole_vm_price_is_core_ram_and_gpus_of_the_region(cli, gcp, known):
    refresh(cli)
    now = {o.key(): o for o in load_catalog().offers if o.cloud == "gcp" and o.region == REGION}
    a2 = [o for k, o in now.items() if o.instance_type == "a2-highgpu-1g"]
    # the worked example: 12 x 0.031611 + 85 GiB x 0.004237 + 1 x 2.933908 (opencost's recorded SKUs)
    assert a2 and all(o.price_hourly == pytest.approx(3.673385) for o in a2)
    assert all(o.spot_price_hourly == pytest.approx(12 * 0.0127 + 85 * 0.0017 + 1.17) for o in a2)
    n1 = [o for o in now.values() if o.family == "n1" and o.gpu_name == "T4"]
    assert n1
    for o in n1:  # the dearer of the two conflicting T4 SKUs
        want = UNIT["N1 core"] * o.vcpus + UNIT["N1 ram"] * o.memory_gib + UNIT["T4 dear"] * o.gpu_count
        assert o.price_hourly == pytest.approx(want, abs=1e-6)


def test_spot_prices_in_the_documented_spellings(cli, gcp, known, write_yaml):
    """Issue 36 item 13: spot GPUs read "<GPU> attached to Spot Preemptible VMs running in <place>" (the Pricing API
    how-to's example), spot cores and RAM "Spot Preemptible <series> Instance Core|Ram ..."; every row whose parts
    have spot SKUs gets a spot price, and `plan --spot --cloud gcp` finds one."""
    refresh(cli)
    now = [o for o in load_catalog().offers if o.cloud == "gcp" and o.region == REGION]
    n1 = [o for o in now if o.family == "n1" and o.gpu_name == "T4"]
    assert n1
    for o in n1:
        want = UNIT["N1 core spot"] * o.vcpus + UNIT["N1 ram spot"] * o.memory_gib + UNIT["T4 spot"] * o.gpu_count
        assert o.spot_price_hourly == pytest.approx(want, abs=1e-6), o.instance_type
    a2 = [o for o in now if o.family == "a2-highgpu" and o.gpu_name == "A100"]
    assert a2 and all(o.spot_price_hourly is not None for o in a2)
    p = write_yaml("name: t\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n")
    r = cli("plan", str(p), "--spot", "--cloud", "gcp", "--region", REGION, "--json")
    assert r.code == 0, r.err
    chosen = r.json()["chosen"]
    assert chosen["instance_type"].startswith("n1-") and chosen["spot"] is True


def test_traps_are_not_prices_and_everything_is_reported(cli, gcp, known):
    doc = refresh(cli).json()["clouds"]["gcp"]
    # DWS / calendar / commitment GPUs and cores are cheaper: reading one would lower the A100 price
    assert not any(o.instance_type == "a2-highgpu-1g" and o.price_hourly < 3.67 for o in load_catalog().offers
                   if o.region == REGION)
    assert doc["dropped"]["mistagged_spot_sku"] == 1  # "Spot Preemptible ... T4" tagged OnDemand
    assert doc["dropped"]["unusable_sku_price"] == 2  # the 2-tier SKU and the zero price
    assert any(a.startswith("T4 us-central1 ondemand: 2 SKUs at 0.35, 0.36; took 0.36") for a in doc["ambiguous"])
    assert [a for a in doc["ambiguous"] if not a.startswith("T4 ")] == []  # DWS/calendar A100 never a candidate
    unpriced = [o for o in known if o.family in ("a3-ultragpu", "a4-highgpu", "a3-highgpu", "a3-edgegpu",
                                                   "a3-megagpu")]
    assert doc["dropped"]["no_ondemand_price"] == len(unpriced) > 0
    assert doc["rows"] == len(known) - len(unpriced)
    assert any("a3-highgpu" in n and "a4-highgpu" in n for n in doc["notes"])


def test_pages_and_key_travel_as_documented_and_the_key_is_never_shown(cli, gcp, cache):
    r = refresh(cli)
    reqs = gcp.requests
    assert len(reqs) == -(-len(catalog_skus()) // 5)
    assert [q.query.get("pageToken") for q in reqs] == [None] + [str(5 * i) for i in range(1, len(reqs))]
    assert all(q.query["currencyCode"] == "USD" and q.headers["x-goog-api-key"] == KEY and "key" not in q.query
               for q in reqs)
    written = "".join(p.read_text() for p in cache.rglob("*") if p.is_file())
    assert KEY not in r.out + r.err + written


def test_gcp_disk_prices(cli, gcp):
    doc = refresh(cli).json()
    with open(doc["path"] + "/disks.csv", newline="") as fh:
        got = {(d["region"], d["disk_type"], d["unit"], d["size_max_gib"], d["price_month"])
               for d in csv.DictReader(fh) if d["cloud"] == "gcp" and d["region"] != "*"}  # "*": carried over
    assert got == {(REGION, "standard", "gib", "", "0.04"), (REGION, "balanced", "gib", "", "0.1"),
                   (REGION, "ssd", "gib", "", "0.17"), (REGION, "local_ssd", "gib", "", "0.08")}


def test_no_key_and_no_application_default_credentials(cli, gcp, monkeypatch):
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def none(*a, **k):
        raise DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.delenv("TRAINVM_GCP_PRICES_API_KEY")
    monkeypatch.setattr(google.auth, "default", none)
    r = cli("catalog", "refresh", "--cloud", "gcp", "--region", REGION)
    assert r.code == 3 and "no API key and no application-default credentials" in r.err
    assert "TRAINVM_GCP_PRICES_API_KEY" in r.err and "Traceback" not in r.err
    assert gcp.requests == []


def test_rows_outside_the_refreshed_region_keep_their_prices_and_flags(cli, gcp, embedded):
    """The embedded GCP rows were flagged per GPU part (a4-highgpu-8g's zero host price, suspect regional GPU
    prices); a refresh of one region must not clear those flags elsewhere."""
    refresh(cli)
    before = {o.key(): (o.price_hourly, o.spot_price_hourly, o.flags) for o in embedded.offers if o.region != REGION}
    after = {o.key(): (o.price_hourly, o.spot_price_hourly, o.flags) for o in load_catalog().offers
             if o.region != REGION}
    assert after == before
    assert any("host_price_zero" in f for _, _, f in after.values())


def test_a_region_of_unmodelled_series_is_no_shrink(cli, gcp, embedded):
    """Issue 36 item 16: us-south1 holds only A3 Ultra / A4 rows, whose SKU descriptions the source does not model:
    they are dropped (counted, named in the notes) but their loss is no truncation, so a refresh of it with
    another region is not refused for shrinking."""
    south = [o for o in embedded.offers if o.cloud == "gcp" and o.region == "us-south1"]
    assert south and {o.family for o in south} <= {"a3-ultragpu", "a4-highgpu"}
    r = cli("catalog", "refresh", "--cloud", "gcp", "--region", REGION, "--region", "us-south1", "--json")
    assert r.code == 0, r.err
    assert not any(o.region == "us-south1" for o in load_catalog().offers if o.cloud == "gcp")
