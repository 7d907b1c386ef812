"""`catalog refresh` as a command: which catalog plans read afterwards (TRAINVM_CATALOG > refreshed > embedded),
a broken refreshed catalog, bad flags, and what `--help` / `plan` never import."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from provisioner.catalog.publish import DiskPrice, publish, write_disks
from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog
from tests.helpers import EXAMPLES, REPO

REFRESH_MODULES = ("provisioner.catalog.refresh", "provisioner.catalog.http", "provisioner.providers.http", "provisioner.catalog.publish",
                   "provisioner.providers.azure.prices", "provisioner.providers.aws.prices",
                   "provisioner.providers.gcp.prices", "google", "azure", "boto3", "botocore", "tenacity")


@pytest.mark.parametrize("argv", [["catalog", "refresh", "--help"], ["plan", "{t4}", "--json"],
                                  ["catalog", "show", "--json", "--limit", "1"]])
def test_help_plan_and_show_never_import_the_refresh(argv):
    argv = [a.format(t4=EXAMPLES[0]) for a in argv]
    code = (f"import sys\nsys.argv=['trainvm', *{argv!r}]\nfrom provisioner.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    rc = e.code\n"
            f"bad=[m for m in sys.modules if m.startswith({REFRESH_MODULES!r})]\n"
            "print('RC=%s MODULES=%s' % (rc, ','.join(bad)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert re.fullmatch(r"RC=0 MODULES=", out.strip().splitlines()[-1]), out[-500:]


def seed(embedded, price_factor=1.0):
    """A refreshed catalog as `catalog refresh` writes it (here: the embedded rows, re-priced)."""
    from dataclasses import replace

    offers = [replace(o, price_hourly=round(o.price_hourly * price_factor, 6)) for o in embedded.offers]
    return publish(offers, [], source="seeded", fetched=datetime(2026, 11, 20, tzinfo=UTC), catalog_date="2026-11-20",
                   provenance_of=lambda o: ("seeded", "2026-11-20"), extra_provenance={}, stats={})


def test_selection_order_and_age(cli, embedded, cache, monkeypatch):
    seed(embedded, 1.01)
    show = cli("catalog", "show", "--json", "--limit", "1").json()["catalog"]
    assert show["origin"] == "refreshed" and show["date"] == "2026-11-20" and show["age_days"] == 7
    assert show["warnings"] == []
    text = cli("catalog", "show", "--limit", "1")
    assert "refreshed catalog: seeded (2026-11-20, 7 days old)" in text.out
    monkeypatch.setenv("TRAINVM_TODAY", "2026-12-21")  # 31 days: a refreshed catalog is old past 30
    stale = cli("catalog", "show", "--limit", "1")
    assert "warning: the refreshed offer catalog is 31 days old" in stale.err
    plan = cli("plan", str(EXAMPLES[0]), "--json").json()
    assert plan["catalog"]["origin"] == "refreshed"
    assert any("refreshed offer catalog is 31 days old" in w for w in plan["warnings"])
    monkeypatch.setenv("TRAINVM_CATALOG", str(EMBEDDED_DIR))
    assert cli("plan", str(EXAMPLES[0]), "--json").json()["catalog"]["origin"] == "TRAINVM_CATALOG"


def test_a_broken_refreshed_catalog_falls_back_to_the_embedded_one(cli, embedded, cache):
    folder = seed(embedded)
    (folder / "aws.csv").write_text("not,a,catalog\n")
    doc = cli("plan", str(EXAMPLES[0]), "--json").json()
    assert doc["catalog"]["origin"] == "embedded"
    assert any(w.startswith("the refreshed catalog was not used (") and "aws.csv:1" in w for w in doc["warnings"])


def test_generations_are_pruned_to_two(embedded, cache):
    first = seed(embedded)
    second = seed(embedded)
    third = seed(embedded)
    assert not first.exists() and second.exists() and third.exists()
    assert load_catalog().path == third


def test_unknown_cloud_is_an_input_error(cli, cache):
    r = cli("catalog", "refresh", "--cloud", "ibm")
    assert r.code == 2 and "ibm" in r.err and "Traceback" not in r.err


def test_disk_writer_refuses_rows_outside_the_shared_format(tmp_path):
    ok = DiskPrice("azure", "eastus", "ssd", 128, "disk", 19.71, "Azure Retail Prices API meterId x", "2026-11-27")
    write_disks(tmp_path / "disks.csv", [ok])
    assert (tmp_path / "disks.csv").read_text().splitlines() == [
        "cloud,region,disk_type,size_max_gib,unit,price_month,source,fetched_at",
        "azure,eastus,ssd,128,disk,19.71,Azure Retail Prices API meterId x,2026-11-27"]
    bad = [DiskPrice("gcp", "*", "hyperdisk", None, "gib", 0.1, "s", "2026-11-27"),
           DiskPrice("gcp", "*", "ssd", 128, "gib", 0.1, "s", "2026-11-27"),
           DiskPrice("gcp", "*", "ssd", None, "gib", 0.0, "s", "2026-11-27")]
    for d in bad:
        with pytest.raises(ValueError):
            write_disks(tmp_path / "bad.csv", [d])
    assert not (tmp_path / "bad.csv").exists()
