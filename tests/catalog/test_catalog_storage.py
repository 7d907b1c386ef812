"""Loading catalog folders: TRAINVM_CATALOG, schema checks, clear errors with file:line."""

from __future__ import annotations

import json
import os
import time
from datetime import date
from pathlib import Path

import pytest

from provisioner.catalog import CatalogError, Offer, load_catalog, write_catalog
from provisioner.catalog.storage import EMBEDDED_DIR, catalog_dir
from provisioner.errors import InputError, TrainvmError


def mk(**kw) -> Offer:
    base = dict(cloud="gcp", instance_type="g2-standard-8", family="g2-standard", gpu_name="L4",
                gpu_count=1, gpu_memory_gib=24.0, vcpus=8.0, memory_gib=32.0,
                region="us-central1", zone="us-central1-a", price_hourly=0.85,
                spot_price_hourly=0.33, gpu_attach="bundled", disk_types=("balanced", "ssd"),
                local_nvme_max_gib=375, arch="x86_64", hyperv_gen="",
                flags=())
    return Offer(**{**base, **kw})


OFFERS = [mk(), mk(zone="us-central1-b", price_hourly=0.9, flags=("no_spot_price",),
                   spot_price_hourly=None),
          mk(cloud="azure", instance_type="Standard_NC4as_T4_v3", family="NCasT4_v3",
             gpu_name="T4", gpu_memory_gib=16.0, vcpus=4.0, memory_gib=28.0, region="eastus",
             zone=None, price_hourly=0.526, spot_price_hourly=0.0579, hyperv_gen="1|2",
             disk_types=("standard", "balanced", "ssd"), local_nvme_max_gib=0)]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_catalog(tmp_path / "cat", OFFERS, source="unit test", catalog_date="2026-01-02")
    return tmp_path / "cat"


def test_round_trip(folder):
    cat = load_catalog(folder)
    assert sorted(cat.offers, key=Offer.key) == sorted(OFFERS, key=Offer.key)
    assert cat.source == "unit test" and cat.date == date(2026, 1, 2)
    assert cat.schema_version == 2 and cat.path == folder
    assert cat.info()["date"] == "2026-01-02"
    assert cat.filter(cloud="azure", gpu="T4") == tuple(o for o in cat.offers if o.cloud == "azure")


def test_trainvm_catalog_env(folder, monkeypatch):
    monkeypatch.setenv("TRAINVM_CATALOG", str(folder))
    assert catalog_dir() == (folder, "TRAINVM_CATALOG")
    assert load_catalog().source == "unit test"
    monkeypatch.setenv("TRAINVM_CATALOG", "")
    assert load_catalog().path == EMBEDDED_DIR


def test_missing_folder_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINVM_CATALOG", str(tmp_path / "nope"))
    with pytest.raises(CatalogError, match=r"nope.*TRAINVM_CATALOG"):
        load_catalog()


def test_catalog_error_is_an_input_error():
    assert issubclass(CatalogError, InputError) and issubclass(CatalogError, TrainvmError)


def test_missing_manifest(tmp_path):
    with pytest.raises(CatalogError, match="catalog.json.*missing"):
        load_catalog(tmp_path)


def edit_manifest(folder: Path, **changes) -> None:
    p = folder / "catalog.json"
    m = json.loads(p.read_text())
    m.update(changes)
    p.write_text(json.dumps(m))


@pytest.mark.parametrize("changes,pattern", [
    ({"schema_version": 1}, "schema_version 1 is not supported"),
    ({"columns": ["cloud", "instance_type"]}, "columns differ.*missing"),
    ({"files": []}, "'files'"),
    ({"files": ["../x.csv"]}, "'files'"),
    ({"files": ["gcp.csv", "missing.csv"]}, "missing.csv"),
    ({"provenance": {"source": "x"}}, "provenance"),
    ({"provenance": {"source": "x", "date": "yesterday"}}, "YYYY-MM-DD"),
])
def test_bad_manifest(folder, changes, pattern):
    edit_manifest(folder, **changes)
    with pytest.raises(CatalogError, match=pattern):
        load_catalog(folder)


def test_bad_json(folder):
    (folder / "catalog.json").write_text("{not json")
    with pytest.raises(CatalogError, match="catalog.json: not readable JSON"):
        load_catalog(folder)


def replace_line(p: Path, lineno: int, fn) -> None:
    lines = p.read_text().splitlines()
    lines[lineno - 1] = fn(lines[lineno - 1])
    p.write_text("\n".join(lines) + "\n")


