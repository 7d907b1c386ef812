"""Integrity of the committed (embedded) catalog data."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from provisioner.catalog import COLUMNS, SCHEMA_VERSION, load_catalog
from provisioner.catalog import families as F
from provisioner.catalog.disks import DISK_COLUMNS, DISKS_FILE
from provisioner.catalog.storage import EMBEDDED_DIR
from provisioner.providers.azure import families as AZ
from provisioner.providers.gcp import families as G
from provisioner.providers.registry import provisionable

KNOWN_FLAGS = {"no_spot_price", "spot_above_ondemand", "spot_equals_ondemand", "suspect_price",
               "host_price_zero", "gpu_count_corrected", "fractional_gpu", "retired_size",
               "h100_nvl", "local_zone"}


@pytest.fixture(scope="module")
def cat():
    return load_catalog(EMBEDDED_DIR)


@pytest.fixture(scope="module")
def manifest():
    return json.loads((EMBEDDED_DIR / "catalog.json").read_text())


def test_manifest_schema_columns_provenance(manifest, cat):
    assert manifest["schema_version"] == SCHEMA_VERSION == cat.schema_version
    assert manifest["columns"] == list(COLUMNS)
    prov = manifest["provenance"]
    assert prov["date"] == "2026-09-23" and cat.date.isoformat() == "2026-09-23"
    assert "skypilot" in prov["source"].lower() and prov["source"] == cat.source
    assert prov["upstream_commits"] == {"gcp": "006059e0", "aws": "00148f2a", "azure": "20291d7e"}
    assert prov["generated_by"] == "scripts/build_catalog.py"
    for name in manifest["files"]:
        header = DISK_COLUMNS if name == DISKS_FILE else COLUMNS  # disks.csv: the disk prices
        assert (EMBEDDED_DIR / name).read_text().splitlines()[0] == ",".join(header)
    assert DISKS_FILE in manifest["files"] and prov["input_sha256"][DISKS_FILE]
    assert (EMBEDDED_DIR / "README.md").is_file()


def test_row_counts_match_manifest(manifest, cat):
    by_cloud = defaultdict(int)
    for o in cat.offers:
        by_cloud[o.cloud] += 1
    assert dict(by_cloud) == manifest["stats"]["rows"]
    assert by_cloud["gcp"] > 5000 and by_cloud["azure"] > 150 and by_cloud["aws"] > 1300


def test_prices_positive_and_spot_below_ondemand(cat):
    for o in cat.offers:
        assert o.price_hourly > 0, o
        assert o.spot_price_hourly is None or 0 < o.spot_price_hourly < o.price_hourly, o


def test_gpu_facts_present_and_canonical(cat):
    for o in cat.offers:
        assert o.gpu_name in F.CANONICAL_GPUS, o
        assert o.gpu_count >= 1 and o.gpu_memory_gib > 0, o
        if "fractional_gpu" in o.flags or "h100_nvl" in o.flags:
            continue
        assert o.gpu_memory_gib == F.GPU_MEMORY_GIB[o.gpu_name], o


def test_same_instance_type_same_shape_everywhere(cat):
    shapes = defaultdict(set)
    for o in cat.offers:
        shapes[(o.cloud, o.instance_type, o.gpu_name, o.gpu_count)].add(
            (o.family, o.gpu_memory_gib, o.vcpus, o.memory_gib, o.disk_types,
             o.local_nvme_max_gib, o.arch, o.gpu_attach))
    assert all(len(v) == 1 for v in shapes.values()), {k: v for k, v in shapes.items()
                                                       if len(v) > 1}


def test_bundled_gpu_counts_consistent_with_machine_type(cat):
    g2 = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
    for o in cat.offers:
        if o.cloud != "gcp" or o.gpu_attach != "bundled":
            continue
        m = re.match(r"^[a-z0-9]+-[a-z]+-(\d+)g?(-nolssd)?$", o.instance_type)
        assert m, o.instance_type
        n = int(m.group(1))
        expected = g2[n] if o.family == "g2-standard" else n
        assert o.gpu_count == expected, o


def test_unique_offer_keys(cat):
    keys = [o.key() for o in cat.offers]
    assert len(keys) == len(set(keys))


def test_zones_belong_to_their_region(cat):
    dirs = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
            "northeast": "ne", "southeast": "se", "northwest": "nw", "southwest": "sw"}
    for o in cat.offers:
        if o.cloud == "gcp":
            assert o.zone and o.zone.startswith(o.region + "-") and len(o.zone) == len(o.region) + 2
        elif o.cloud == "azure":
            assert o.zone is None
        else:
            geo, d, num = o.region.split("-")
            assert o.zone and o.zone.split("-")[0] == f"{geo}{dirs[d]}{num}", o


def test_n1_hosts_within_gce_gpu_limits(cat):
    seen = 0
    for o in cat.offers:
        if o.gpu_attach != "attachable":
            continue
        seen += 1
        assert o.cloud == "gcp" and o.family == "n1" and o.gpu_name in {"T4", "V100", "P100", "P4"}
        max_vcpus, max_ram = G.n1_gpu_limits(o.gpu_name, o.gpu_count, o.zone)
        assert o.vcpus <= max_vcpus and o.memory_gib <= max_ram, o
    assert seen > 4000


def test_attach_mode_per_family(cat):
    for o in cat.offers:
        if o.cloud == "gcp":
            assert G.GCE_FAMILIES[o.family].gpu_attach == o.gpu_attach
        else:
            assert o.gpu_attach == "bundled"


def test_disk_types_per_family(cat):
    for o in cat.offers:
        assert o.disk_types and set(o.disk_types) <= set(F.DISK_TYPES)
        if o.family in ("g2-standard", "a3-highgpu", "a3-megagpu", "a3-edgegpu", "a2-ultragpu"):
            assert "standard" not in o.disk_types, o
        if o.family in ("a3-ultragpu", "a4-highgpu"):
            assert o.disk_types == ("balanced", "ssd")
            assert G.gce_disk_type(o.family, "ssd") == "hyperdisk-balanced"
        if o.family == "n1":
            assert o.disk_types == F.DISK_TYPES


def test_local_nvme_per_family(cat):
    for o in cat.offers:
        assert o.local_nvme_max_gib >= 0
        if o.instance_type.endswith("-nolssd"):
            assert o.local_nvme_max_gib == 0
        if o.family == "n1":
            assert o.local_nvme_max_gib == 9000
    by_type = {o.instance_type: o.local_nvme_max_gib for o in cat.offers}
    assert by_type["a3-highgpu-8g"] == 6000 and by_type["g2-standard-4"] == 375
    assert by_type["Standard_ND96isr_H100_v5"] == 28000


def test_azure_gpu_memory_from_lookup(cat):
    for o in cat.offers:
        if o.cloud != "azure":
            continue
        series = AZ.azure_series(o.instance_type)
        assert series is not None and series.name == o.family and series.gpu_name == o.gpu_name
        frac = AZ.AZURE_FRACTIONAL.get(o.instance_type, 1)
        assert o.gpu_memory_gib == round(series.gpu_memory_gib * frac, 2)
        assert o.hyperv_gen in ("1", "2", "1|2")


def test_provisionable_is_not_stored_and_arch(cat):
    # whether trainvm can provision a cloud is the registry's, not a catalog column
    for name in ("gcp.csv", "azure.csv", "aws.csv"):
        header = (EMBEDDED_DIR / name).open().readline().strip().split(",")
        assert "provisionable" not in header and header == list(COLUMNS)
    for o in cat.offers:
        assert o.provisionable == provisionable(o.cloud)
        assert o.arch in F.ARCHES
        if o.arch == "arm64":
            assert o.instance_type.startswith("g5g.") and o.gpu_name == "T4G"


def test_flags_known(cat):
    for o in cat.offers:
        assert set(o.flags) <= KNOWN_FLAGS, o.flags
        assert list(o.flags) == sorted(o.flags)


def test_memory_has_no_float_artifacts(cat):
    for o in cat.offers:
        assert round(o.memory_gib, 2) == o.memory_gib
        assert round(o.gpu_memory_gib, 2) == o.gpu_memory_gib


def test_gpus_by_cloud(cat):
    got = defaultdict(set)
    for o in cat.offers:
        got[o.cloud].add(o.gpu_name)
    assert got["gcp"] == {"T4", "L4", "V100", "P100", "P4", "A100", "A100-80GB", "H100",
                          "H200", "B200"}
    assert got["azure"] == {"T4", "V100", "V100-32GB", "K80", "M60", "MI25", "A10", "A100",
                            "A100-80GB", "H100"}
    assert got["aws"] == {"T4", "T4G", "A10G", "L4", "L40S", "V100", "V100-32GB", "A100",
                          "A100-80GB", "H100"}
