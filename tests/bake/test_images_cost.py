"""``trainvm images``: the monthly storage cost of each baked image (size x the ``image`` row of disks.csv), unknown
(never 0) without a row; ``images delete`` also drops the local record of bakes. Through the CLI and the GCE
emulator (which reports archiveSizeBytes; storage billing itself is not modelled)."""

from __future__ import annotations

from datetime import date

from provisioner.bake import records
from provisioner.catalog.disks import DiskPrice, DiskPrices, read_disk_prices
from provisioner.commands.images import monthly_cost
from provisioner.providers.bake_base import BakedImage
from tests.bake.test_up_baked_gce import _bake, gce, tf  # noqa: F401 - fixtures


def test_images_shows_storage_cost_unknown_without_a_price_and_delete_drops_the_record(cli, gce, tf):  # noqa: F811
    name = _bake(cli, gce, tf)
    assert [r["name"] for r in records.load()] == [name]
    doc = cli("images", "--cloud", "gcp", "--json").json()["images"][0]
    assert doc["size_gib"] > 0 and doc["storage"] == {"monthly": None, "price_gib_month": None, "source": None}
    text = cli("images", "--cloud", "gcp")
    assert text.code == 0 and "storage $/month unknown" in text.out and "$0.00" not in text.out
    assert cli("images", "delete", name, "--cloud", "gcp").code == 0
    assert records.load() == []


def test_monthly_cost_is_size_times_the_image_price(tmp_path):
    csv = tmp_path / "disks.csv"
    csv.write_text("cloud,region,disk_type,size_max_gib,unit,price_month,source,fetched_at\n"
                   "gcp,*,image,,gib,0.05,test row,2026-11-27\n")
    prices = read_disk_prices(csv)
    image = BakedImage(name="x", cloud="gcp", ref="r", labels={}, size_gib=12.5, regions=("us",))
    assert monthly_cost(image, prices) == {"monthly": 0.62, "price_gib_month": 0.05, "source": "test row"}
    unsized = BakedImage(name="x", cloud="gcp", ref="r", labels={}, size_gib=None)
    assert monthly_cost(unsized, prices)["monthly"] is None
    other = DiskPrices([DiskPrice("aws", "*", "image", None, "gib", 0.05, "s", date(2026, 11, 27))])
    assert monthly_cost(image, other)["monthly"] is None