def test_bad_header_names_file_and_line(folder):
    replace_line(folder / "gcp.csv", 1, lambda s: s.replace("price_hourly", "price"))
    with pytest.raises(CatalogError, match=r"gcp\.csv:1: header"):
        load_catalog(folder)


@pytest.mark.parametrize("mutate,pattern", [
    (lambda s: s.replace(",0.85,", ",abc,"), "could not convert"),
    (lambda s: s.replace(",0.85,", ",0,"), "prices must be > 0"),
    (lambda s: s.replace("gcp,", "oracle,", 1), "cloud 'oracle'"),
    (lambda s: s + ",extra", "19 fields, expected 18"),
    (lambda s: s.replace("balanced|ssd", "pd-ssd"), "disk_types"),
    (lambda s: s.replace(",L4,1,", ",L4,0,"), "gpu_count must be >= 1"),
    (lambda s: s.replace("x86_64", "sparc"), "arch"),
])
def test_bad_row_names_file_and_line(folder, mutate, pattern):
    replace_line(folder / "gcp.csv", 2, mutate)
    with pytest.raises(CatalogError, match=rf"gcp\.csv:2: .*{pattern}"):
        load_catalog(folder)


def test_cache_follows_file_changes(folder):
    first = load_catalog(folder)
    assert load_catalog(folder) is first
    time.sleep(0.01)
    write_catalog(folder, OFFERS[:1], source="changed", catalog_date="2026-01-03")
    os.utime(folder / "catalog.json")
    assert load_catalog(folder).source == "changed"


def test_offer_price_and_json_shape():
    o, az = OFFERS[0], OFFERS[2]
    assert o.price(False) == 0.85 and o.price(True) == 0.33
    assert OFFERS[1].price(True) is None
    js = az.to_json(spot=True)
    assert js == {"cloud": "azure", "region": "eastus", "zone": None,
                  "instance_type": "Standard_NC4as_T4_v3", "gpu_name": "T4", "gpu_count": 1,
                  "gpu_memory_gib": 16.0, "vcpus": 4, "memory_gib": 28, "price_hourly": 0.0579,
                  "spot": True}
    assert o.to_json()["zone"] == "us-central1-a" and o.to_json()["price_hourly"] == 0.85
    assert "us-central1-a g2-standard-8 (1x L4) $0.85/h" in o.describe()
    assert o.excluded_by() is None and mk(flags=("suspect_price",)).excluded_by() == \
        "flagged_price"


def test_offer_is_frozen_and_slotted():
    o = OFFERS[0]
    with pytest.raises(AttributeError):
        o.price_hourly = 1.0  # type: ignore[misc]
    assert not hasattr(o, "__dict__")


def test_validate_offers_finds_inconsistencies():
    from provisioner.catalog.storage import validate_offers

    assert validate_offers(load_catalog(EMBEDDED_DIR).offers) == []
    bad = [mk(zone="us-east1-b"),
           mk(family="g2-standard", disk_types=("standard", "balanced")),
           mk(instance_type="n1-highmem-96", family="n1", gpu_name="V100", gpu_count=1,
              gpu_attach="attachable", vcpus=96.0, memory_gib=624.0,
              disk_types=("standard", "balanced", "ssd")),
           mk(cloud="azure", family="NCasT4_v3", zone="eastus-1", region="eastus"),
           mk(gpu_name="RTX-4090"), mk(gpu_name="RTX-4090"), mk(instance_type="z9-gpu-1g", family="z9-gpu")]
    problems = "\n".join(validate_offers(bad))
    for needle in ("not in region us-central1", "g2-standard has no", "exceeds GCE's limit", "unknown GCE family 'z9-gpu'",
                   "Azure offers are regional", "unknown GPU name", "duplicate offer"):
        assert needle in problems, needle


def test_offers_from_rows_are_the_offers_the_constructor_builds() -> None:
    """The catalog's offers are built column by column from the cached rows (no per-offer __init__ call): each is
    an Offer equal to, hashing like and as immutable as ``Offer(*row)``, every field in its place."""
    from dataclasses import FrozenInstanceError

    from provisioner.catalog.storage import astuple_fast, offers_from_rows

    rows = [astuple_fast(o) for o in OFFERS]
    built = offers_from_rows(rows)
    assert built == tuple(Offer(*row) for row in rows) == tuple(OFFERS)
    assert [type(o) for o in built] == [Offer] * len(OFFERS)
    assert [hash(o) for o in built] == [hash(o) for o in OFFERS]
    assert [astuple_fast(o) for o in built] == rows
    with pytest.raises(FrozenInstanceError):
        built[0].price_hourly = 0.0  # type: ignore[misc]
    assert offers_from_rows([]) == ()
