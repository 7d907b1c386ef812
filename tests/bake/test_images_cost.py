"""``trainvm images``: the monthly storage cost of each baked image (stored size x the ``image`` row of disks.csv x the
copies the cloud bills), unknown (never 0) without a row; ``images delete`` also drops the local record of bakes.
Through the CLI and the GCE emulator (which reports archiveSizeBytes; storage billing itself is not modelled)."""

from __future__ import annotations

import csv
import shutil
from datetime import date

from provisioner.bake import records
from provisioner.catalog.disks import DiskPrice, DiskPrices, read_disk_prices
from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog
from provisioner.commands.images import monthly_cost
from provisioner.providers.bake_base import BakedImage
from tests.bake.test_up_baked_gce import _bake, gce, tf  # noqa: F401 - fixtures


def _image_row(cloud: str) -> DiskPrice:
    (row,) = load_catalog(EMBEDDED_DIR).disk_prices.rows_for(cloud, "*", "image")
    return row


def test_the_embedded_catalog_prices_image_storage_on_every_cloud_with_a_source():
    for cloud in ("gcp", "aws", "azure"):
        row = _image_row(cloud)
        assert row.unit == "gib" and row.price_month > 0 and "." in row.source and row.fetched_at >= date(2026, 11, 27)


def test_images_shows_size_times_price_per_month_and_delete_drops_the_record(cli, gce, tf):  # noqa: F811
    name = _bake(cli, gce, tf)
    assert [r["name"] for r in records.load()] == [name]
    doc = cli("images", "--cloud", "gcp", "--json").json()["images"][0]
    price = _image_row("gcp")
    assert doc["size_gib"] > 0
    assert doc["storage"] == {"monthly": round(doc["size_gib"] * price.price_month, 2), "copies": 1,
                              "price_gib_month": price.price_month, "source": price.source}
    text = cli("images", "--cloud", "gcp")
    assert text.code == 0 and f"${doc['storage']['monthly']:.2f}/month stored" in text.out
    assert f"1 image: ${doc['storage']['monthly']:.2f}/month of storage" in text.out and "unknown" not in text.out
    assert cli("images", "delete", name, "--cloud", "gcp").code == 0
    assert records.load() == []


def test_a_cloud_without_an_image_row_says_unknown_never_0(cli, gce, tf, tmp_path, monkeypatch):  # noqa: F811
    """A catalog (TRAINVM_CATALOG) whose disks.csv has no ``image`` row, as a refreshed one may be."""
    folder = tmp_path / "catalog"
    shutil.copytree(EMBEDDED_DIR, folder)
    rows = list(csv.reader((folder / "disks.csv").open()))
    with (folder / "disks.csv").open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(r for r in rows if r[2] != "image")
    monkeypatch.setenv("TRAINVM_CATALOG", str(folder))
    _bake(cli, gce, tf)
    doc = cli("images", "--cloud", "gcp", "--json").json()["images"][0]
    assert doc["size_gib"] > 0 and doc["storage"] == {"monthly": None, "copies": 1, "price_gib_month": None,
                                                      "source": None}
    text = cli("images", "--cloud", "gcp")
    assert text.code == 0 and "storage $/month unknown" in text.out and "$0.00" not in text.out


def test_monthly_cost_is_size_times_the_image_price_times_the_copies(tmp_path):
    csv_path = tmp_path / "disks.csv"
    csv_path.write_text("cloud,region,disk_type,size_max_gib,unit,price_month,source,fetched_at\n"
                        "gcp,*,image,,gib,0.05,test row,2026-11-27\n")
    prices = read_disk_prices(csv_path)
    image = BakedImage(name="x", cloud="gcp", ref="r", labels={}, size_gib=12.5, regions=("us",))
    assert monthly_cost(image, prices) == {"monthly": 0.62, "copies": 1, "price_gib_month": 0.05, "source": "test row"}
    per_region = BakedImage(name="x", cloud="gcp", ref="r", labels={}, size_gib=12.5, regions=("a", "b", "c"),
                            region_refs=(("a", "ami-1"), ("b", "ami-2"), ("c", "ami-3")))
    assert monthly_cost(per_region, prices)["monthly"] == round(12.5 * 0.05 * 3, 2)
    replicated = BakedImage(name="x", cloud="gcp", ref="r", labels={}, size_gib=10, regions=("a", "b"), replicas=4)
    assert monthly_cost(replicated, prices) == {"monthly": 2.0, "copies": 4, "price_gib_month": 0.05,
                                                "source": "test row"}
    unsized = BakedImage(name="x", cloud="gcp", ref="r", labels={}, size_gib=None)
    assert monthly_cost(unsized, prices)["monthly"] is None
    other = DiskPrices([DiskPrice("aws", "*", "image", None, "gib", 0.05, "s", date(2026, 11, 27))])
    assert monthly_cost(image, other)["monthly"] is None


def test_an_image_on_this_machine_costs_nothing_and_says_whose_disk(tmp_path):
    """A local-cloud image is a qcow2 file on this machine (providers/local/bake.py): $0/month with the on_host words,
    not "unknown" (the catalog has no row for local, and never will: nothing bills)."""
    prices = DiskPrices([])
    image = BakedImage(name="x", cloud="local", ref="/var/x.qcow2", labels={}, size_gib=0.9, regions=("this-machine",))
    doc = monthly_cost(image, prices)
    assert doc["monthly"] == 0.0 and doc["price_gib_month"] == 0.0 and "no bill" in str(doc["source"])
    assert monthly_cost(BakedImage(name="x", cloud="gcp", ref="r", labels={}, size_gib=1.0), prices)["monthly"] is None
